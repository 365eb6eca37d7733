package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
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

// Server is an in-process SSH server (x/crypto/ssh) for unit tests: pool
// reuse, per-host concurrency, timeouts, partial failures. It answers
// "exec" session requests with ServerOptions.Exec and refuses every other
// session request (env, pty-req, shell, subsystem), and answers
// keepalive@openssh.com global requests with success.
type Server struct {
	Addr           string // "127.0.0.1:PORT" (or the requested loopback IP)
	Host           string
	Port           int
	HostKey        ssh.PublicKey // a fresh ed25519 key
	KnownHostsLine string        // known_hosts line pinning HostKey for Addr

	opt  ServerOptions
	cfg  *ssh.ServerConfig
	ln   net.Listener
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	conns, sessions, keepalives atomic.Int64

	mu     sync.Mutex
	closed bool
	live   map[net.Conn]struct{}
}

// NewServer starts an in-process SSH server on ListenIP:0 and closes it at
// Cleanup.
func NewServer(tb testing.TB, opt ServerOptions) *Server {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("sshtest: generate host key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatalf("sshtest: host key signer: %v", err)
	}
	if opt.Exec == nil {
		opt.Exec = func(cmd string, _ io.Reader, _, stderr io.Writer) int {
			fmt.Fprintf(stderr, "sshtest: %s: command not found\n", cmd)
			return 127
		}
	}
	s := &Server{
		HostKey: signer.PublicKey(),
		opt:     opt,
		done:    make(chan struct{}),
		live:    map[net.Conn]struct{}{},
	}
	s.cfg = &ssh.ServerConfig{PublicKeyCallback: s.checkKey}
	s.cfg.AddHostKey(signer)
	s.ln, s.Host, s.Port = listen(tb, opt.ListenIP)
	s.Addr = s.ln.Addr().String()
	s.KnownHostsLine = knownHostsLine(s.Addr, s.HostKey)
	tb.Cleanup(func() {
		s.Close()
		waitOrReport(tb, &s.wg, "sshtest: server "+s.Addr+": an Exec func still runs 10s after Close (make it return when stdin reads fail)")
	})
	s.wg.Add(1)
	go s.accept()
	return s
}

// Conns returns the number of TCP connections accepted so far.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Sessions returns the number of sessions opened so far.
func (s *Server) Sessions() int { return int(s.sessions.Load()) }

// Keepalives returns the number of keepalive@openssh.com requests so far.
func (s *Server) Keepalives() int { return int(s.keepalives.Load()) }

// Close makes the host go down: it closes the listener, so new dials are
// refused, and drops every connection. It is idempotent; Cleanup calls it.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.done)
	s.ln.Close()
	for c := range s.live {
		c.Close()
	}
}

// DropConns drops every live connection but keeps listening, so clients
// can reconnect.
func (s *Server) DropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.live {
		c.Close()
	}
}

func (s *Server) checkKey(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	for _, k := range s.opt.AuthorizedKeys {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return &ssh.Permissions{}, nil
		}
	}
	return nil, fmt.Errorf("key %s not authorized for %q", ssh.FingerprintSHA256(key), meta.User())
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.conns.Add(1)
		s.mu.Lock()
		if s.closed {
			c.Close()
		} else {
			s.live[c] = struct{}{}
			s.wg.Add(1)
			go s.serve(c)
		}
		s.mu.Unlock()
	}
}

// serve runs one connection: handshake, global requests, session channels.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.live, c)
		s.mu.Unlock()
		c.Close()
	}()
	if d := s.opt.HandshakeDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.done:
			return
		}
	}
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		return // the client sees the handshake error
	}
	defer sc.Close()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for req := range reqs {
			ok := req.Type == "keepalive@openssh.com"
			if ok {
				s.keepalives.Add(1)
			}
			req.Reply(ok, nil)
		}
	}()
	var open atomic.Int64 // sessions open on this connection
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		if n := s.opt.MaxSessions; n > 0 && open.Load() >= int64(n) {
			nc.Reject(ssh.ConnectionFailed, "open failed")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		open.Add(1)
		s.sessions.Add(1)
		s.wg.Add(1)
		go s.session(ch, creqs, func() { open.Add(-1) })
	}
}

// session serves one session channel; release runs before the channel
// closes, so a client that saw the close may open another at once.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request, release func()) {
	defer s.wg.Done()
	defer ch.Close()
	defer release()
	for req := range reqs {
		var p struct{ Command string }
		if req.Type != "exec" || ssh.Unmarshal(req.Payload, &p) != nil {
			req.Reply(false, nil)
			continue
		}
		req.Reply(true, nil)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ssh.DiscardRequests(reqs) // signals, window changes: refused
		}()
		status := s.opt.Exec(p.Command, ch, ch, ch.Stderr())
		if status < 0 {
			return // no exit-status: the client sees a lost command
		}
		ch.CloseWrite()
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
		return
	}
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
