package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gssh/gssh/nvmlfake"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// TestMain makes this test binary the command gssh of the scripts in
// raceScripts (testscript.Main: built as `go test` builds it, with -race
// under make test); the other scripts run a gssh built once, without
// -race (see TestScripts).
func TestMain(m *testing.M) {
	testscript.Main(parallelM{m, scriptParallel}, map[string]func(){
		"gssh": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())) },
	})
}

// scriptParallel is how many tests of this package run at once unless
// -parallel says: the scripts and the sshd tests mostly wait (on sshd,
// on jobs, on probe timeouts), so more than the cores' count.
const scriptParallel = 8

// parallelM runs the tests with -parallel n unless it was given.
type parallelM struct {
	m *testing.M
	n int
}

func (p parallelM) Run() int {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(p.n)); err != nil {
			panic(err)
		}
	}
	code := p.m.Run()
	if theBuild.dir != "" {
		os.RemoveAll(theBuild.dir)
	}
	return code
}

// raceScripts are the scripts whose gssh is this test binary, and why:
// what they run concurrently within one gssh process is where a data
// race would be (the packages' own tests run under -race as well). Each
// of their gssh processes starts and exits slower than the plain build's.
var raceScripts = map[string]string{
	"run":  "gssh run: the signal relay, stdin and the output streams, the pty, the keeper, a walltime pass, all at once",
	"gpus": "the whole fleet probed at once: a goroutine and an SSH connection per host, over the sshexec pool",
	"jobs": "logs -f: the log streamed while the job runs; cancel's grace",
}

// gsshBuild is the one gssh binary this test process builds (buildGssh),
// removed when the tests end.
type gsshBuild struct {
	once sync.Once
	dir  string
	err  error
}

// theBuild is this test process's; parallelM.Run removes its directory.
var theBuild gsshBuild

// buildGssh builds gssh as `make build` does (static, no cgo), with the
// test clock (-tags gssh_test: testhooks.go), once for every test of
// this process, into a directory every user may read and traverse (the
// shared-lab tests run it as the users they make), and returns that
// directory. Tests must not write there.
func buildGssh(t *testing.T) string {
	t.Helper()
	b := &theBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "gssh-bin-"); b.err != nil {
			return
		}
		if b.err = os.Chmod(b.dir, 0o755); b.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "gssh_test", "-o", filepath.Join(b.dir, "gssh"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/gssh: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// testNow is the time of day the scripts run at, from $GSSH_TEST_NOW
// (RFC 3339, such as 2026-12-02T23:30:00Z; make test-clock); the zero
// time when unset: the machine's clock.
func testNow(t *testing.T) time.Time {
	t.Helper()
	s := os.Getenv("GSSH_TEST_NOW")
	if s == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("GSSH_TEST_NOW=%q: give an RFC 3339 time, such as 2026-12-02T23:30:00Z: %v", s, err)
	}
	if !testClockBuilt {
		t.Fatalf("GSSH_TEST_NOW=%s: the scripts in raceScripts run this test binary, which has no test clock: go test -tags gssh_test", s)
	}
	return at
}

// fleetHost is one test host: a real sshd whose nvidia-smi replays a
// fixture of probe/testdata/fleet, or a failure of a kind.
type fleetHost struct {
	name    string
	fixture string // probe/testdata/fleet/<fixture>; "" = no nvidia-smi on PATH
	kind    string // "" (sshd), "down", "silent", "badkey", "noauth", "local"
	labels  string
	driver  string // GSSH_FAKE_SMI_DRIVER: the fake nvidia-smi plays this driver ("418": no mig.mode.current)
}

var testFleet = []fleetHost{
	{name: "a100", fixture: "a100x4", labels: "[a100, nvlink]"},
	{name: "mig", fixture: "h100-mig", labels: "[h100]"},
	{name: "lost", fixture: "lost-gpu"},
	{name: "errgpu", fixture: "err-gpu"},
	{name: "reset", fixture: "requires-reset"},
	{name: "gb10", fixture: "gb10-unified"},
	{name: "nouuid", fixture: "empty-uuid"},
	{name: "perm", fixture: "perm-denied"},
	{name: "nodriver", fixture: "driver-not-loaded"},
	{name: "mismatch", fixture: "driver-mismatch"},
	{name: "nonvml", fixture: "nvml-missing"},
	{name: "nogpu", fixture: "no-devices"},
	{name: "garbage", fixture: "garbage"},
	{name: "warn", fixture: "warning-mixed"},
	{name: "hang", fixture: "hang"},
	{name: "nosmi"},
	{name: "down", kind: "down"},
	{name: "silent", kind: "silent"},
	{name: "badkey", fixture: "a100x4", kind: "badkey"},
	{name: "noauth", fixture: "a100x4", kind: "noauth"},
	{name: "ctl", fixture: "a100x4", kind: "local"},
	{name: "oldsmi", fixture: "v100-r418", driver: "418"},
}

// testClock is the scripts' environment that sets their clock to at
// (nil when at is zero): the suite starts at that time on gssh's clock
// (GSSH_TEST_CLOCK, testhooks.go), which then runs on at the machine's
// rate. The local host is the controller's own machine, whose clock it
// shares: the script's processes (ctl's shells and jobs among them) run
// on the same shifted clock through libfaketime. The sshd hosts keep the
// real time, as workers whose clocks are off do.
func testClock(t *testing.T, at time.Time) map[string]string {
	t.Helper()
	if at.IsZero() {
		return nil
	}
	offset := time.Until(at).Round(time.Second)
	env := sshtest.SkewedClock(t, fmt.Sprintf("%+d", int64(offset/time.Second)))
	env["GSSH_TEST_CLOCK"] = offset.String()
	t.Logf("the scripts run at %s on gssh's clock (GSSH_TEST_CLOCK=%s)", at.Format(time.RFC3339), offset)
	return env
}

// TestScripts runs testdata/script/*.txtar against a fleet of real OpenSSH
// hosts on loopback. Each script gets $INV (an inventory of every host),
// $SSHCFG (the ssh_config reaching them) and HOME with the key and
// known_hosts.
//
// The scripts run in parallel (as many at once as -parallel allows: make
// test gives 8; they mostly wait on sshd, jobs and timeouts). Each waits
// for what it needs (waitfor) rather than sleeping. Every script's times
// are UTC (TZ), and $GSSH_TEST_NOW sets the time of day they run at.
func TestScripts(t *testing.T) {
	t.Parallel() // beside this package's other sshd tests
	runScripts(t, nil, serveNone)
}

// servedScripts are the scripts TestScriptsServed runs again, with every
// command after their through-serve line going through a gssh serve the
// test started (GSSH_SERVER): the same outputs and exit statuses.
var servedScripts = []string{"jobs", "events", "run"}

// TestScriptsServed runs servedScripts through gssh serve's socket.
func TestScriptsServed(t *testing.T) {
	t.Parallel()
	runScripts(t, servedFiles(), serveSocket)
}

// TestScriptsHTTP runs servedScripts through gssh serve's HTTP API
// (GSSH_SERVER its URL, GSSH_TOKEN a token of the script's user): the
// same outputs and exit statuses again.
func TestScriptsHTTP(t *testing.T) {
	t.Parallel()
	runScripts(t, servedFiles(), serveHTTP)
}

func servedFiles() []string {
	var files []string
	for _, name := range servedScripts {
		files = append(files, filepath.Join("testdata", "script", name+".txtar"))
	}
	return files
}

// How a script's commands after through-serve reach the state: directly
// (TestScripts), through gssh serve's socket, or its HTTP API.
const (
	serveNone = iota
	serveSocket
	serveHTTP
)

// runScripts runs the scripts of testdata/script (files: those alone,
// through gssh serve as via says).
func runScripts(t *testing.T, files []string, via int) {
	sshtest.RequireSSHD(t)
	for name := range raceScripts {
		if _, err := os.Stat(filepath.Join("testdata", "script", name+".txtar")); err != nil {
			t.Fatalf("raceScripts names %s: %v", name, err)
		}
	}
	clockEnv := testClock(t, testNow(t))
	plainBin := buildGssh(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fixtures := filepath.Join(root, "probe", "testdata", "fleet")
	dir := t.TempDir()
	withSMI := fakeSMIBin(t, root) // nvidia-smi and ps replay the fixture named by GSSH_FAKE_SMI_DIR
	// The helper path: the real gssh-helper and the fake libnvidia-ml.so.1
	// serving the same fixtures (scripts opt in with GSSH_HELPER=$HELPERBIN).
	lib := nvmlfake.Build(t)
	helperBin := nvmlfake.BuildHelper(t)
	plotBin := buildPlotter(t) // gssh sim --plot runs it ($GSSH_PLOT)
	key := sshtest.NewKey(t, dir, "")
	stranger := sshtest.NewKey(t, "", "")
	encrypted := sshtest.NewKey(t, "", "passphrase")
	exitLog := exitLogFor(t, files != nil) // each command's exits, checked against its --help once the scripts are done

	dirOf := "testdata/script"
	if files != nil {
		dirOf = ""
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dirOf,
		Files:               files,
		RequireExplicitExec: true,
		// [served]: the script's run through gssh serve (TestScriptsServed).
		Condition: func(cond string) (bool, error) {
			if cond == "served" {
				return files != nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){"pty": ptyCmd, "boltput": boltPutCmd, "boltdamage": boltDamageCmd, "waitfor": waitforCmd,
			"through-serve": throughServeCmd(via)},
		Setup: func(e *testscript.Env) error {
			home := filepath.Join(e.WorkDir, "home")
			sshDir := filepath.Join(home, ".ssh")
			if err := os.MkdirAll(sshDir, 0o700); err != nil {
				return err
			}
			inv, cfg, known := fleetFor(t, withSMI, fixtures, lib, key, stranger)
			files := map[string]string{
				filepath.Join(e.WorkDir, "hosts.yaml"): inv,
				filepath.Join(sshDir, "config"):        cfg,
				filepath.Join(sshDir, "known_hosts"):   known,
			}
			for p, data := range files {
				if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
					return err
				}
			}
			e.Setenv("HOME", home)
			e.Setenv("INV", filepath.Join(e.WorkDir, "hosts.yaml"))
			e.Setenv("SSH_AUTH_SOCK", "")
			e.Setenv("GSSH_INVENTORY", "")
			// gssh: the plain build first, or (raceScripts) this test
			// binary, which testscript.Main put first on PATH. The local
			// host `ctl` probes through the same fake nvidia-smi.
			path := withSMI + ":" + os.Getenv("PATH")
			if _, race := raceScripts[strings.TrimPrefix(filepath.Base(e.WorkDir), "script-")]; race {
				// The race runtime waits 1 s at every exit for reports
				// to come in: 10 ms is enough for a command that ended.
				e.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=10"))
			} else {
				path = plainBin + ":" + path
			}
			e.Setenv("PATH", path)
			e.Setenv("TZ", "UTC")
			for k, v := range clockEnv {
				e.Setenv(k, v)
			}
			e.Setenv("GSSH_FAKE_SMI_DIR", filepath.Join(fixtures, "a100x4"))
			e.Setenv("GSSH_CLAIMS_DIR", filepath.Join(e.WorkDir, "ctl-claims"))         // ctl's GPU claims: the script's own
			e.Setenv(testInventoryEnv, filepath.Join(e.WorkDir, "etc-gssh-hosts.yaml")) // the script's own machine-wide inventory: never the machine's
			e.Setenv("FIXTURES", fixtures)
			e.Setenv("ENCKEY", encrypted.Path)
			e.Setenv("HELPERBIN", helperBin)
			e.Setenv("GSSH_PLOT", plotBin)
			e.Setenv("LD_LIBRARY_PATH", lib)
			e.Setenv(exitLogEnv, exitLog)
			return nil
		},
	})
}

func hostPort(addr string) string {
	host, port, _ := strings.Cut(addr, ":")
	return "[" + host + "]:" + port
}

// sshdUser is the login user of the test sshd hosts: the user running the test.
func sshdUser(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// fleetFor starts the test fleet for one script: every sshd host anew,
// with a home and a GPU claims registry of its own, so that the jobs one
// script leaves on a worker are never another script's (each script's
// queue would take them for another queue's, see launch.OtherQueues). It
// returns
// the inventory, the ssh_config and the known_hosts that reach them.
func fleetFor(t *testing.T, withSMI, fixtures, lib string, key, stranger sshtest.Key) (inv, cfg, known string) {
	var invb, cfgb, knownb strings.Builder
	invb.WriteString("hosts:\n")
	for i, h := range testFleet {
		fmt.Fprintf(&invb, "  - name: %s\n", h.name)
		if h.labels != "" {
			fmt.Fprintf(&invb, "    labels: %s\n", h.labels)
		}
		var addr string
		switch h.kind {
		case "local":
			invb.WriteString("    local: true\n")
			continue
		case "down":
			addr = "127.0.0.1:1" // nothing listens on port 1
		case "silent":
			addr = sshtest.Silent(t)
		default:
			path := "/usr/bin:/bin"
			env := map[string]string{}
			if h.fixture != "" {
				path = withSMI + ":" + path
				env["GSSH_FAKE_SMI_DIR"] = filepath.Join(fixtures, h.fixture)
			}
			if h.driver != "" {
				env["GSSH_FAKE_SMI_DRIVER"] = h.driver
			}
			env["PATH"] = path
			env["GSSH_CLAIMS_DIR"] = t.TempDir() // this host's GPU claims (launch.ClaimsDirEnv)
			if h.fixture != "" {
				env["LD_LIBRARY_PATH"] = lib // a host without nvidia-smi has no driver either
			}
			authorized := key.AuthorizedLine
			if h.kind == "noauth" {
				authorized = stranger.AuthorizedLine
			}
			s := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: fmt.Sprintf("127.0.2.%d", i+1), AuthorizedKeys: []string{authorized}, SetEnv: env})
			addr = s.Addr
			line := s.KnownHostsLine
			if h.kind == "badkey" {
				other := sshtest.NewServer(t, sshtest.ServerOptions{})
				line = strings.Replace(other.KnownHostsLine, hostPort(other.Addr), hostPort(s.Addr), 1)
			}
			knownb.WriteString(line + "\n")
		}
		host, port, _ := strings.Cut(addr, ":")
		fmt.Fprintf(&cfgb, "Host %s\n  HostName %s\n  Port %s\n", h.name, host, port)
		if h.kind == "silent" {
			cfgb.WriteString("  ConnectTimeout 1\n")
		}
	}
	user := sshdUser(t)
	fmt.Fprintf(&cfgb, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  ConnectTimeout 20\n", user, key.Path)

	return invb.String(), cfgb.String(), knownb.String()
}
