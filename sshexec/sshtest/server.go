package sshtest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gssh/gssh/fakelab"
)

// ExecFunc runs cmd for an exec request and returns its exit status. stdin
// reads fail (io.EOF) once the client closes the session or the connection
// drops: a func simulating a hung command should block reading stdin, so that
// Cleanup does not wait for it. A status < 0 closes the session without an
// exit status, like a connection lost mid-command (the client gets
// *ssh.ExitMissingError).
type ExecFunc func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int

// ServerOptions configures NewServer.
type ServerOptions struct {
	ListenIP       string          // default "127.0.0.1"; any 127.x.y.z works on Linux
	AuthorizedKeys []ssh.PublicKey // client keys accepted, for any user name
	Exec           ExecFunc        // nil: every command fails with status 127
	// MaxSessions caps open sessions per connection (0 = unlimited). An
	// extra session is refused as OpenSSH 9.2 refuses it: an
	// *ssh.OpenChannelError, reason ssh.ConnectionFailed, "open failed".
	MaxSessions    int
	HandshakeDelay time.Duration // wait before the SSH version exchange
}

// Server is an in-process SSH server for unit tests (pool reuse,
// per-host concurrency, timeouts, partial failures): a fakelab.Server
// answering exec requests with ServerOptions.Exec and refusing every other
// session request (env, pty-req, shell, subsystem).
type Server struct {
	*fakelab.Server
}

// NewServer starts an in-process SSH server on ListenIP:0 and closes it at
// Cleanup.
func NewServer(tb testing.TB, opt ServerOptions) *Server {
	tb.Helper()
	exec := opt.Exec
	if exec == nil {
		exec = func(cmd string, _ io.Reader, _, stderr io.Writer) int {
			fmt.Fprintf(stderr, "sshtest: %s: command not found\n", cmd)
			return 127
		}
	}
	s, err := fakelab.NewServer(fakelab.ServerOptions{
		ListenIP:       opt.ListenIP,
		AuthorizedKeys: opt.AuthorizedKeys,
		MaxSessions:    opt.MaxSessions,
		HandshakeDelay: opt.HandshakeDelay,
		Exec:           func(e fakelab.Exec) int { return exec(e.Command, e.Stdin, e.Stdout, e.Stderr) },
	})
	if err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		if !s.Wait(10 * time.Second) {
			tb.Error("sshtest: server " + s.Addr + ": an Exec func still runs 10s after Close (make it return when stdin reads fail)")
		}
	})
	return &Server{s}
}

// Silent starts a TCP listener on 127.0.0.1:0 that accepts connections and
// never says anything (for handshake-timeout tests), and returns its
// address. Connections are closed at Cleanup.
func Silent(tb testing.TB) string {
	tb.Helper()
	ln, _, _ := listen(tb, "")
	var wg sync.WaitGroup
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait() // conns is ours from here
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// waitOrReport waits for wg, failing the test with msg if that takes over
// 10 seconds.
func waitOrReport(tb testing.TB, wg *sync.WaitGroup, msg string) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		tb.Error(msg)
	}
}
