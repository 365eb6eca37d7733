package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServedLab is a lab whose queue gssh serve alone keeps (serve:
// true, gssh lab init --serve), shared by two OS users and its pass
// account: the state directory is 0750 and its files 0600, so that no
// member reads or writes them; with gssh serve down a member's command
// does nothing and says so (exit 3); through gssh serve each member sees
// the whole queue and acts on their own jobs only, gssh serve saying
// whose a job is (the kernel's word on who asks: SO_PEERCRED); a uid with
// no account is refused; gssh serve killed mid-request is said to have
// gone away (exit 3), and a new one picks up the queue where it was.
func TestServedLab(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	alice, bob, pass := l.alice, l.bob, l.pass

	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{l.stateDir, os.ModeDir | 0o750}, {l.statePath, 0o600}, {l.statePath + ".pass.lock", 0o600}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || st.Uid != pass.uid || int(st.Gid) != l.gid {
			t.Errorf("%s: %v, uid %d, gid %d; want %v of %s (uid %d), the lab group's (gid %d)", c.path, fi.Mode(), st.Uid, st.Gid, c.mode, pass.name, pass.uid, l.gid)
		}
	}

	// No gssh serve: nothing is done, and the member is told (exit 3).
	_, errs, code := l.gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "true")
	if code != 3 || !strings.Contains(errs, "kept by gssh serve alone, and none runs at "+l.statePath+".sock; nothing was done") {
		t.Fatalf("alice's submit with no gssh serve: exit %d: %s; want exit 3, saying none runs", code, errs)
	}

	start := func() func(kill bool) string { return l.startServe(t) }
	stop := start()

	// Through gssh serve: alice's job runs at once.
	out, errs, code := l.gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "sleep", "300")
	if code != 0 || !strings.Contains(out, "job 1 running on w1:") {
		t.Fatalf("alice's submit through gssh serve: exit %d: %s%s", code, out, errs)
	}
	// Bob sees the whole queue, and may not touch alice's job.
	if out, errs, code := l.gssh(bob, "ps"); code != 0 || !strings.Contains(out, "1\t"+alice.name+"\trunning") {
		t.Errorf("bob's ps: exit %d: %s%s; want alice's job 1 running", code, out, errs)
	}
	for _, args := range [][]string{{"cancel", "1"}, {"hold", "1"}, {"update", "--priority", "7", "1"}} {
		if out, errs, code := l.gssh(bob, args...); code == 0 || !strings.Contains(errs, "job 1 is not yours: it is "+alice.name+"'s") {
			t.Errorf("bob's %s: exit %d: %s%s; want it refused, naming alice", strings.Join(args, " "), code, out, errs)
		}
	}
	// Admin priority bands are gssh serve's to enforce: bob is no admin.
	if out, errs, code := l.gssh(bob, "submit", "--priority", "1", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "true"); code != 1 || !strings.Contains(errs, "nothing was submitted") {
		t.Errorf("bob's submit --priority 1: exit %d: %s%s; want it refused", code, out, errs)
	}
	if out, errs, code := l.gssh(bob, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "echo", "bob was here"); code != 0 || !strings.Contains(out, "job 2 running on w1:") {
		t.Fatalf("bob's submit: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := l.gssh(bob, "wait", "2"); code != 0 {
		t.Errorf("bob's wait 2: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := l.gssh(alice, "logs", "2"); code != 0 || out != "bob was here\n" {
		t.Errorf("alice's logs 2: exit %d: %q %s", code, out, errs)
	}
	if out, errs, code := l.gssh(alice, "show", "2"); code != 0 || !strings.Contains(out, "user:") || !strings.Contains(out, bob.name) {
		t.Errorf("alice's show 2: exit %d: %s%s", code, out, errs)
	}

	// No member can write (or read) the state, nor add a file beside it.
	for _, c := range [][]string{{"sh", "-c", "echo x >> " + l.statePath}, {"cat", l.statePath}, {"touch", filepath.Join(l.stateDir, "x")}} {
		cmd := l.command(bob, nil)
		cmd.Path, cmd.Args = "/bin/"+c[0], c
		cmd.Dir = l.root
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("bob$ %s: %v: %s; want permission denied", strings.Join(c, " "), err, out)
		}
	}

	// A uid with no account is refused, whatever it says it is.
	ghost := &labUser{name: alice.name, uid: 61234, gid: uint32(l.gid), home: l.root}
	if out, errs, code := l.gssh(ghost, "cancel", "1"); code == 0 || !strings.Contains(errs, "uid 61234") || !strings.Contains(errs, "has no account") {
		t.Errorf("uid 61234 (USER=%s)'s cancel: exit %d: %s%s; want it refused", alice.name, code, out, errs)
	}

	// Alice cancels her own job.
	if out, errs, code := l.gssh(alice, "cancel", "--grace", "1s", "1"); code != 0 || !strings.Contains(out, "job 1") {
		t.Errorf("alice's cancel 1: exit %d: %s%s", code, out, errs)
	}

	// gssh serve killed while a request waits for it: the command says it
	// went away (exit 3); a new gssh serve picks the queue up.
	said := stop(false)
	for _, want := range []string{"job 1 running on w1:", "job 2 running on w1:", "gssh serve stopped"} {
		if !strings.Contains(said, want) {
			t.Errorf("gssh serve's output lacks %q:\n%s", want, said)
		}
	}
	stop = start()
	pid := servePID(t, l)
	syscall.Kill(pid, syscall.SIGSTOP)
	ps := l.command(alice, []string{"GSSH_INVENTORY=" + l.inv}, "ps", "-a")
	var psOut, psErr strings.Builder
	ps.Stdout, ps.Stderr = &psOut, &psErr
	if err := ps.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); !connected(ps.Process.Pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("alice's ps did not connect to the stopped gssh serve within 20s")
		}
	}
	stop(true) // its request sent (or being sent), its answer awaited
	ps.Wait()
	if code := ps.ProcessState.ExitCode(); code != 3 || !strings.Contains(psErr.String(), "went away") {
		t.Errorf("alice's ps as gssh serve was killed: exit %d: %s%s; want exit 3, saying it went away", code, psOut.String(), psErr.String())
	}
	stop = start()
	defer stop(false)
	if out, errs, code := l.gssh(alice, "ps", "-a"); code != 0 || !strings.Contains(out, "2\t"+bob.name+"\tsucceeded") {
		t.Errorf("alice's ps -a after a restart: exit %d: %s%s", code, out, errs)
	}
}

// servePID is the pid of the lab's gssh serve, as its socket's peer.
func servePID(t *testing.T, l *sharedLab) int {
	t.Helper()
	out, err := os.ReadFile("/proc/net/unix")
	if err != nil || !strings.Contains(string(out), l.statePath+".sock") {
		t.Fatalf("no socket %s.sock listed: %v", l.statePath, err)
	}
	ents, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, e := range ents {
		b, _ := os.ReadFile(e)
		// The labs share one gssh binary: this lab's serve is the one of
		// its pass account.
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && args[0] == l.bin && args[1] == "serve" {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(e)))
			if err == nil && procUID(pid) == l.pass.uid {
				return pid
			}
		}
	}
	t.Fatal("gssh serve's pid not found")
	return 0
}

// procUID is the real uid of process pid (/proc/PID/status); MaxUint32
// when it cannot be read.
func procUID(pid int) uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.MaxUint32
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
			if u, err := strconv.ParseUint(f[1], 10, 32); err == nil {
				return uint32(u)
			}
		}
	}
	return math.MaxUint32
}

// connected reports whether process pid has a connected unix socket
// (/proc/PID/fd and /proc/net/unix: state 03, SS_CONNECTED), as a client
// has once its connect returned, before the server accepted it.
func connected(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, _ := os.ReadFile("/proc/net/unix")
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 7 && f[5] == "03" && inodes[f[6]] {
			return true
		}
	}
	return false
}

// startServe starts gssh serve as the pass account (a pass every hour: the
// requests' own passes do the work) and waits for it to say it runs; stop
// ends it (SIGTERM, or SIGKILL when kill) and returns what it printed.
func (l *sharedLab) startServe(t *testing.T, args ...string) (stop func(kill bool) string) {
	t.Helper()
	stop, _ = l.startServeOut(t, args...)
	return stop
}

// startServeOut is startServe with args given to gssh serve, and what
// it prints on stdout so far.
func (l *sharedLab) startServeOut(t *testing.T, args ...string) (stop func(kill bool) string, out func() string) {
	t.Helper()
	srv := l.command(l.pass, []string{"GSSH_INVENTORY=" + l.inv}, append([]string{"serve", "--interval", "1h"}, args...)...)
	srvOut, srvErr := outputFile(t, "serve.out"), outputFile(t, "serve.err")
	srv.Stdout, srv.Stderr = srvOut.File, srvErr.File
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	t.Cleanup(func() { srv.Process.Kill(); <-done })
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(srvOut.String(), "a pass every") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("gssh serve did not start:\n%s%s", srvOut.String(), srvErr.String())
		}
	}
	return func(kill bool) string {
		if kill {
			srv.Process.Kill()
		} else {
			srv.Process.Signal(syscall.SIGTERM)
		}
		<-done
		return srvOut.String() + srvErr.String()
	}, srvOut.String
}
