package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

// app is what every command needs (cli/cli's Factory): streams, the
// environment, the global flags, and the service built from them.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            map[string]string
	environ        []string
	tty            bool // stdout is a terminal
	now            func() time.Time
	// systemInventory is the machine-wide inventory, where a lab's shared
	// queue is set up (inventory.SystemPath; the test build can move it:
	// testhooks.go).
	systemInventory string

	inventoryPath  string
	stateFile      string
	sshConfigPath  string
	connectTimeout time.Duration
	probeTimeout   time.Duration
	stateWait      time.Duration
	server         string // --server: gssh serve's socket, or its HTTP API's URL
	tokenFile      string // --token-file: the HTTP API's token

	svc service.Service // made on first use (see service); closed by Main
	// done closes when the command is interrupted (Ctrl-C, SIGTERM):
	// a wait for the state file's lock ends then.
	done <-chan struct{}

	sigMu     sync.Mutex
	intercept func(os.Signal) bool // see onSignal
	stoppedBy os.Signal            // the first signal that interrupted the command
}

// onSignal makes f see SIGINT and SIGTERM first (gssh run passes Ctrl-C
// to its job): when f returns true the signal is taken, otherwise it
// interrupts the command as usual. nil restores the usual.
func (a *app) onSignal(f func(os.Signal) bool) {
	a.sigMu.Lock()
	a.intercept = f
	a.sigMu.Unlock()
}

func (a *app) intercepted(s os.Signal) bool {
	a.sigMu.Lock()
	f := a.intercept
	a.sigMu.Unlock()
	return f != nil && f(s)
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
	now, err := clockOf(a.env)
	if err != nil {
		fmt.Fprintln(stderr, "gssh:", err)
		return exitUsage
	}
	a.now, a.systemInventory = now, systemInventoryOf(a.env)
	if f, ok := stdout.(*os.File); ok {
		a.tty = term.IsTerminal(int(f.Fd()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if !a.intercepted(s) {
				a.sigMu.Lock()
				if a.stoppedBy == nil {
					a.stoppedBy = s
				}
				a.sigMu.Unlock()
				cancel() // Ctrl-C or SIGTERM: the command is interrupted (exit 130 or 143)
			}
		}
	}()
	a.done = ctx.Done()
	root := a.newRootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if c, ok := a.svc.(io.Closer); ok {
		c.Close()
	}
	if printsError(err) {
		fmt.Fprintln(stderr, "gssh:", err)
	}
	a.sigMu.Lock()
	stopped := a.stoppedBy
	a.sigMu.Unlock()
	code := exitStatus(cmd, err, stopped)
	logExit(a.getenv(exitLogEnv), cmd, err, code)
	return code
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gssh",
		Short: "One view and one job queue over a handful of GPU servers, through your own SSH setup",
		Long: `gssh turns a handful of GPU servers into one view and one fair job queue
over SSH. It reaches each host as "ssh HOST" would (~/.ssh/config, keys,
ssh-agent, known_hosts, ProxyJump), shows every GPU on every host, and runs
jobs on GPUs with room for them. Workers need only sshd, a POSIX shell and
the NVIDIA driver.

Start here:
  gssh hosts                               is every host reachable?
  gssh gpus                                every GPU: memory, load, users, jobs
  gssh submit --mem 8G -- python train.py  queue a job; it starts where it fits
  gssh ps                                  the queue, and why each job waits

Hosts come from --inventory, $GSSH_INVENTORY, ~/.config/gssh/hosts.yaml or
/etc/gssh/hosts.yaml (with none: this host alone); jobs are kept in --state
(default ~/.local/state/gssh/state.db). Keep "gssh serve" running, or run
"gssh schedule" every minute from cron, so queued jobs start and ended
ones are recorded.

Read more: "gssh COMMAND --help", and README.md and docs/ in gssh's source
(jobs, scheduling, sharing a lab, failure modes, operating, JSON).`,
		Annotations: exits(usageExit,
			exitLine{exitPartial, "some hosts could not be reached or probed (the others are still listed);\n" +
				"logs, cancel, requeue: the job's host; schedule: a host or job had a problem"},
			exitLine{exitState, stateExit.text + ";\nschedule: another pass holds the pass lock"},
			exitLine{exitTimedOut, "drain --wait --timeout ran out with gssh jobs still on the hosts"},
			exitLine{exitJob, "wait, run, submit --wait, logs -f: the job's status, as gssh wait --help says"},
			exitLine{exitGssh, "wait, run, submit --wait, logs -f: gssh itself failed"},
			signalExit, termExit),
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
	pf.DurationVar(&a.connectTimeout, "connect-timeout", 0, "SSH connect timeout when ssh_config sets no ConnectTimeout (0: 10s)")
	pf.DurationVar(&a.probeTimeout, "probe-timeout", fleet.DefaultProbeTimeout, "how long one host's GPU probe may take once connected")
	pf.DurationVar(&a.stateWait, "state-wait", state.DefaultTimeout, "how long to wait for another gssh's lock on the state file (0: once)")
	pf.StringVar(&a.server, "server", "", "gssh serve's socket or HTTP API URL: every command goes through it, and fails when none answers (default: $GSSH_SERVER; else the socket beside the state, when one answers)")
	pf.StringVar(&a.tokenFile, "token-file", "", "with an HTTP --server: the file holding your token (default: $GSSH_TOKEN, the token itself)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := checkDuration("--connect-timeout", a.connectTimeout, 0, 10*time.Minute); err != nil {
			return err
		}
		if err := checkDuration("--state-wait", a.stateWait, 0, time.Hour); err != nil {
			return err
		}
		if err := a.checkServer(); err != nil {
			return err
		}
		return checkDuration("--probe-timeout", a.probeTimeout, time.Second, time.Hour)
	}
	root.AddCommand(newGPUsCmd(a, nil), newHostsCmd(a, nil), newSubmitCmd(a, nil), newPsCmd(a, nil), newShowCmd(a, nil),
		newLogsCmd(a, nil), newCancelCmd(a, nil), newHoldCmd(a, nil), newReleaseCmd(a, nil), newUpdateCmd(a, nil),
		newRequeueCmd(a, nil), newWaitCmd(a, nil), newRunCmd(a, nil), newScheduleCmd(a, nil), newServeCmd(a, nil), newUsageCmd(a, nil),
		newSimCmd(a, nil), newReapCmd(a, nil), newEventsCmd(a, nil), newDrainCmd(a, nil), newResumeCmd(a, nil), newDoctorCmd(a, nil),
		newSlurmConfCmd(a, nil), newHistoryCmd(a, nil))
	root.AddCommand(newStateCmd(a), newVersionCmd(a, nil), newLabCmd(a), newTokenCmd(a), newDemoCmd(a, nil), newTemplateCmd(a), newCronCmd(a))
	groupCommands(root)
	root.SetUsageTemplate(usageTemplate(root))
	return root
}

// checkDuration refuses a duration flag outside [lo, hi]: negative ones,
// and ones no one means (a grace of a week).
func checkDuration(flag string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		f := units.FormatDuration
		return fmt.Errorf("%s %s: give a duration from %s to %s", flag, f(d), f(lo), f(hi))
	}
	return nil
}

// service returns the service the commands call: the one set (tests), or
// one made from the global flags and the environment on first use: a
// service.Local, whose calls a running gssh serve answers where it can
// (service.Remote).
func (a *app) service() service.Service {
	if a.svc == nil {
		a.svc = service.Remote{Local: a.newLocal()} // what the state's gssh serve answers, it answers
	}
	return a.svc
}

// newLocal is a service.Local made from the global flags and the
// environment, its inventory and ssh_config read afresh when first used
// (gssh serve makes another on SIGHUP).
func (a *app) newLocal() *service.Local {
	home := a.home()
	hostname, _ := os.Hostname()
	return service.New(service.Options{
		Fleet: fleet.Options{
			InventoryPath:   a.inventoryPath,
			InventoryEnv:    a.getenv("GSSH_INVENTORY"),
			SystemInventory: a.systemInventory,
			Home:            home,
			LocalUser:       a.localUser(),
			LocalHost:       hostname,
			SSHConfig:       a.sshConfigPath,
			AgentSock:       a.getenv("SSH_AUTH_SOCK"),
			ConnectTimeout:  a.connectTimeout,
			Environ:         a.environ,
			HelperPath:      a.getenv("GSSH_HELPER"),
			CacheDir:        a.cacheDir(home),
			Warn:            func(s string) { fmt.Fprintln(a.stderr, "gssh:", s) },
			Now:             a.now,
		},
		StatePath:     a.statePath(),
		Server:        a.serverPath(),
		Token:         a.tokenOrNone(),
		StateExplicit: a.stateFile != "" || a.getenv("GSSH_STATE") != "",
		StateWait:     cmp.Or(a.stateWait, -1), // --state-wait 0: one try
		StateTrace:    stateTrace(a.getenv("GSSH_STATE_TRACE")),
		StateCancel:   a.done,
		User:          a.localUser(),
		Owner:         a.localUser(), // personal mode: the queue is the user's own
		ProbeTimeout:  a.probeTimeout,
		Now:           a.now,
		LabInventory:  a.systemInventory,
	})
}

// stateTrace is the state.Options.Trace hook of $GSSH_STATE_TRACE: when
// it names a file, each state operation appends one JSON line to it
// ({"pid", "op", "write", "waited_s", "held_s", "error"}: seconds, to the
// microsecond), to
// see who holds the state file how long; nil when it is empty. A line
// that cannot be written is dropped: tracing never fails a command.
func stateTrace(path string) func(state.Op) {
	if path == "" {
		return nil
	}
	pid := os.Getpid()
	return func(op state.Op) {
		line := struct {
			PID    int     `json:"pid"`
			Op     string  `json:"op"`
			Write  bool    `json:"write"`
			Waited float64 `json:"waited_s"`
			Held   float64 `json:"held_s"`
			Err    string  `json:"error,omitempty"`
		}{pid, op.Name, op.Write, job.SecondsTo(op.Waited, time.Microsecond), job.SecondsTo(op.Held, time.Microsecond), ""}
		if op.Err != nil {
			line.Err = op.Err.Error()
		}
		b, err := json.Marshal(line)
		if err != nil {
			return
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return
		}
		f.Write(append(b, '\n')) // one write: lines of concurrent processes never mix
		f.Close()
	}
}

// statePath is --state, else $GSSH_STATE, else ~/.local/state/gssh/state.db.
func (a *app) statePath() string {
	if a.stateFile != "" {
		return a.stateFile
	}
	if p := a.getenv("GSSH_STATE"); p != "" {
		return p
	}
	return state.DefaultPath(a.home(), a.getenv("XDG_STATE_HOME"))
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

// cacheDir is $XDG_CACHE_HOME/gssh or ~/.cache/gssh on the controller.
func (a *app) cacheDir(home string) string {
	if x := a.getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "gssh")
	}
	return filepath.Join(home, ".cache", "gssh")
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// warnf prints one warning on stderr.
func (a *app) warnf(w string) { fmt.Fprintln(a.stderr, "gssh: warning:", w) }

// warn prints each problem as a warning on stderr. State writes that
// failed for a full disk are told once, in full, and then counted: a pass
// on a full disk fails to record every job it reaches, for one reason.
func (a *app) warn(problems []error) {
	full := 0
	for _, e := range problems {
		if errors.Is(e, state.ErrDiskFull) {
			if full++; full > 1 {
				continue
			}
		}
		fmt.Fprintln(a.stderr, "gssh: warning:", e)
	}
	if full > 1 {
		fmt.Fprintf(a.stderr, "gssh: warning: %d more changes to jobs were not stored, for the same reason (the state file's disk is full)\n", full-1)
	}
}

// interrupted maps an error of a command cut short by Ctrl-C to
// errInterrupted, which prints nothing more.
func interrupted(ctx context.Context, err error) error {
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)) {
		return errInterrupted
	}
	return err
}

// serverPath is gssh serve's socket as --server or $GSSH_SERVER name it
// (absolute); "" when neither does.
func (a *app) serverPath() string {
	p := cmp.Or(a.server, a.getenv("GSSH_SERVER"))
	if p == "" || serve.IsURL(p) {
		return strings.TrimSuffix(p, "/")
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// checkServer refuses a --server or $GSSH_SERVER that names no socket
// path.
func (a *app) checkServer() error {
	p := cmp.Or(a.server, a.getenv("GSSH_SERVER"))
	what := "--server"
	if a.server == "" {
		what = "$GSSH_SERVER"
	}
	switch {
	case p == "" && a.server == "" && a.getenv("GSSH_SERVER") == "":
		return nil
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("%s is empty: give gssh serve's socket, such as ~/.local/state/gssh/state.db.sock (or leave it out)", what)
	case strings.Contains(p, "://") && !serve.IsURL(p):
		return fmt.Errorf("%s %s: give the path of gssh serve's unix socket (STATE.sock beside its state), or its HTTP API's http:// or https:// URL", what, p)
	case serve.IsURL(p):
		if _, err := a.token(); err != nil {
			return err
		}
	}
	return nil
}

// tokenOrNone is token, "" when it cannot be read (checkServer said
// why before any command ran).
func (a *app) tokenOrNone() string {
	tok, _ := a.token()
	return tok
}

// token is the HTTP API's token, from --token-file or $GSSH_TOKEN (the
// token itself): "" when neither is given. An unreadable or empty file is
// an error naming it.
func (a *app) token() (string, error) {
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("--token-file %s is empty: put the token gssh token create printed in it", a.tokenFile)
		}
		return tok, nil
	}
	return strings.TrimSpace(a.getenv("GSSH_TOKEN")), nil
}
