// Package sshexec is the one way gssh touches a host: a Runner runs a shell
// command line on a named host and returns its output, either over a pooled
// SSH connection (Pool) or on the controller itself (Local).
//
// Errors are classified once, here, into sentinels that callers test with
// errors.Is: ErrUnreachable, ErrTimeout, ErrAuth, ErrHostKey, ErrUnknownHostKey,
// ErrNoOutcome. A command that ran and exited non-zero is an *ExitError, which
// keeps the whole stderr; decisions read its fields, never err.Error().
package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Runner runs cmd, a line for the remote user's POSIX shell, on host, feeding
// it stdin (nil for none). It returns what the command wrote. When the command
// ran but exited non-zero the Result is still filled and the error is an
// *ExitError. Transport failures wrap one of the package's sentinels.
type Runner interface {
	Run(ctx context.Context, host, cmd string, stdin io.Reader) (Result, error)
}

// Result is what a command wrote to stdout and stderr, read to EOF.
type Result struct {
	Stdout, Stderr []byte
}

// ExitError reports a command that ran and exited with a non-zero status, or
// was killed by a signal. The transport was fine.
type ExitError struct {
	Host   string
	Cmd    string
	Code   int    // exit status; -1 when killed by a signal
	Signal string // signal name without "SIG" when killed by one, e.g. "KILL"
	Stderr string // the whole stderr
}

// maxErrStderr bounds how much stderr Error() prints; the field keeps it all.
const maxErrStderr = 512

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > maxErrStderr {
		msg = msg[:maxErrStderr] + "…"
	}
	what := fmt.Sprintf("exit status %d", e.Code)
	if e.Signal != "" {
		what = "killed by signal " + e.Signal
	}
	if msg == "" {
		return fmt.Sprintf("%s: command %s", e.Host, what)
	}
	return fmt.Sprintf("%s: command %s: %s", e.Host, what, msg)
}

// Sentinels for transport failures. Wrapped errors keep the cause as well.
var (
	// ErrUnreachable: TCP connect or the SSH handshake failed (refused, no
	// route, name not resolved, connection reset). Retryable.
	ErrUnreachable = errors.New("host unreachable")
	// ErrTimeout: connect, handshake or the command ran past its deadline.
	ErrTimeout = errors.New("timed out")
	// ErrAuth: the server refused every key offered, or no usable key exists.
	ErrAuth = errors.New("ssh authentication failed")
	// ErrHostKey: the host presented a key other than the one in known_hosts.
	// Never retried.
	ErrHostKey = errors.New("host key mismatch")
	// ErrUnknownHostKey: no known_hosts entry and StrictHostKeyChecking=yes.
	ErrUnknownHostKey = errors.New("host key unknown")
	// ErrNoOutcome: the session ended without an exit status (connection lost
	// mid-command). The command may or may not have run to completion.
	ErrNoOutcome = errors.New("command outcome unknown")
	// ErrUnknownHost: the name is neither in the inventory nor resolvable.
	ErrUnknownHost = errors.New("unknown host")
	// ErrConfig: the host's SSH settings cannot be used (unsupported
	// ProxyCommand, unreadable key file).
	ErrConfig = errors.New("ssh configuration")
)

// Reason names the sentinel err wraps in the words `gssh gpus` and `gssh
// hosts` print in their STATE column ("auth failed", "timeout"...), or
// "error" when err wraps none of them.
func Reason(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrHostKey):
		return "host key mismatch"
	case errors.Is(err, ErrUnknownHostKey):
		return "host key unknown"
	case errors.Is(err, ErrAuth):
		return "auth failed"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrUnreachable):
		return "unreachable"
	case errors.Is(err, ErrUnknownHost):
		return "unknown host"
	case errors.Is(err, ErrConfig):
		return "ssh config error"
	case errors.Is(err, ErrNoOutcome):
		return "connection lost"
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return "command failed"
	}
	return "error"
}
