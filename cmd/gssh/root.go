package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, the contract listed in --help.
const (
	exitOK      = 0
	exitUsage   = 1   // usage or input error
	exitPartial = 2   // some hosts could not be reached or probed
	exitState   = 3   // state busy or unreadable
	exitSignal  = 130 // interrupted (SIGINT/SIGTERM), as shells report 128+2
)

// errInterrupted ends a command cut short by Ctrl-C or SIGTERM: nothing
// half-probed is printed.
var errInterrupted = errors.New("interrupted")

const exitCodesHelp = `Exit status:
  0  success
  1  usage or input error (bad flag, malformed inventory, unknown host)
  2  some hosts could not be reached or probed (the others are still listed)
  3  job state busy (another gssh holds it) or unreadable
  130 interrupted (Ctrl-C)`

// partialError means the command did its work but some hosts failed.
type partialError struct{ failed, total int }

func (e partialError) Error() string {
	return fmt.Sprintf("%d of %d hosts could not be reached or probed", e.failed, e.total)
}

// exitCode maps an error to the process exit status: the one place that does.
func exitCode(err error) int {
	var pe partialError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &pe):
		return exitPartial
	case errors.Is(err, errInterrupted):
		return exitSignal
	case errors.Is(err, state.ErrBusy), errors.Is(err, state.ErrCorrupt), errors.Is(err, state.ErrNewerSchema):
		return exitState
	case errors.Is(err, sshexec.ErrUnreachable), errors.Is(err, sshexec.ErrTimeout), errors.Is(err, sshexec.ErrAuth),
		errors.Is(err, sshexec.ErrHostKey), errors.Is(err, sshexec.ErrUnknownHostKey), errors.Is(err, sshexec.ErrNoOutcome):
		return exitPartial // a host could not be reached (logs, cancel)
	}
	return exitUsage
}

// app holds what every command needs: streams, environment, global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            map[string]string
	environ        []string
	tty            bool // stdout is a terminal

	inventoryPath  string
	stateFile      string
	sshConfigPath  string
	connectTimeout time.Duration
	probeTimeout   time.Duration
}

func (a *app) getenv(k string) string { return a.env[k] }

// Main runs gssh with args and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, env: map[string]string{}, environ: environ}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			a.env[k] = v
		}
	}
	if f, ok := stdout.(*os.File); ok {
		a.tty = term.IsTerminal(int(f.Fd()))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := a.newRootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var pe partialError
		if !errors.As(err, &pe) && !errors.Is(err, errInterrupted) {
			fmt.Fprintln(stderr, "gssh:", err)
		}
	}
	return exitCode(err)
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gssh",
		Short: "One view and one job queue over a handful of GPU servers, through your own SSH setup",
		Long: `gssh reaches every GPU host of a lab over SSH (your ~/.ssh/config, keys,
ssh-agent, known_hosts and ProxyJump), shows every GPU on every host, and
runs jobs on GPUs with room for them. Nothing is installed on the workers by
hand: gssh pushes its small NVML helper (gssh-helper, found beside gssh or
at $GSSH_HELPER) and falls back to nvidia-smi where it cannot run.

Jobs are kept in a state file (--state, $GSSH_STATE, default
~/.local/state/gssh/state.db); run "gssh schedule" from cron or a systemd
timer so queued jobs start and ended jobs are recorded.

Hosts come from an inventory, the first found of --inventory, $GSSH_INVENTORY,
~/.config/gssh/hosts.yaml and /etc/gssh/hosts.yaml; with none, gssh uses the
local host alone.

` + exitCodesHelp,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath())
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.inventoryPath, "inventory", "", "hosts file (default: $GSSH_INVENTORY, ~/.config/gssh/hosts.yaml, /etc/gssh/hosts.yaml)")
	pf.StringVar(&a.stateFile, "state", "", "job state file (default: $GSSH_STATE, ~/.local/state/gssh/state.db)")
	pf.StringVar(&a.sshConfigPath, "ssh-config", "", "OpenSSH client config (default ~/.ssh/config; /etc/ssh/ssh_config is read after it)")
	pf.DurationVar(&a.connectTimeout, "connect-timeout", 0, "SSH connect and handshake timeout when ssh_config sets no ConnectTimeout (default 10s)")
	pf.DurationVar(&a.probeTimeout, "probe-timeout", fleet.DefaultProbeTimeout, "how long one host's GPU probe may take once connected")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.connectTimeout < 0 || a.probeTimeout <= 0 {
			return fmt.Errorf("--connect-timeout and --probe-timeout take a positive duration such as 10s (got %v and %v)", a.connectTimeout, a.probeTimeout)
		}
		return nil
	}
	root.AddCommand(a.newGPUsCmd(nil), a.newHostsCmd(nil), a.newSubmitCmd(), a.newPsCmd(), a.newShowCmd(),
		a.newLogsCmd(), a.newCancelCmd(), a.newScheduleCmd())
	return root
}

// home is $HOME, falling back to the passwd entry.
func (a *app) home() string {
	if h := a.getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

// localUser is the OS user running gssh: the owner of the jobs it submits,
// and %u in ssh_config.
func (a *app) localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return a.getenv("USER")
}

// findHelper locates gssh-helper: $GSSH_HELPER, else beside the gssh
// executable (where `make` puts it). Without one, hosts are probed through
// nvidia-smi and the reason says so.
func (a *app) findHelper() (*probe.HelperBinary, string) {
	path := a.getenv("GSSH_HELPER")
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, "gssh-helper not found: " + err.Error()
		}
		path = filepath.Join(filepath.Dir(exe), "gssh-helper")
		if _, err := os.Stat(path); err != nil {
			return nil, "no gssh-helper beside " + exe + " (a `go install` build?): build it with `make`, or set $GSSH_HELPER"
		}
	}
	bin, err := probe.LoadHelperBinary(path)
	if err != nil {
		return nil, err.Error()
	}
	return bin, ""
}

// cacheDir is $XDG_CACHE_HOME/gssh or ~/.cache/gssh on the controller.
func (a *app) cacheDir(home string) string {
	if x := a.getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "gssh")
	}
	return filepath.Join(home, ".cache", "gssh")
}

// loadFleet reads the inventory and ssh_config and returns a fleet ready to
// reach hosts. Warnings about ssh_config go to stderr once. The caller
// closes the fleet's pool.
func (a *app) loadFleet() (*fleet.Fleet, error) {
	home := a.home()
	var inv *inventory.Inventory
	path, err := inventory.Locate(a.inventoryPath, a.getenv("GSSH_INVENTORY"), home)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		host, _ := os.Hostname()
		host, _, _ = strings.Cut(host, ".")
		if host == "" {
			host = "localhost"
		}
		inv = inventory.LocalOnly(host)
	case err != nil:
		return nil, err
	default:
		if inv, err = inventory.Load(path); err != nil {
			return nil, err
		}
	}
	hostname, _ := os.Hostname()
	env := sshconfig.Env{Home: home, LocalUser: a.localUser(), LocalHost: hostname}
	userCfg := a.sshConfigPath
	if userCfg == "" {
		userCfg = filepath.Join(home, ".ssh", "config")
	} else if fi, err := os.Stat(userCfg); err != nil {
		return nil, fmt.Errorf("--ssh-config: %w", err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("--ssh-config %s is a directory; give the config file", userCfg)
	}
	cfg, err := sshconfig.Load(env, userCfg, "/etc/ssh/ssh_config")
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(a.stderr, "gssh: warning:", w)
	}
	f := &fleet.Fleet{Inv: inv, SSH: cfg, Local: sshexec.Local{Env: a.environ}}
	f.Helper, f.NoHelperWhy = a.findHelper()
	f.Memo = fleet.NewFileMemo(filepath.Join(a.cacheDir(home), "helper-fallback.json"), time.Now)
	f.Remote = sshexec.NewPool(sshexec.PoolOptions{
		Resolve:        f.Settings,
		AgentSock:      a.getenv("SSH_AUTH_SOCK"),
		ConnectTimeout: a.connectTimeout,
		Warn:           func(s string) { fmt.Fprintln(a.stderr, "gssh:", s) },
	})
	return f, nil
}
