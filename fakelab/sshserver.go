package fakelab

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Exec is one exec request of a session. Stdin reads fail (io.EOF) once
// the client closes the session or the connection drops. Signals carries
// the session's "signal" requests ("INT", "TERM", "KILL", ...: RFC 4254
// names, without SIG); it is never closed, and a signal sent while the
// buffer is full is dropped.
type Exec struct {
	Command        string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Signals        <-chan ssh.Signal
	// Closed is closed when the session's channel is gone (the client
	// closed it or the connection dropped).
	Closed <-chan struct{}
}

// ExecFunc runs an exec request and returns its exit status. A func
// simulating a hung command should block reading Stdin (or wait on
// Closed), so that Close does not wait for it. A status < 0 closes the
// session without an exit status, like a connection lost mid-command (the
// client gets *ssh.ExitMissingError).
type ExecFunc func(e Exec) int

// ServerOptions configures NewServer.
type ServerOptions struct {
	ListenIP       string          // default "127.0.0.1"; any 127.x.y.z works on Linux
	Port           int             // 0: a free port
	AuthorizedKeys []ssh.PublicKey // client keys accepted, for any user name
	Exec           ExecFunc        // nil: every command fails with status 127
	// MaxSessions caps open sessions per connection (0 = unlimited). An
	// extra session is refused as OpenSSH 9.2 refuses it: an
	// *ssh.OpenChannelError, reason ssh.ConnectionFailed, "open failed".
	MaxSessions    int
	HandshakeDelay time.Duration // wait before the SSH version exchange
}

// Server is an in-process SSH server (golang.org/x/crypto/ssh) with a
// fresh ed25519 host key: the real SSH protocol, public-key auth, exec
// sessions. It answers exec requests with ServerOptions.Exec, passes
// "signal" requests on to it, refuses every other session request (env,
// pty-req, shell, subsystem), and answers keepalive@openssh.com global
// requests with success.
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

// NewServer starts a Server on ListenIP:Port. Errors: the host key could
// not be made, or the address could not be listened on.
func NewServer(opt ServerOptions) (*Server, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("fakelab: generate host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("fakelab: host key signer: %w", err)
	}
	if opt.Exec == nil {
		opt.Exec = func(e Exec) int {
			fmt.Fprintf(e.Stderr, "fakelab: %s: command not found\n", e.Command)
			return 127
		}
	}
	if opt.ListenIP == "" {
		opt.ListenIP = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opt.ListenIP, strconv.Itoa(opt.Port)))
	if err != nil {
		return nil, fmt.Errorf("fakelab: listen: %w", err)
	}
	s := &Server{
		HostKey: signer.PublicKey(),
		opt:     opt,
		ln:      ln,
		done:    make(chan struct{}),
		live:    map[net.Conn]struct{}{},
	}
	s.cfg = &ssh.ServerConfig{PublicKeyCallback: s.checkKey}
	s.cfg.AddHostKey(signer)
	s.Addr = ln.Addr().String()
	host, port, _ := net.SplitHostPort(s.Addr)
	s.Host = host
	s.Port, _ = strconv.Atoi(port)
	s.KnownHostsLine = knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Conns returns the number of TCP connections accepted so far.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Sessions returns the number of sessions opened so far.
func (s *Server) Sessions() int { return int(s.sessions.Load()) }

// Keepalives returns the number of keepalive@openssh.com requests so far.
func (s *Server) Keepalives() int { return int(s.keepalives.Load()) }

// Close makes the host go down: it closes the listener, so new dials are
// refused, and drops every connection. It is idempotent and does not wait
// for Exec funcs: Wait does.
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

// Wait waits up to d for every connection's goroutines and Exec funcs to
// return after Close, and reports whether they did.
func (s *Server) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
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
		signals := make(chan ssh.Signal, 8)
		closed := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(closed)
			for r := range reqs { // window changes and the rest: refused
				var sig struct{ Signal string }
				ok := r.Type == "signal" && ssh.Unmarshal(r.Payload, &sig) == nil
				if ok {
					select {
					case signals <- ssh.Signal(sig.Signal):
					default:
					}
				}
				if r.WantReply {
					r.Reply(ok, nil)
				}
			}
		}()
		status := s.opt.Exec(Exec{Command: p.Command, Stdin: ch, Stdout: ch, Stderr: ch.Stderr(), Signals: signals, Closed: closed})
		if status < 0 {
			return // no exit-status: the client sees a lost command
		}
		ch.CloseWrite()
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
		return
	}
}
