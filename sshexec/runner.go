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

func (e *ExitError) Error() string { return e.Host + ": " + e.detail() }

// detail is the message without the host: "command exit status 3: <stderr>".
func (e *ExitError) detail() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > maxErrStderr {
		msg = msg[:maxErrStderr] + "…"
	}
	what := fmt.Sprintf("exit status %d", e.Code)
	if e.Signal != "" {
		what = "killed by signal " + e.Signal
	}
	if msg == "" {
		return "command " + what
	}
	return "command " + what + ": " + msg
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

// Error is a transport failure on one host, as Pool and Local report it:
// Kind is the sentinel a caller decides on (errors.Is works through it),
// Detail says what happened in words, and Err keeps a cause worth
// matching (context.Canceled when the caller gave up: a Ctrl-C while
// connecting is not ErrTimeout). Error() is "host: kind: detail".
type Error struct {
	Host   string // inventory name; "" while the failure is not yet tied to one
	Kind   error  // one of the sentinels above; nil when none applies (Ctrl-C)
	Detail string // without the host or Kind's text: "connect to 10.0.0.9:22: no route to host"
	Err    error  // the cause, when there is one to match
	// Sent: the command had reached the host when this happened (the
	// session died, or the caller gave up while it ran), so it may have
	// run, in part or whole. False for failures before it was sent
	// (connect, handshake, a session refused).
	Sent bool
}

// MayHaveRun reports whether the command behind err may have run on the
// host: it did (an *ExitError), or its outcome is unknown (an *Error with
// Sent). A launch with such an error must be reconciled from the worker,
// never retried blindly.
func MayHaveRun(err error) bool {
	var xe *ExitError
	var e *Error
	return errors.As(err, &xe) || errors.As(err, &e) && e.Sent
}

func (e *Error) Error() string {
	var parts []string
	for _, p := range []string{e.Host, kindText(e.Kind), e.Detail} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 && e.Err != nil {
		return e.Err.Error()
	}
	return strings.Join(parts, ": ")
}

func kindText(k error) string {
	if k == nil {
		return ""
	}
	return k.Error()
}

// Unwrap gives Kind and Err to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// fault builds an *Error of kind with a formatted detail.
func fault(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// ctxFault is the *Error of an operation cut short by ctx: ErrTimeout when
// its deadline passed, no sentinel at all when the caller cancelled it.
func ctxFault(ctx context.Context, host, what string) *Error {
	e := &Error{Host: host, Detail: what, Err: ctx.Err()}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.Kind = ErrTimeout
	}
	return e
}

// named returns err with its *Error tied to host (the pool's inner steps
// do not know the host's name). The *Error is copied, never changed.
func named(host string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e) && e.Host == "" && error(e) == err:
		c := *e
		c.Host = host
		return &c
	case errors.As(err, &e):
		return err
	}
	return &Error{Host: host, Detail: err.Error(), Err: err}
}

// Detail is err's text without the host and the sentinel's own words,
// when err is an *Error or an *ExitError ("connect to 10.0.0.9:22: no
// route to host" for a host row already saying "unreachable"); else the
// whole text.
func Detail(err error) string {
	var e *Error
	var xe *ExitError
	switch {
	case errors.As(err, &e) && e.Detail != "":
		return e.Detail
	case errors.As(err, &e) && e.Err != nil:
		return e.Err.Error()
	case errors.As(err, &xe):
		return xe.detail()
	}
	return err.Error()
}

// WithoutHost is err's text without the host in front, kind and detail
// kept ("host unreachable: connect to 10.0.0.9:22: no route to host"), for
// messages that name the host themselves.
func WithoutHost(err error) string {
	var e *Error
	var xe *ExitError
	switch {
	case errors.As(err, &e):
		c := *e
		c.Host = ""
		return c.Error()
	case errors.As(err, &xe):
		return xe.detail()
	}
	return err.Error()
}

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
