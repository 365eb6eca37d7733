package sshexec

import (
	"context"
	"io"
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
	c.Stdin = stdin
	var kept limitedBuffer
	kept.max = maxKeptStderr
	c.Stdout, c.Stderr = stdout, io.MultiWriter(stderr, &kept)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return &Error{Host: host, Detail: "start sh: " + err.Error(), Err: err}
	}
	return l.wait(ctx, host, cmd, c, &kept, nil)
}

// SignalName gives the name of signal n without "SIG", as OpenSSH's
// exit-signal does ("KILL", "TERM"), or the number when it has no name.
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	return strconv.Itoa(n)
}
