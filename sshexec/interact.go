package sshexec

import (
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"
)

// Terminal asks Interact for a pseudo-terminal on the far side, as
// `ssh -t` does.
type Terminal struct {
	Term       string // the TERM the far side is told (the local $TERM); "" = "xterm"
	Rows, Cols int    // its size in character cells
	// Resize carries each new size of the local terminal (on SIGWINCH)
	// while Interact runs; nil when the size never changes.
	Resize <-chan Size
	// Modes are the terminal modes the far side starts with (RFC 4254
	// 8: the local terminal's special characters and flags, IUTF8
	// included), over ECHO and the line speeds; nil: those alone.
	Modes ssh.TerminalModes
}

// Size is a terminal's size in character cells.
type Size struct{ Rows, Cols int }

// Interact runs cmd on host with the caller's streams, for a command a
// person is at (gssh run): stdin is copied to it as it comes (its end
// closes the command's stdin), and with tty non-nil the command runs on a
// pseudo-terminal of the given size (stdout then carries what it writes
// to stderr too, as a terminal does). It returns like Stream: nil, an
// *ExitError, or an *Error for a session cut off (ctx ended, the
// connection died: ErrNoOutcome). A terminal refused by the server
// (sshd's PermitTTY no) is an *Error saying so.
//
// stdin is read by a goroutine that may outlive the call, blocked in a
// read that cannot be interrupted (a terminal's): what it reads after
// Interact returned is dropped.
func (p *Pool) Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *Terminal) error {
	return p.withSession(ctx, host, func(sess *ssh.Session) error {
		return interactSession(ctx, host, cmd, sess, stdin, stdout, stderr, tty)
	})
}

func interactSession(ctx context.Context, host, cmd string, sess *ssh.Session, stdin io.Reader, stdout, stderr io.Writer, tty *Terminal) error {
	defer sess.Close()
	if tty != nil {
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		maps.Copy(modes, tty.Modes)
		if err := sess.RequestPty(cmp.Or(tty.Term, "xterm"), tty.Rows, tty.Cols, modes); err != nil {
			return &Error{Host: host, Detail: "the server refused a terminal (" + err.Error() + "; sshd's PermitTTY?): run without --pty"}
		}
	}
	out, errw := &guardedWriter{w: stdout}, &guardedWriter{w: stderr}
	var kept limitedBuffer
	kept.max = maxKeptStderr
	sess.Stdout, sess.Stderr = out, io.MultiWriter(errw, &kept)
	in, err := sess.StdinPipe()
	if err != nil {
		return &Error{Host: host, Detail: "stdin: " + err.Error(), Err: err}
	}
	if err := sess.Start(cmd); err != nil {
		return &Error{Host: host, Kind: ErrUnreachable, Detail: "start command: " + err.Error(), Sent: true}
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	stop := make(chan struct{})
	defer close(stop)
	go copyIn(in, stdin)
	if tty != nil && tty.Resize != nil {
		go func() {
			for {
				select {
				case s := <-tty.Resize:
					sess.WindowChange(s.Rows, s.Cols)
				case <-stop:
					return
				}
			}
		}()
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		out.close()
		errw.close()
		sess.Close()
		return commandCut(ctx, host)
	}
	return exitOf(host, cmd, err, &kept)
}

// copyIn copies stdin (nil: nothing) to w and closes w at its end.
func copyIn(w io.WriteCloser, stdin io.Reader) {
	if stdin != nil {
		io.Copy(w, stdin)
	}
	w.Close()
}

// Interact runs cmd under `sh -c` like Stream, but in a session of its
// own (setsid, as sshd starts a session's command) and with the caller's
// streams: see Pool.Interact. With tty it runs on a new pseudo-terminal
// (its controlling terminal) of that size, with TERM set. When ctx ends
// the whole session is killed.
func (l Local) Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *Terminal) error {
	c := exec.Command("/bin/sh", "-c", cmd)
	c.Env = l.Env
	if tty != nil {
		if c.Env == nil {
			c.Env = os.Environ()
		}
		c.Env = append(c.Env, "TERM="+cmp.Or(tty.Term, "xterm"))
		return l.interactPTY(ctx, host, c, stdin, stdout, tty)
	}
	var kept limitedBuffer
	kept.max = maxKeptStderr
	c.Stdout, c.Stderr = stdout, io.MultiWriter(stderr, &kept)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var in io.WriteCloser
	if f, ok := stdin.(*os.File); ok || stdin == nil {
		if ok {
			c.Stdin = f // the command reads it itself: nothing to copy
		}
	} else {
		var err error
		if in, err = c.StdinPipe(); err != nil {
			return &Error{Host: host, Detail: "stdin: " + err.Error(), Err: err}
		}
	}
	if err := c.Start(); err != nil {
		return &Error{Host: host, Detail: "start sh: " + err.Error(), Err: err}
	}
	if in != nil {
		go copyIn(in, stdin)
	}
	return l.wait(ctx, host, cmd, c, &kept, nil)
}

func (l Local) interactPTY(ctx context.Context, host string, c *exec.Cmd, stdin io.Reader, stdout io.Writer, tty *Terminal) error {
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Rows: uint16(tty.Rows), Cols: uint16(tty.Cols)})
	if err != nil {
		return &Error{Host: host, Detail: "start sh on a terminal: " + err.Error(), Err: err}
	}
	defer ptmx.Close()
	copied := make(chan struct{})
	go func() { io.Copy(stdout, ptmx); close(copied) }() // until EIO: every holder of the terminal is gone
	go func() {
		if stdin != nil {
			io.Copy(ptmx, stdin)
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	if tty.Resize != nil {
		go func() {
			for {
				select {
				case s := <-tty.Resize:
					pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(s.Rows), Cols: uint16(s.Cols)})
				case <-stop:
					return
				}
			}
		}()
	}
	return l.wait(ctx, host, c.Args[2], c, &limitedBuffer{}, copied)
}

// wait waits for c (started in a session of its own) and returns its
// exit as Stream does; when ctx ends first, its session is killed. With
// copied, it then waits up to a second more for the output to be copied
// (a process left in the background may hold a terminal open).
func (l Local) wait(ctx context.Context, host, cmd string, c *exec.Cmd, kept *limitedBuffer, copied <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-done
		return commandCut(ctx, host)
	}
	if copied != nil {
		select {
		case <-copied:
		case <-time.After(time.Second):
		}
	}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		e := &ExitError{Host: host, Cmd: cmd, Code: xe.ExitCode(), Stderr: kept.String()}
		if ws, ok := xe.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Code, e.Signal = -1, SignalName(int(ws.Signal()))
		}
		return e
	}
	if err != nil {
		return &Error{Host: host, Detail: err.Error(), Err: err, Sent: true}
	}
	return nil
}
