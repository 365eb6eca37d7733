package faults

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// root is the module's root directory (this package's parent).
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the gssh binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// gsshBinary builds bin/gssh as `make` does (static, no cgo) into a temp
// dir, once per test binary, and returns its path. It has no helper
// beside it, so hosts are probed through (the fake) nvidia-smi.
func gsshBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gssh-faults")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gssh")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "gssh_test", "-o", binPath, "./cmd/gssh")
		cmd.Dir = root(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/gssh: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// fleet is a controller's world for the gssh binary: a HOME with an
// ssh_config, key and known_hosts reaching a few real sshd hosts whose
// nvidia-smi replays the a100x4 fixture (GPU 3 idle, GPUs 0-2 partly used
// by other processes), the local host `ctl` (the same fixture), an
// inventory and a state file.
type fleet struct {
	t     *testing.T
	bin   string
	dir   string   // the controller's working directory (also each job's workdir)
	env   []string // the gssh processes' environment
	state string   // GSSH_STATE
	hosts []string // inventory host names, ctl last
	// jobRoots are the hosts' ~/.gssh/jobs, where each launch attempt
	// makes its directory.
	jobRoots []string
}

// newFleet starts n sshd hosts w1..wn beside the local host ctl (n = 0:
// ctl alone).
func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{t: t, bin: gsshBinary(t), dir: t.TempDir()}
	fixtures := filepath.Join(root(t), "probe", "testdata", "fleet")
	// Only nvidia-smi is faked: ps is the real one, so the launch
	// protocol's process checks see the real process table.
	fakebin := filepath.Join(f.dir, "fakebin")
	home := filepath.Join(f.dir, "home")
	for _, d := range []string{fakebin, filepath.Join(home, ".ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root(t), "probe", "testdata", "fake-nvidia-smi"), filepath.Join(fakebin, "nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	smiDir := filepath.Join(fixtures, "a100x4")
	var inv, cfg, known strings.Builder
	inv.WriteString("hosts:\n")
	if n > 0 {
		key := sshtest.NewKey(t, filepath.Join(home, ".ssh"), "")
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("w%d", i)
			s := sshtest.StartSSHD(t, sshtest.SSHDOptions{
				ListenIP:       fmt.Sprintf("127.0.5.%d", i),
				AuthorizedKeys: []string{key.AuthorizedLine},
				SetEnv:         map[string]string{"PATH": fakebin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR": smiDir},
			})
			fmt.Fprintf(&inv, "  - name: %s\n", name)
			fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n  Port %d\n", name, s.Host, s.Port)
			known.WriteString(s.KnownHostsLine + "\n")
			f.hosts = append(f.hosts, name)
			f.jobRoots = append(f.jobRoots, filepath.Join(s.Home, ".gssh", "jobs"))
		}
		fmt.Fprintf(&cfg, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  ConnectTimeout 20\n", sshdUser(t), key.Path)
	}
	inv.WriteString("  - name: ctl\n    local: true\n")
	f.hosts = append(f.hosts, "ctl")
	f.jobRoots = append(f.jobRoots, filepath.Join(home, ".gssh", "jobs"))
	for p, data := range map[string]string{
		filepath.Join(f.dir, "hosts.yaml"):         inv.String(),
		filepath.Join(home, ".ssh", "config"):      cfg.String(),
		filepath.Join(home, ".ssh", "known_hosts"): known.String(),
	} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.state = filepath.Join(f.dir, "state", "state.db")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GSSH_") || strings.HasPrefix(k, "XDG_") || k == "HOME" || k == "PATH" || k == "SSH_AUTH_SOCK" {
			continue
		}
		f.env = append(f.env, kv)
	}
	f.env = append(f.env,
		"HOME="+home,
		"PATH="+fakebin+":"+os.Getenv("PATH"),
		"SSH_AUTH_SOCK=",
		"GSSH_INVENTORY="+filepath.Join(f.dir, "hosts.yaml"),
		"GSSH_STATE="+f.state,
		"GSSH_FAKE_SMI_DIR="+smiDir,                                               // ctl's GPUs
		"GSSH_CLAIMS_DIR="+filepath.Join(f.dir, "ctl-claims"),                     // ctl's GPU claims: this test's own
		"GSSH_TEST_SYSTEM_INVENTORY="+filepath.Join(f.dir, "etc-gssh-hosts.yaml"), // the test build's machine-wide inventory: never the machine's
	)
	return f
}

// setState makes path the state file of the gssh processes.
func (f *fleet) setState(path string) {
	f.state = path
	for i, kv := range f.env {
		if strings.HasPrefix(kv, "GSSH_STATE=") {
			f.env[i] = "GSSH_STATE=" + path
		}
	}
}

// home is the controller's HOME: the local host's jobs run in its
// ~/.gssh/jobs.
func (f *fleet) home() string { return filepath.Join(f.dir, "home") }

// sshdUser is the login user of the sshd hosts: the user running the test.
func sshdUser(t *testing.T) string {
	t.Helper()
	u := os.Getenv("USER")
	if u == "" {
		out, err := exec.Command("id", "-un").Output()
		if err != nil {
			t.Fatal(err)
		}
		u = strings.TrimSpace(string(out))
	}
	return u
}

// result is how one gssh process ended.
type result struct {
	args           []string
	stdout, stderr string
	code           int  // exit status (-1: killed by a signal)
	killed         bool // the test killed it with SIGKILL before it exited
	took           time.Duration
}

func (r result) String() string {
	how := fmt.Sprintf("exit %d", r.code)
	if r.killed {
		how = "SIGKILLed"
	}
	return fmt.Sprintf("gssh %s: %s after %s\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), how, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// gssh runs the gssh binary with args and waits for it.
func (f *fleet) gssh(args ...string) result {
	f.t.Helper()
	return f.start(args...).wait()
}

// proc is a gssh process the test started, in a process group of its own.
type proc struct {
	args      []string
	cmd       *exec.Cmd
	out, errb bytes.Buffer
	begun     time.Time
	done      chan struct{} // closed once it exited and was reaped
	res       result
}

// start starts the gssh binary with args.
func (f *fleet) start(args ...string) *proc {
	f.t.Helper()
	p := &proc{args: args, cmd: exec.Command(f.bin, args...), done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = f.dir, f.env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	p.begun = time.Now()
	if err := p.cmd.Start(); err != nil {
		f.t.Fatalf("start gssh: %v", err)
	}
	go func() {
		err := p.cmd.Wait()
		r := result{args: args, took: time.Since(p.begun), stdout: p.out.String(), stderr: p.errb.String()}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				r.killed = true // only the test sends it
			}
		default:
			r.code, r.stderr = -1, r.stderr+"\n(wait: "+err.Error()+")"
		}
		p.res = r
		close(p.done)
	}()
	return p
}

// kill sends SIGKILL to p, unless it has exited: to the process alone, or
// to its whole process group (its local launchers too) when group.
func (p *proc) kill(group bool) {
	select {
	case <-p.done:
		return
	default:
	}
	// Signal goes through a pidfd: never to a pid reused meanwhile.
	p.cmd.Process.Signal(syscall.SIGKILL)
	if group {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the group outlives its leader while members remain
	}
}

// wait waits for p to end and says how it did.
func (p *proc) wait() result {
	<-p.done
	return p.res
}

// signal sends sig to p (the process alone), unless it has exited.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig) // through a pidfd: never to a pid reused meanwhile
}
