package launch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/sshexec/sshtest"
)

const cluster = "0123456789abcdef"

// worker is one real OpenSSH host on loopback with its own HOME.
type worker struct {
	sshd     *sshtest.SSHD
	settings sshconfig.Settings
}

func startWorker(t *testing.T, env map[string]string) worker {
	t.Helper()
	sshtest.RequireSSHD(t)
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env[launch.ClaimsDirEnv]; !ok {
		env[launch.ClaimsDirEnv] = filepath.Join(dir, "claims") // never the machine's own registry
	}
	s := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}, SetEnv: env})
	kh := sshtest.KnownHosts(t, dir, s.KnownHostsLine)
	host, port, _ := net.SplitHostPort(s.Addr)
	p, _ := strconv.Atoi(port)
	return worker{sshd: s, settings: sshconfig.Settings{Alias: "w", HostName: host, Port: p, User: s.User,
		IdentityFiles: []string{key.Path}, IdentitiesExplicit: true, IdentitiesOnly: true,
		UserKnownHostsFiles: []string{kh}, StrictHostKeyChecking: "yes"}}
}

// pool opens a fresh pool to w: a new controller process would.
func (w worker) pool(t *testing.T) *sshexec.Pool {
	p := sshexec.NewPool(sshexec.PoolOptions{Resolve: func(string) (sshconfig.Settings, error) { return w.settings, nil }})
	t.Cleanup(func() { p.Close() })
	return p
}

func newJob(id job.ID, argv ...string) job.Job {
	return job.Job{ID: id, Attempt: 1, Spec: job.Spec{Argv: argv, Workdir: "~", GPUs: 1}, Placement: job.Placement{Host: "w", GPUs: []string{"GPU-a"}, Indexes: []int{0}}}
}

// waitEnd polls until j is no longer running or starting.
func waitEnd(t *testing.T, run launch.Runner, j job.Job) job.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m, err := launch.Poll(context.Background(), run, "w", cluster, []job.Job{j})
		if err != nil {
			t.Fatal(err)
		}
		if st := m[j.ID]; st.State != job.Running && st.State != job.Launching {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %d still running after 20s", j.ID)
	return job.Status{}
}

func start(t *testing.T, run launch.Runner, j job.Job) job.Job {
	t.Helper()
	r, err := launch.Start(context.Background(), run, "w", cluster, j)
	if err != nil {
		t.Fatalf("start job %d: %v", j.ID, err)
	}
	j.Remote = r
	return j
}

func TestExitCodesAndSignal(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	cases := []struct {
		j      job.Job
		state  job.State
		code   int
		signal string
	}{
		{newJob(1, "true"), job.Succeeded, 0, ""},
		{newJob(2, "sh", "-c", "exit 3"), job.Failed, 3, ""},
		{newJob(3, "sh", "-c", "kill -TERM $$"), job.Failed, 143, "TERM"},
		{job.Job{ID: 4, Spec: job.Spec{Argv: []string{"echo shell; exit 5"}, Shell: true, Workdir: "~"}}, job.Failed, 5, ""},
	}
	for _, c := range cases {
		j := start(t, p, c.j)
		st := waitEnd(t, p, j)
		if st.State != c.state || st.ExitCode == nil || *st.ExitCode != c.code || st.Signal != c.signal {
			t.Errorf("job %d: %+v (code %v), want %s %d %q", j.ID, st, deref(st.ExitCode), c.state, c.code, c.signal)
		}
	}
	// The job directory is private.
	fi, err := os.Stat(filepath.Join(w.sshd.Home, launch.DirName(cluster, 1, 1)))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("job dir: %v %v", fi.Mode(), err)
	}
	// Launching the same job twice is refused.
	if _, err := launch.Start(context.Background(), p, "w", cluster, cases[0].j); !errors.Is(err, job.ErrDirExists) || errors.Is(err, job.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second start: %v", err)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// Hostile strings in env values, the workdir and each argv word reach the job
// literally and never run as shell on the worker.
func TestHostileStringsReachJobLiterally(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	hostile := []string{
		"$(touch " + marker + ")", "`touch " + marker + "`", "'; touch " + marker + "; '", `"; touch ` + marker + `; "`,
		"a\nb; touch " + marker, "; touch " + marker, "${HOME}", "*", "-n", "", "\\", "ünï ✓",
	}
	wd := filepath.Join(w.sshd.Home, "dir with $(touch "+marker+") and 'quotes'")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, login := range []bool{false, true} { // --login: through bash -lc
		j := newJob(10, append([]string{"sh", "-c", `for a in "$@"; do printf '[%s]' "$a"; done; printf '{%s}{%s}' "$V" "$PWD"`, "argv0"}, hostile...)...)
		if login {
			j.ID = 11
		}
		j.Spec.Login = login
		j.Spec.Workdir = wd
		j.Spec.Name = "$(touch " + marker + ")"
		j.Spec.Env = []job.EnvVar{{Key: "V", Value: hostile[0] + hostile[4]}}
		log := runToEnd(t, p, j)
		var want strings.Builder
		for _, a := range hostile {
			fmt.Fprintf(&want, "[%s]", a)
		}
		fmt.Fprintf(&want, "{%s}{%s}", hostile[0]+hostile[4], wd)
		if log != want.String() {
			t.Errorf("log:\n got %q\nwant %q", log, want.String())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a hostile string ran as shell on the worker")
		}
	}
}

// runToEnd starts j, waits for it to succeed and returns its log.
func runToEnd(t *testing.T, p *sshexec.Pool, j job.Job) string {
	t.Helper()
	j = start(t, p, j)
	if st := waitEnd(t, p, j); st.State != job.Succeeded {
		t.Fatalf("status %+v", st)
	}
	var log bytes.Buffer
	if err := launch.Logs(context.Background(), p, "w", cluster, j, -1, false, &log); err != nil {
		t.Fatal(err)
	}
	return log.String()
}

// --login runs the command under bash -lc: what ~/.profile sets is there,
// for a command line and for a command's words alike.
func TestLoginShell(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	if err := os.WriteFile(filepath.Join(w.sshd.Home, ".profile"), []byte("export FROM_PROFILE=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		argv  []string
		shell bool
	}{{[]string{`echo "[$FROM_PROFILE]"`}, true}, {[]string{"sh", "-c", `echo "[$FROM_PROFILE]"`}, false}} {
		for _, login := range []bool{false, true} {
			j := newJob(job.ID(30+2*i)+job.ID(map[bool]int{false: 0, true: 1}[login]), c.argv...)
			j.Spec.Shell, j.Spec.Login = c.shell, login
			log := runToEnd(t, p, j)
			want := "[]\n"
			if login {
				want = "[yes]\n"
			}
			if log != want {
				t.Errorf("shell %v, login %v: log %q, want %q", c.shell, login, log, want)
			}
		}
	}
}

func TestWorkdirMissingFailsWithReason(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(20, "true")
	j.Spec.Workdir = "/nonexistent/dir"
	j = start(t, p, j)
	st := waitEnd(t, p, j)
	if st.State != job.Failed || !strings.Contains(st.Reason, "workdir /nonexistent/dir does not exist") {
		t.Errorf("status %+v", st)
	}
}

// Closing the SSH connection does not kill the job, and a new controller
// (a new pool, the same records) still tracks it to its end.
func TestSurvivesConnectionDropAndControllerRestart(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(30, "sh", "-c", "sleep 1; echo done"))
	p.Close()
	p2 := w.pool(t)
	m, err := launch.Poll(context.Background(), p2, "w", cluster, []job.Job{j})
	if err != nil || m[j.ID].State != job.Running {
		t.Fatalf("after reconnect: %+v %v", m, err)
	}
	if st := waitEnd(t, p2, j); st.State != job.Succeeded {
		t.Fatalf("status %+v", st)
	}
	var log bytes.Buffer
	launch.Logs(context.Background(), p2, "w", cluster, j, 10, false, &log)
	if log.String() != "done\n" {
		t.Errorf("log %q", log.String())
	}
}

// The worker times the command on its own clock (/proc/uptime, before and
// after): a job that sleeps 1 s reports about 1 s, whatever the
// controller's clock or the polling interval, and its exit file keeps the
// old first line. A job that never started its command reports none.
func TestRuntimeOnWorkerClock(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(35, "sleep", "1"))
	st := waitEnd(t, p, j)
	if st.State != job.Succeeded || st.Runtime < 900*time.Millisecond || st.Runtime > 5*time.Second {
		t.Errorf("status %+v: want succeeded, runtime between 0.9 s and 5 s", st)
	}
	exit, err := os.ReadFile(filepath.Join(w.sshd.Home, launch.DirName(cluster, j.ID, j.Attempt), "exit"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^exit 0\nruntime [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2}\n$`).Match(exit) {
		t.Errorf("exit file %q, want \"exit 0\\nruntime U0 U1\\n\"", exit)
	}
	k := newJob(36, "true")
	k.Spec.Workdir = "/nonexistent/dir"
	k = start(t, p, k)
	if st := waitEnd(t, p, k); st.State != job.Failed || st.Runtime != 0 || !strings.Contains(st.Reason, "does not exist") {
		t.Errorf("workdir missing: %+v, want failed with runtime 0", st)
	}
}

// kill -9 of the whole job leaves no exit file: the job is lost.
func TestKill9IsLost(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(40, "sleep", "300"))
	if err := syscall.Kill(-j.Remote.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The signal is sent, not yet taken: a poll at once may still see
	// a member of the group exiting (its environment readable).
	waitGroupGone(t, j.Remote.PID)
	st := waitEnd(t, p, j)
	if st.State != job.Lost || !strings.Contains(st.Reason, "kill -9") {
		t.Errorf("status %+v", st)
	}
}

// waitGroupGone waits up to 10 s until no process of process group pgid
// runs (a zombie has ended).
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		left := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// After the command's ")": state, ppid, pgrp.
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
				left = true
				break
			}
		}
		if !left {
			return
		}
	}
	t.Fatalf("process group %d still runs 10 s after SIGKILL", pgid)
}

// Cancel kills a process tree completely, children that left the session included.
func TestCancelKillsTree(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(50, "sh", "-c", "sleep 300 & setsid sleep 301 & trap '' TERM; sleep 302"))
	time.Sleep(300 * time.Millisecond)
	before := jobProcs(t, j)
	if len(before) < 4 {
		t.Fatalf("expected run.sh, sh and 3 sleeps, found %v", before)
	}
	start := time.Now()
	n, err := launch.Cancel(context.Background(), p, "w", cluster, j, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n.Signalled < 4 {
		t.Errorf("signalled %d processes", n.Signalled)
	}
	if left := jobProcs(t, j); len(left) > 0 {
		t.Errorf("left after cancel: %v", left)
	}
	if time.Since(start) > 30*time.Second { // sleep 302 ignores TERM: only the SIGKILL after grace ends it this soon
		t.Errorf("cancel took %v", time.Since(start))
	}
	m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if m[j.ID].State != job.Cancelled { // whatever its exit file says: logs -f and the state agree
		t.Errorf("after cancel: %+v", m[j.ID])
	}
}

// jobProcs lists the live processes carrying the job's GSSH_JOB_ID.
func jobProcs(t *testing.T, j job.Job) []string {
	out, _ := exec.Command("sh", "-c", fmt.Sprintf(`for f in $(grep -l -z -x GSSH_JOB_ID=%d /proc/[0-9]*/environ 2>/dev/null); do grep -q -z -x GSSH_CLUSTER_ID=%s $f && cat ${f%%environ}comm; done`, j.ID, cluster)).Output()
	return strings.Fields(string(out))
}

func TestLogsFollowStreamsUntilEnd(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(60, "sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.3; done"))
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := launch.Logs(ctx, p, "w", cluster, j, -1, true, &log); err != nil {
		t.Fatal(err)
	}
	if log.String() != "line1\nline2\nline3\n" {
		t.Errorf("followed log %q", log.String())
	}
}

// A worker whose home cannot be written: the launch fails cleanly, with
// the worker's words, the host named once, and the exit error kept typed.
func TestUnwritableHome(t *testing.T) {
	w := startWorker(t, map[string]string{"HOME": "/dev/null/home"})
	_, err := launch.Start(context.Background(), w.pool(t), "w", cluster, newJob(70, "true"))
	var xe *sshexec.ExitError
	var se *launch.StepError
	if !errors.As(err, &xe) || !errors.As(err, &se) || se.Host != "w" || xe.Code == 0 {
		t.Fatalf("err = %#v, want a *launch.StepError over an *sshexec.ExitError", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "launch on w: ") || strings.Contains(msg, "w: w:") || !strings.Contains(msg, "/dev/null") {
		t.Errorf("err = %q", msg)
	}
}

// A transport failure names the host once too, and keeps its sentinel.
func TestStepErrorTransport(t *testing.T) {
	w := startWorker(t, nil)
	s := w.settings
	s.Port = 1 // nothing listens there
	p := sshexec.NewPool(sshexec.PoolOptions{Resolve: func(string) (sshconfig.Settings, error) { return s, nil }})
	defer p.Close()
	_, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{newJob(71, "true")})
	if !errors.Is(err, sshexec.ErrUnreachable) || !strings.HasPrefix(err.Error(), "poll on w: host unreachable: connect to ") {
		t.Errorf("err = %v", err)
	}
}

// kill -9 of the session leader alone (run.sh) leaves the command running:
// Poll reports the orphans instead of a plain loss, and Cancel reaps them.
func TestKill9OfLeaderReportsOrphans(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(41, "sleep", "300"))
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(j.Remote.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	if st := m[j.ID]; st.State != job.Lost || st.Orphans != 1 {
		t.Fatalf("status %+v", st)
	}
	if _, err := launch.Cancel(context.Background(), p, "w", cluster, j, time.Second); err != nil {
		t.Fatal(err)
	}
	if left := jobProcs(t, j); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	if m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j}); m[j.ID].Orphans != 0 || m[j.ID].State != job.Cancelled {
		t.Errorf("after reaping: %+v", m[j.ID])
	}
}

// The payload travels on stdin: a command of several words totalling 200
// KiB (each under Linux's 128 KiB per argument) reaches the job whole.
func TestLargeCommand(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	words := []string{"sh", "-c", `printf '%s' "$1" | wc -c; printf '%s' "$2" | wc -c`, "x"}
	words = append(words, strings.Repeat("a", 100<<10), strings.Repeat("b", 100<<10))
	j := start(t, p, newJob(80, words...))
	if st := waitEnd(t, p, j); st.State != job.Succeeded {
		t.Fatalf("status %+v", st)
	}
	var log bytes.Buffer
	launch.Logs(context.Background(), p, "w", cluster, j, -1, false, &log)
	if got := strings.Fields(log.String()); len(got) != 2 || got[0] != "102400" || got[1] != "102400" {
		t.Errorf("log %q", log.String())
	}
	big := newJob(81, "echo", strings.Repeat("c", 128<<10))
	if err := launch.CheckSpec(big.Spec); err == nil || !strings.Contains(err.Error(), "word 2 of the command takes 128 KiB") {
		t.Errorf("a word over 128 KiB: %v", err)
	}
	huge := newJob(82, "echo")
	for range 12 {
		huge.Spec.Argv = append(huge.Spec.Argv, strings.Repeat("d", 100<<10))
	}
	if err := launch.CheckSpec(huge.Spec); err == nil || !strings.Contains(err.Error(), "the most is 1024 KiB") {
		t.Errorf("a spec over 1 MiB: %v", err)
	}
}

// Abandoning an attempt before its run.sh passes the start gate means the
// command never runs, even if run.sh starts later (a launch merely slow);
// once run.sh has passed it, Abandon says so and changes nothing.
func TestAbandon(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(90, "touch", filepath.Join(w.sshd.Home, "ran"))
	dir := filepath.Join(w.sshd.Home, launch.DirName(cluster, j.ID, j.Attempt))
	// A launch cut off after it made the directory and wrote run.sh.
	script, err := launch.RunScript(cluster, j)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o600)
	m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if m[j.ID].State != job.Launching {
		t.Fatalf("before: %+v", m[j.ID])
	}
	ok, err := launch.Abandon(context.Background(), p, "w", cluster, j)
	if err != nil || !ok {
		t.Fatalf("Abandon = %v, %v", ok, err)
	}
	// The slow run.sh starts now: it must not run the command.
	cmd := exec.Command("sh", "run.sh")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "abandoned before it started") {
		t.Errorf("late run.sh: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(w.sshd.Home, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the command of an abandoned attempt ran")
	}
	m, _ = launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if st := m[j.ID]; !st.Abandoned {
		t.Errorf("after: %+v", st)
	}
	if _, err := launch.Start(context.Background(), p, "w", cluster, j); err == nil || errors.Is(err, job.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a launch arriving after the abandon: %v (want a definite failure)", err)
	}
	// A missing directory is made and abandoned: a launch on its way finds it taken.
	k := newJob(91, "true")
	if ok, err := launch.Abandon(context.Background(), p, "w", cluster, k); err != nil || !ok {
		t.Errorf("Abandon of a missing attempt = %v, %v", ok, err)
	}
	// A started attempt is not abandoned.
	r := start(t, p, newJob(92, "sleep", "30"))
	if ok, err := launch.Abandon(context.Background(), p, "w", cluster, r); err != nil || ok {
		t.Errorf("Abandon of a running attempt = %v, %v", ok, err)
	}
	launch.Cancel(context.Background(), p, "w", cluster, r, time.Second)
}

// A job's command that ends and leaves a child running (nohup): Poll
// reports the end and the leftover, and Cancel ends it.
func TestLeftoverChild(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := start(t, p, newJob(100, "sh", "-c", "nohup sleep 300 >/dev/null 2>&1 & exit 0"))
	var st job.Status
	for range 100 {
		m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
		if err != nil {
			t.Fatal(err)
		}
		if st = m[j.ID]; st.State != job.Running {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.State != job.Succeeded || st.Orphans != 1 {
		t.Fatalf("status %+v, want succeeded with 1 leftover", st)
	}
	if _, err := launch.Stop(context.Background(), p, "w", cluster, j, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if left := jobProcs(t, j); len(left) > 0 {
		t.Errorf("left after the reap: %v", left)
	}
	// The reap marks nothing: the job still reads as it ended.
	if m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j}); m[j.ID].State != job.Succeeded || m[j.ID].Orphans != 0 {
		t.Errorf("after the reap: %+v", m[j.ID])
	}
	// A job stopped past its walltime reads as such (logs -f agrees).
	k := start(t, p, newJob(101, "sleep", "300"))
	if _, err := launch.Stop(context.Background(), p, "w", cluster, k, time.Second, job.Timeout); err != nil {
		t.Fatal(err)
	}
	if m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{k}); m[k.ID].State != job.Timeout {
		t.Errorf("after a walltime stop: %+v", m[k.ID])
	}
}

// A job launched before attempts were counted (its directory has no
// .<attempt> suffix) is still polled, read and cancelled.
func TestLegacyDir(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(110, "sh", "-c", "echo old; sleep 30")
	j.Attempt = 0
	j = start(t, p, j)
	if !strings.HasSuffix(j.Remote.Dir, "/.gssh/jobs/"+cluster+"-110") {
		t.Fatalf("dir %s", j.Remote.Dir)
	}
	j.Remote.Dir = "" // as a record claimed before the launch had written it
	m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if err != nil || m[j.ID].State != job.Running {
		t.Fatalf("poll %+v %v", m, err)
	}
	var log bytes.Buffer
	if err := launch.Logs(context.Background(), p, "w", cluster, j, -1, false, &log); err != nil || log.String() != "old\n" {
		t.Errorf("logs %q %v", log.String(), err)
	}
	if n, err := launch.Cancel(context.Background(), p, "w", cluster, j, time.Second); err != nil || n.Signalled == 0 {
		t.Errorf("cancel %+v %v", n, err)
	}
}

// A worker whose disk fills mid-launch leaves a half-written directory;
// the launch fails definitely (not "unknown"), and the next attempt, in a
// directory of its own, starts cleanly once there is room.
func TestDiskFullMidLaunch(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test mounts a small tmpfs")
		}
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	w := startWorker(t, nil)
	p := w.pool(t)
	jobs := filepath.Join(w.sshd.Home, ".gssh")
	os.MkdirAll(jobs, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", jobs).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", jobs).Run() })
	os.MkdirAll(filepath.Join(jobs, "jobs"), 0o700)
	filler := filepath.Join(jobs, "filler")
	f, _ := os.Create(filler)
	f.Write(make([]byte, 1<<20)) // fills it (ENOSPC past 64 KiB)
	f.Close()
	j := newJob(120, "echo", strings.Repeat("x", 8<<10))
	_, err := launch.Start(context.Background(), p, "w", cluster, j)
	var se *launch.StepError
	if !errors.As(err, &se) || errors.Is(err, job.ErrOutcomeUnknown) {
		t.Fatalf("launch on a full disk: %v, want a definite failure", err)
	}
	os.Remove(filler)
	j.Attempt = 2
	j = start(t, p, j)
	if st := waitEnd(t, p, j); st.State != job.Succeeded {
		t.Errorf("attempt 2: %+v", st)
	}
}

// A run.sh that died between its start gate and its pid (kill -9, a
// reboot) never ran the command: Poll says so, instead of "starting"
// forever; while it lives, the attempt is starting.
func TestDiedBeforePid(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(130, "true")
	dir := filepath.Join(w.sshd.Home, launch.DirName(cluster, j.ID, j.Attempt))
	os.MkdirAll(filepath.Join(dir, "go"), 0o700)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("sleep 30\n"), 0o600)
	m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if st := m[j.ID]; !st.Abandoned || !strings.Contains(st.Reason, "died before it recorded its pid") {
		t.Errorf("gate taken, no run.sh: %+v", st)
	}
	cmd := exec.Command("sh", filepath.Join(dir, "run.sh"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	m, _ = launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if st := m[j.ID]; st.State != job.Launching || st.Abandoned {
		t.Errorf("run.sh alive between gate and pid: %+v", st)
	}
}

// A gssh run from inside a job (its environment carries that job's
// GSSH_JOB_ID) launches a job whose processes do not carry it: reaping
// the first job never touches the second.
func TestInheritedJobIDNotPassedOn(t *testing.T) {
	home := t.TempDir()
	base := []string{"HOME=" + home, "PATH=/usr/bin:/bin", launch.ClaimsDirEnv + "=" + filepath.Join(home, "claims")}
	run := sshexec.Local{Env: append(slices.Clone(base), "GSSH_JOB_ID=7", "GSSH_CLUSTER_ID="+cluster, "GSSH_ATTEMPT=1")}
	j := newJob(8, "sleep", "30")
	j.Placement.Host = "local"
	r, err := launch.Start(context.Background(), run, "local", cluster, j)
	if err != nil {
		t.Fatal(err)
	}
	j.Remote = r
	t.Cleanup(func() { launch.Cancel(context.Background(), run, "local", cluster, j, time.Second) })
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.PID))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte("GSSH_JOB_ID=7\x00")) {
		t.Errorf("job 8's run.sh carries job 7's GSSH_JOB_ID")
	}
	seven := newJob(7, "true")
	seven.Remote = job.Remote{PID: 1, StartTicks: 1} // ended long ago
	os.MkdirAll(filepath.Join(home, launch.DirName(cluster, 7, 1)), 0o700)
	clean := sshexec.Local{Env: base} // as the fleet runs local commands: without the caller's GSSH_*
	m, _ := launch.Poll(context.Background(), clean, "local", cluster, []job.Job{seven})
	if st := m[7]; st.Orphans != 0 {
		t.Errorf("job 7 counts job 8's processes as its own: %+v", st)
	}
}

// A preemption's Stop sends SIGTERM and returns at once, whatever the
// grace: the job may go on (checkpointing) until a later Stop with why ""
// kills what is left; Poll then says it was stopped for a preemption.
// Its run.sh gave it GSSH_RESTART_COUNT.
func TestPreemptSignalsOnly(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(60, "sh", "-c", `echo restarts=$GSSH_RESTART_COUNT; trap 'echo got TERM' TERM; while :; do sleep 0.1; done`)
	j.Restarts = 2
	j = start(t, p, j)
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	if n, err := launch.Stop(context.Background(), p, "w", cluster, j, time.Minute, job.Preempting); err != nil || n.Signalled == 0 {
		t.Fatalf("stop: %+v, %v", n, err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("a preemption's stop took %v: it waited on the grace", d)
	}
	time.Sleep(300 * time.Millisecond)
	if left := jobProcs(t, j); len(left) == 0 {
		t.Fatal("the job's TERM handler was given no time")
	}
	m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if st := m[j.ID]; err != nil || st.Orphans == 0 || st.Reason != "stopped for a preemption" {
		t.Errorf("poll while it checkpoints: %+v, %v", st, err)
	}
	if _, err := launch.Stop(context.Background(), p, "w", cluster, j, 0, ""); err != nil {
		t.Fatal(err)
	}
	if left := jobProcs(t, j); len(left) > 0 {
		t.Errorf("left after the kill: %v", left)
	}
	m, _ = launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if st := m[j.ID]; st.Orphans != 0 || st.Reason != "stopped for a preemption" {
		t.Errorf("poll after the kill: %+v", st)
	}
	var log strings.Builder
	if err := launch.Logs(context.Background(), p, "w", cluster, j, -1, false, &log); err != nil || !strings.Contains(log.String(), "restarts=2\n") || strings.Count(log.String(), "got TERM") != 1 { // one SIGTERM, then only SIGKILL
		t.Errorf("log %q, %v", log.String(), err)
	}
}
