package sshexec

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Local runs commands on the controller itself with `sh -c`, for hosts
// marked `local: true`. The host argument only labels errors.
type Local struct {
	// Env, when non-nil, replaces the environment of the commands.
	Env []string
}

var _ Runner = Local{}

// Run runs cmd under `sh -c` in its own process group; when ctx ends the
// whole group is killed.
func (l Local) Run(ctx context.Context, host, cmd string, stdin io.Reader) (Result, error) {
	var stdout, stderr syncBuffer
	err := l.Stream(ctx, host, cmd, stdin, &stdout, &stderr)
	return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, err
}

// Stream runs cmd like Run, copying its output to stdout and stderr as it
// comes. A non-zero exit is an *ExitError with up to 64 KiB of stderr.
func (l Local) Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.Command("/bin/sh", "-c", cmd)
	c.Env = l.Env
	var kept limitedBuffer
	kept.max = maxKeptStderr
	c.Stdout, c.Stderr = stdout, io.MultiWriter(stderr, &kept)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := stdinPipe(c, stdin)
	if err != nil {
		return &Error{Host: host, Detail: "stdin pipe: " + err.Error(), Err: err}
	}
	defer in.close()
	if err := c.Start(); err != nil {
		return &Error{Host: host, Detail: "start sh: " + err.Error(), Err: err}
	}
	in.started()
	return l.wait(ctx, host, cmd, c, &kept, nil)
}

// stdinPipe gives c the stdin stdin as an SSH session gives it: copied
// over a pipe that is closed when stdin ends, and no longer fed once the
// command has ended (close the returned pipe end then; a stdin that
// never ends is not waited for, and the copy ends with its next read).
// A nil or *os.File stdin goes to c as it is.
func stdinPipe(c *exec.Cmd, stdin io.Reader) (pipe, error) {
	if f, ok := stdin.(*os.File); ok || stdin == nil {
		if ok {
			c.Stdin = f
		}
		return pipe{}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return pipe{}, err
	}
	c.Stdin = r
	go func() {
		io.Copy(w, stdin)
		w.Close()
	}()
	return pipe{r, w}, nil
}

// pipe is stdinPipe's pipe (both nil when there is none).
type pipe struct{ r, w *os.File }

// started closes the controller's copy of the read end.
func (p pipe) started() {
	if p.r != nil {
		p.r.Close()
	}
}

func (p pipe) close() {
	if p.w != nil {
		p.r.Close()
		p.w.Close()
	}
}

// SignalName gives the name of signal n without "SIG", as OpenSSH's
// exit-signal does ("KILL", "TERM"), or the number when it has no name.
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(n)
}
