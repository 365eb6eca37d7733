package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSharedLabServe runs the lab's pass account's gssh serve, passing
// once an hour but when woken: a member's submit and a member's cancel
// of a running job are carried out at once through its socket. A socket
// at that name that the pass account does not serve (planted before
// serve starts) is never told anything, and serve replaces it; a member
// cannot run serve; a second serve refuses, naming the first's pid; the
// socket is the lab group's (0660); SIGTERM stops serve (exit 0) and
// removes its socket.
func TestSharedLabServe(t *testing.T) {
	t.Parallel()
	l := newSharedLab(t)
	alice, bob, pass := l.alice, l.bob, l.pass
	sock := l.statePath + ".sock"

	// A socket at the name, served by someone else (root, here).
	planted, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	planted.SetUnlinkOnClose(false)
	os.Chmod(sock, 0o666)
	var mu sync.Mutex
	var told bytes.Buffer
	conns := 0
	go func() {
		for {
			c, err := planted.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(c)
			mu.Lock()
			told.Write(b)
			mu.Unlock()
			c.Close()
		}
	}()
	out, errs, code := l.gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "sleep", "300")
	if code != 0 || !strings.Contains(out, "job 1 queued: the next pass starts it") {
		t.Fatalf("alice's submit: exit %d: %s%s", code, out, errs)
	}
	mu.Lock()
	if conns == 0 || told.Len() > 0 {
		t.Errorf("the planted socket: %d connections, told %q; want the wake to connect, see another uid, and say nothing", conns, told.String())
	}
	mu.Unlock()
	planted.Close()

	if _, errs, code := l.gssh(bob, "serve"); code != 1 || !strings.Contains(errs, "only the lab's pass user runs gssh serve") {
		t.Fatalf("bob's gssh serve: exit %d: %s", code, errs)
	}

	srv := l.command(pass, []string{"GSSH_INVENTORY=" + l.inv}, "serve", "--interval", "1h")
	// Its output goes to files (a command's own descriptors: no copier),
	// read whenever the test looks.
	srvOut, srvErr := outputFile(t, "serve.out"), outputFile(t, "serve.err")
	srv.Stdout, srv.Stderr = srvOut.File, srvErr.File
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Process.Kill()
			srv.Wait()
		}
	})
	ps := func(id, state string) bool {
		out, _, _ := l.gsshQuiet(alice, []string{"GSSH_INVENTORY=" + l.inv}, "ps", "-a")
		for line := range strings.Lines(out) {
			if f := strings.Split(line, "\t"); len(f) > 2 && f[0] == id && f[2] == state {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(within); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not so after %s\nserve's stdout:\n%s\nstderr:\n%s", what, within, srvOut.String(), srvErr.String())
			}
		}
	}
	waitFor("job 1 running (serve's first pass)", 20*time.Second, func() bool { return ps("1", "running") })

	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 || st.Uid != pass.uid || int(st.Gid) != l.gid {
		t.Errorf("socket %s: %v, uid %d, gid %d; want a socket 0660 of %s (uid %d) and the lab group (gid %d)", sock, fi.Mode(), st.Uid, st.Gid, pass.name, pass.uid, l.gid)
	}

	// With passes an hour apart, only a wake starts job 2 and stops job 1.
	start := time.Now()
	if out, errs, code := l.gssh(bob, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "true"); code != 0 {
		t.Fatalf("bob's submit: exit %d: %s%s", code, out, errs)
	}
	waitFor("job 2 ended (woken by bob's submit)", 20*time.Second, func() bool { return ps("2", "running") || ps("2", "succeeded") })
	t.Logf("bob's job 2 started %s after his submit began", time.Since(start).Round(time.Millisecond))
	// A member's release waits for serve's pass too, and says what it did.
	if out, errs, code := l.gssh(bob, "submit", "--hold", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "true"); code != 0 || !strings.Contains(out, "job 3 held") {
		t.Fatalf("bob's submit --hold: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := l.gssh(bob, "release", "3"); code != 0 || !strings.Contains(out, "job 3 released, running on w1:") {
		t.Errorf("bob's release: exit %d: %s%s; want it running, by serve's pass", code, out, errs)
	}
	if out, errs, code := l.gssh(alice, "cancel", "--grace", "1s", "1"); code != 0 || !strings.Contains(out, "cancel recorded") {
		t.Fatalf("alice's cancel: exit %d: %s%s", code, out, errs)
	}
	waitFor("job 1 cancelled (woken by alice's cancel)", 20*time.Second, func() bool { return ps("1", "cancelled") })

	// A member's gssh gpus is serve's to answer, over the pass account's
	// connection: bob, with a HOME that holds no key, sees w1's GPUs
	// all the same (the lab's view is its inventory, whoever asks).
	keyless := t.TempDir()
	os.Chmod(keyless, 0o777)
	out, errs, code = l.gsshWith(bob, []string{"GSSH_INVENTORY=" + l.inv, "HOME=" + keyless}, "gpus", "--json")
	if code != 0 || !strings.Contains(out, `"name": "w1"`) || !strings.Contains(out, `"state": "ok"`) {
		t.Errorf("bob's gpus through serve: exit %d: %s%s", code, out, errs)
	}

	_, errs, code = l.gssh(pass, "serve")
	if code != 3 || !strings.Contains(errs, "gssh serve already runs for this state") || !strings.Contains(errs, "pid ") {
		t.Errorf("a second serve: exit %d: %s", code, errs)
	}

	srv.Process.Signal(syscall.SIGTERM)
	err = srv.Wait()
	stopped = true
	var ee *exec.ExitError
	if errors.As(err, &ee) || err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, srvErr.String())
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after serve stopped: %v", err)
	}
	out, _, code = l.gsshWith(bob, []string{"GSSH_INVENTORY=" + l.inv, "HOME=" + keyless}, "gpus", "--json")
	if code != 2 || strings.Contains(out, `"state": "ok"`) {
		t.Errorf("bob's keyless gpus without serve: exit %d: %s; want w1 unreachable (exit 2)", code, out)
	}
	for _, want := range []string{"job 1 running on w1:", "job 2 running on w1:", "job 1 cancelled", "gssh serve stopped"} {
		if !strings.Contains(srvOut.String(), want) {
			t.Errorf("serve's output lacks %q:\n%s", want, srvOut.String())
		}
	}
	t.Logf("serve's stdout:\n%s\nstderr:\n%s", srvOut.String(), srvErr.String())
}

// outputFile is a file in a temporary directory for a command's output;
// its String is what was written so far.
func outputFile(t *testing.T, name string) *output {
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &output{f}
}

type output struct{ *os.File }

func (o *output) String() string {
	b, _ := os.ReadFile(o.Name())
	return string(b)
}
