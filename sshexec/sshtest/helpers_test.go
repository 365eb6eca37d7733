package sshtest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// dial connects as user with key, pinning the host key with knownLine.
func dial(tb testing.TB, addr, user string, key sshtest.Key, knownLine string) (*ssh.Client, error) {
	tb.Helper()
	cb, err := knownhosts.New(sshtest.KnownHosts(tb, "", knownLine))
	if err != nil {
		tb.Fatalf("knownhosts: %v", err)
	}
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(key.Signer)},
		HostKeyCallback: cb,
		Timeout:         10 * time.Second,
	})
}

// mustDial is dial that fails the test on error and closes at Cleanup.
func mustDial(tb testing.TB, addr, user string, key sshtest.Key, knownLine string) *ssh.Client {
	tb.Helper()
	c, err := dial(tb, addr, user, key, knownLine)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// run runs cmd in a new session of c.
func run(c *ssh.Client, cmd, stdin string) (stdout, stderr string, err error) {
	s, err := c.NewSession()
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	var o, e bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = strings.NewReader(stdin), &o, &e
	err = s.Run(cmd)
	return o.String(), e.String(), err
}

// exitStatus returns the remote exit status of err, or -1 if err is not an
// *ssh.ExitError.
func exitStatus(err error) int {
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

// shellExec returns an ExecFunc that runs cmd with the local /bin/sh, so
// the in-process server behaves like a real host in conformance tests.
// Commands are killed when ctx ends.
func shellExec(ctx context.Context) sshtest.ExecFunc {
	return func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
		c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as sshd gives a session
		c.WaitDelay = 100 * time.Millisecond
		err := c.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee) && ee.ExitCode() >= 0:
			return ee.ExitCode()
		}
		return 255
	}
}

// waitErr waits up to d for f and returns its error, failing the test if
// f does not return in time.
func waitErr(tb testing.TB, d time.Duration, what string, f func() error) error {
	tb.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		tb.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}
