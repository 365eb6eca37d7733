package fakelab

import (
	"errors"
	"io"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// signals maps RFC 4254 signal names to the signals sent.
var signals = map[ssh.Signal]syscall.Signal{
	ssh.SIGABRT: syscall.SIGABRT, ssh.SIGALRM: syscall.SIGALRM, ssh.SIGFPE: syscall.SIGFPE,
	ssh.SIGHUP: syscall.SIGHUP, ssh.SIGILL: syscall.SIGILL, ssh.SIGINT: syscall.SIGINT,
	ssh.SIGKILL: syscall.SIGKILL, ssh.SIGPIPE: syscall.SIGPIPE, ssh.SIGQUIT: syscall.SIGQUIT,
	ssh.SIGSEGV: syscall.SIGSEGV, ssh.SIGTERM: syscall.SIGTERM, ssh.SIGUSR1: syscall.SIGUSR1,
	ssh.SIGUSR2: syscall.SIGUSR2,
}

// processExec runs each exec request as sshd does without a pty: the
// command line under `/bin/sh -c`, in the login's home, with the host's
// environment, in a session of its own. Signal requests reach its
// process group; when the client closes the session, the group gets
// SIGHUP (what a job must survive, it escapes with setsid, as gssh's
// launch does). The exit status is the command's, 128+N for one killed
// by signal N.
func processExec(home string, env []string) ExecFunc {
	return func(e Exec) int {
		cmd := exec.Command("/bin/sh", "-c", e.Command)
		cmd.Dir, cmd.Env = home, env
		cmd.Stdout, cmd.Stderr = e.Stdout, e.Stderr
		// stdin through a pipe of our own: Wait must not wait for a
		// client that never sends EOF.
		stdin, err := cmd.StdinPipe()
		if err != nil {
			e.Stderr.Write([]byte("fakelab: " + err.Error() + "\n"))
			return 127
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		// Output pipes a leftover child holds open do not hold the session.
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Start(); err != nil {
			e.Stderr.Write([]byte("fakelab: " + err.Error() + "\n"))
			return 127
		}
		go func() {
			io.Copy(stdin, e.Stdin)
			stdin.Close()
		}()
		pgid := cmd.Process.Pid
		done := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-e.Signals:
					if sig, ok := signals[s]; ok {
						syscall.Kill(-pgid, sig)
					}
				case <-e.Closed:
					syscall.Kill(-pgid, syscall.SIGHUP)
					return
				case <-done:
					return
				}
			}
		}()
		err = cmd.Wait()
		close(done)
		if err != nil && !errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState == nil {
			return 255
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return cmd.ProcessState.ExitCode()
	}
}
