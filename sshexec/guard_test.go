package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// runGuarded runs cmd behind EndWithSession, with its held stdin.
func runGuarded(ctx context.Context, r sshexec.Runner, cmd string) (sshexec.Result, error) {
	stdin, release := sshexec.HeldStdin()
	defer release()
	return r.Run(ctx, "h", sshexec.EndWithSession(cmd), stdin)
}

// alive counts the live processes whose command line is exactly args.
func alive(t *testing.T, args string) int {
	out, _ := exec.Command("pgrep", "-c", "-x", "-f", args).Output()
	var n int
	fmt.Sscan(string(out), &n)
	return n
}

// checkGuard: a guarded command answers as it would unguarded, and one
// cut at its deadline leaves nothing on the host: over a connection with
// 2 sessions at most, a dozen cut commands leave the connection usable.
func checkGuard(t *testing.T, r sshexec.Runner) {
	res, err := runGuarded(context.Background(), r, "echo out; echo err >&2; read x || echo no-stdin")
	if err != nil || string(res.Stdout) != "out\nno-stdin\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("guarded echo: %q %q %v", res.Stdout, res.Stderr, err)
	}
	var xe *sshexec.ExitError
	if _, err := runGuarded(context.Background(), r, "exit 3"); !errors.As(err, &xe) || xe.Code != 3 {
		t.Errorf("guarded exit 3: %v", err)
	}
	const hang = "sleep 3017"
	for i := range 12 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		_, err := runGuarded(ctx, r, "echo x; sh -c 'sleep 3017'; echo never")
		cancel()
		if !errors.Is(err, sshexec.ErrTimeout) || time.Since(start) > 20*time.Second {
			t.Fatalf("cut %d: %v after %v", i, err, time.Since(start))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for alive(t, hang) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := alive(t, hang); n > 0 {
		t.Errorf("%d cut commands still run on the host", n)
	}
	if res, err := runGuarded(context.Background(), r, "echo still"); err != nil || string(res.Stdout) != "still\n" {
		t.Errorf("after the cut commands: %q %v", res.Stdout, err)
	}
}

func TestEndWithSessionSSHD(t *testing.T) {
	checkGuard(t, sshdPool(t, sshtest.SSHDOptions{MaxSessions: 2}))
}

func TestEndWithSessionLocal(t *testing.T) {
	checkGuard(t, sshexec.Local{})
}

// Without the guard, OpenSSH keeps a cut command (and its session): what
// the guard is for. If this fails, sshd began ending such commands itself.
func TestCutCommandStaysUnguarded(t *testing.T) {
	p := sshdPool(t, sshtest.SSHDOptions{})
	const hang = "sleep 3019"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { p.Run(ctx, "h", "sh -c 'sleep 3019'; echo never", nil); close(done) }()
	for end := time.Now().Add(15 * time.Second); alive(t, hang) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the command did not start within 15s")
		}
	}
	cancel() // cut once it runs (a loaded machine may take long to connect)
	<-done
	time.Sleep(500 * time.Millisecond)
	if alive(t, hang) == 0 {
		t.Errorf("the cut command ended without the guard")
	}
	exec.Command("pkill", "-x", "-f", hang).Run()
}
