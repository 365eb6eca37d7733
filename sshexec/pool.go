package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gssh/gssh/sshconfig"
)

// Defaults used when ssh_config says nothing.
const (
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxSessions is OpenSSH's MaxSessions default. Hardened hosts use
	// fewer; the pool learns the real limit from the first refusal.
	DefaultMaxSessions = 10
	// DefaultKeepalive is used when ServerAliveInterval is unset: a pool may
	// live as long as `gssh serve`, and a dead connection must be noticed.
	DefaultKeepalive = 30 * time.Second
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Resolve gives the SSH settings of a host name; an error wrapping
	// ErrUnknownHost when there is no such host.
	Resolve func(host string) (sshconfig.Settings, error)
	// AgentSock is $SSH_AUTH_SOCK ("" = no agent).
	AgentSock string
	// ConnectTimeout applies when ssh_config has no ConnectTimeout (0 = DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// MaxSessions caps concurrent sessions per connection (0 = DefaultMaxSessions).
	MaxSessions int
	// Warn receives notices such as a host key added under accept-new. May be nil.
	Warn func(string)
	// RetryFatalAfter is how long a host key or configuration error is
	// given again without dialling, so a mismatching host is not hammered
	// (0 = DefaultRetryFatalAfter). After it, or after Forget, the next
	// command dials afresh and so reads known_hosts and the settings anew:
	// a long-running process needs no restart once the user fixes them.
	RetryFatalAfter time.Duration
	// RetryTimeoutAfter is how long a connect or handshake that timed out
	// is given again without dialling (0 = DefaultRetryTimeoutAfter): a
	// host that accepts TCP but never answers (a hung sshd) costs one
	// ConnectTimeout per process and pass, not one per command (a pass's
	// poll, then its probe).
	RetryTimeoutAfter time.Duration
	// Now is the clock of RetryFatalAfter and RetryTimeoutAfter (nil =
	// time.Now).
	Now func() time.Time
}

// Defaults of PoolOptions' retry windows.
const (
	DefaultRetryFatalAfter   = 30 * time.Second
	DefaultRetryTimeoutAfter = 15 * time.Second
)

// Pool keeps one SSH client per host and runs every command of the process
// over it, one session per command. It is safe for concurrent use.
type Pool struct {
	opt      PoolOptions
	mu       sync.Mutex
	hosts    map[string]*hostConn
	appendMu sync.Mutex // serialises known_hosts appends
	closed   bool
}

var _ Runner = (*Pool)(nil)

// NewPool returns an empty pool; connections open on first use.
func NewPool(opt PoolOptions) *Pool {
	if opt.ConnectTimeout <= 0 {
		opt.ConnectTimeout = DefaultConnectTimeout
	}
	if opt.MaxSessions <= 0 {
		opt.MaxSessions = DefaultMaxSessions
	}
	if opt.RetryTimeoutAfter <= 0 {
		opt.RetryTimeoutAfter = DefaultRetryTimeoutAfter
	}
	if opt.RetryFatalAfter <= 0 {
		opt.RetryFatalAfter = DefaultRetryFatalAfter
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Pool{opt: opt, hosts: map[string]*hostConn{}}
}

// hostConn is the pooled connection of one host.
type hostConn struct {
	dialMu   chan struct{} // a 1-slot lock held while dialling; ctx-aware
	mu       sync.Mutex
	client   *ssh.Client
	closer   []io.Closer        // the client and the jump clients under it
	fatal    error              // a host key or configuration error: given again until RetryFatalAfter
	fatalAt  time.Time          // when fatal was found
	timedOut error              // a dial that timed out: given again until RetryTimeoutAfter
	timedAt  time.Time          // when it timed out
	settings sshconfig.Settings // what client was dialled with
	gate     gate
	// silent is a client the keepalives gave up on (the host stopped
	// answering), and silentWhy says how: a session that ends with it
	// says so instead of a bare "no exit status".
	silent    *ssh.Client
	silentWhy string
}

func (p *Pool) host(name string) (*hostConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("ssh pool is closed")
	}
	hc := p.hosts[name]
	if hc == nil {
		hc = &hostConn{dialMu: make(chan struct{}, 1)}
		hc.gate.limit = p.opt.MaxSessions
		p.hosts[name] = hc
	}
	return hc, nil
}

// Connect opens (or reuses) the connection to host and returns how long the
// dial and handshake took (0 when reused).
func (p *Pool) Connect(ctx context.Context, host string) (time.Duration, error) {
	hc, err := p.host(host)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	c, fresh, err := p.client(ctx, host, hc)
	if err != nil {
		return 0, err
	}
	_ = c
	if !fresh {
		return 0, nil
	}
	return time.Since(start), nil
}

// client returns the live client of host, dialling it if needed. fresh
// reports whether this call dialled.
func (p *Pool) client(ctx context.Context, host string, hc *hostConn) (*ssh.Client, bool, error) {
	select {
	case hc.dialMu <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctxFault(ctx, host, "waiting for the connection")
	}
	defer func() { <-hc.dialMu }()
	hc.mu.Lock()
	c, fatal := hc.client, hc.fatal
	if fatal != nil && p.opt.Now().Sub(hc.fatalAt) >= p.opt.RetryFatalAfter {
		fatal, hc.fatal = nil, nil
	}
	if fatal == nil && hc.timedOut != nil {
		if p.opt.Now().Sub(hc.timedAt) < p.opt.RetryTimeoutAfter {
			fatal = hc.timedOut
		} else {
			hc.timedOut = nil
		}
	}
	hc.mu.Unlock()
	if c != nil {
		return c, false, nil
	}
	if fatal != nil {
		return nil, false, fatal
	}
	s, err := p.opt.Resolve(host)
	if err != nil {
		return nil, false, err
	}
	c, closers, err := p.dial(ctx, s)
	if err != nil {
		err = named(host, err)
		switch {
		case errors.Is(err, ErrHostKey) || errors.Is(err, ErrConfig):
			hc.mu.Lock()
			hc.fatal, hc.fatalAt = err, p.opt.Now()
			hc.mu.Unlock()
		case errors.Is(err, ErrTimeout) && ctx.Err() == nil:
			hc.mu.Lock()
			hc.timedOut, hc.timedAt = err, p.opt.Now()
			hc.mu.Unlock()
		}
		return nil, false, err
	}
	hc.mu.Lock()
	hc.client, hc.closer, hc.settings = c, closers, s
	hc.mu.Unlock()
	go p.watch(hc, c, s)
	return c, true, nil
}

// watch sends keepalives on c (x/crypto does not implement
// ServerAliveInterval) and drops c from the pool when it dies or misses
// ServerAliveCountMax replies in a row.
func (p *Pool) watch(hc *hostConn, c *ssh.Client, s sshconfig.Settings) {
	interval := s.ServerAliveInterval
	if interval <= 0 {
		interval = DefaultKeepalive
	}
	maxMiss := s.ServerAliveCountMax
	if maxMiss <= 0 {
		maxMiss = 3
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	missed := 0
loop:
	for {
		select {
		case <-done:
			break loop
		case <-t.C:
			reply := make(chan error, 1)
			go func() { _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); reply <- err }()
			select {
			case err := <-reply:
				if err != nil {
					break loop
				}
				missed = 0
			case <-time.After(interval):
				if missed++; missed >= maxMiss {
					hc.mu.Lock()
					hc.silent = c
					hc.silentWhy = fmt.Sprintf("no answer to %d keepalives in a row, %s apart (ServerAliveInterval × ServerAliveCountMax)", maxMiss, interval)
					hc.mu.Unlock()
					break loop
				}
			case <-done:
				break loop
			}
		}
	}
	hc.mu.Lock()
	if hc.client == c {
		p.dropLocked(hc)
	}
	hc.mu.Unlock()
}

func (p *Pool) dropLocked(hc *hostConn) {
	for i := len(hc.closer) - 1; i >= 0; i-- {
		hc.closer[i].Close()
	}
	hc.client, hc.closer = nil, nil
}

// dial connects to s, through its ProxyJump hops when it has some. The
// returned closers must be closed in reverse order.
func (p *Pool) dial(ctx context.Context, s sshconfig.Settings) (*ssh.Client, []io.Closer, error) {
	if s.ProxyCommand != "" {
		return nil, nil, fault(ErrConfig, "ProxyCommand %q is not supported by gssh; use ProxyJump", s.ProxyCommand)
	}
	var via *ssh.Client
	var closers []io.Closer
	fail := func(err error) (*ssh.Client, []io.Closer, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
		return nil, nil, err
	}
	for i, hop := range s.ProxyJump {
		c, err := p.dialOne(ctx, via, hop)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Detail = fmt.Sprintf("jump host %d (%s): %s", i+1, hop.Alias, e.Detail)
				return fail(err)
			}
			return fail(fmt.Errorf("jump host %d (%s): %w", i+1, hop.Alias, err))
		}
		closers = append(closers, c)
		via = c
	}
	c, err := p.dialOne(ctx, via, s)
	if err != nil {
		return fail(err)
	}
	return c, append(closers, c), nil
}

// dialOne opens TCP (directly, or as a channel of via) and runs the SSH
// handshake, both under the connect timeout.
func (p *Pool) dialOne(ctx context.Context, via *ssh.Client, s sshconfig.Settings) (*ssh.Client, error) {
	timeout := s.ConnectTimeout
	if timeout <= 0 {
		timeout = p.opt.ConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))

	hk, err := newHostKeys(s, p.opt.Warn, &p.appendMu)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if via != nil {
		conn, err = via.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, classifyDial(addr, err, timeout)
	}
	kr := loadKeyring(s, p.opt.AgentSock)
	defer kr.close()
	if len(kr.signers) == 0 {
		why := "no key to offer: no ssh-agent key and no readable identity file"
		if len(kr.notes) > 0 {
			why = strings.Join(kr.notes, "; ")
		}
		conn.Close()
		return nil, fault(ErrAuth, "%s@%s: %s", s.User, addr, why)
	}
	cfg := &ssh.ClientConfig{
		User:              s.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(kr.signers...)},
		HostKeyCallback:   hk.check,
		HostKeyAlgorithms: hk.algorithms(),
		Timeout:           timeout,
	}

	// The handshake must not outlive the timeout nor the caller's context.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	stopped := stop()
	if err != nil {
		conn.Close()
		var ne net.Error
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctxFault(ctx, "", "ssh handshake with "+addr)
		}
		if !stopped || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			e := fault(ErrTimeout, "ssh handshake with %s did not finish within %s (the port answers but does not speak SSH, or the host is overloaded)", addr, timeout)
			e.Err = context.DeadlineExceeded // the conn's deadline is ctx's
			return nil, e
		}
		return nil, classifyHandshake(addr, s.User, err, append(slices.Clip(kr.notes), offeredNote(kr.offered)))
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// Run runs cmd on host over the pooled connection. See Runner.
func (p *Pool) Run(ctx context.Context, host, cmd string, stdin io.Reader) (Result, error) {
	var stdout, stderr syncBuffer
	err := p.Stream(ctx, host, cmd, stdin, &stdout, &stderr)
	return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, err
}

// Stream runs cmd on host like Run but copies its output to stdout and
// stderr as it comes (for `gssh logs -f`). A non-zero exit is an
// *ExitError carrying up to 64 KiB of stderr. When ctx ends, Stream returns
// at once and nothing more is written to the writers.
func (p *Pool) Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error {
	return p.withSession(ctx, host, func(sess *ssh.Session) error {
		return runSession(ctx, host, cmd, sess, stdin, stdout, stderr)
	})
}

// withSession opens a session on host's pooled connection (dialling it
// when needed, waiting for a free session slot, redialling once when the
// connection died under it) and runs fn on it.
func (p *Pool) withSession(ctx context.Context, host string, fn func(*ssh.Session) error) error {
	hc, err := p.host(host)
	if err != nil {
		return err
	}
	redialed, refusals := false, 0
	for {
		c, _, err := p.client(ctx, host, hc)
		if err != nil {
			return err
		}
		long := IsLong(ctx)
		if err := hc.gate.acquire(ctx, long); err != nil {
			return ctxFault(ctx, host, "waiting for a free session")
		}
		sess, err := c.NewSession()
		if err == nil {
			err = fn(sess)
			hc.gate.release(long)
			if errors.Is(err, ErrNoOutcome) {
				hc.mu.Lock()
				if hc.silent == c {
					err = &Error{Host: host, Kind: ErrNoOutcome, Detail: "the host stopped answering (" + hc.silentWhy + "); the command may still run there", Sent: true}
				}
				hc.mu.Unlock()
			}
			return err
		}
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			// The server refused the session: MaxSessions reached. The gate
			// learns the real limit; a refusal with no other session open
			// comes from a slot the server has not freed yet, so back off a
			// little, a few times.
			alone := hc.gate.refused()
			hc.gate.release(long)
			if alone {
				if refusals++; refusals > 5 {
					return &Error{Host: host, Detail: "open session: " + err.Error(), Err: err}
				}
				select {
				case <-time.After(time.Duration(refusals*refusals) * 10 * time.Millisecond):
				case <-ctx.Done():
					return ctxFault(ctx, host, "waiting for a free session")
				}
			}
			continue
		}
		hc.gate.release(long)
		// The connection died under us: drop it and redial once.
		hc.mu.Lock()
		if hc.client == c {
			p.dropLocked(hc)
		}
		hc.mu.Unlock()
		if redialed {
			return &Error{Host: host, Kind: ErrUnreachable, Detail: "open session: " + err.Error()}
		}
		redialed = true
	}
}

// maxKeptStderr bounds the stderr an ExitError keeps from a streamed command.
const maxKeptStderr = 64 << 10

func runSession(ctx context.Context, host, cmd string, sess *ssh.Session, stdin io.Reader, stdout, stderr io.Writer) error {
	defer sess.Close()
	out, errw := &guardedWriter{w: stdout}, &guardedWriter{w: stderr}
	var kept limitedBuffer
	kept.max = maxKeptStderr
	sess.Stdout, sess.Stderr = out, io.MultiWriter(errw, &kept)
	if stdin != nil {
		sess.Stdin = stdin
	}
	done := make(chan error, 1)
	if err := sess.Start(cmd); err != nil {
		// The exec request may have reached the server before the
		// connection failed: the command may run.
		return &Error{Host: host, Kind: ErrUnreachable, Detail: "start command: " + err.Error(), Sent: true}
	}
	go func() { done <- sess.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Best effort: OpenSSH delivers signals only with privilege
		// separation; closing the channel also closes the command's pipes.
		// Do not wait for the command: the caller's deadline is over, and
		// the guards keep late output out of the caller's writers.
		out.close()
		errw.close()
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		return commandCut(ctx, host)
	}
	return exitOf(host, cmd, err, &kept)
}

// exitOf is the error of a session that ended with err: nil, an
// *ExitError (with the stderr kept), or an *Error for a session that
// ended without an exit status.
func exitOf(host, cmd string, err error, kept *limitedBuffer) error {
	if err == nil {
		return nil
	}
	var ee *ssh.ExitError
	var em *ssh.ExitMissingError
	switch {
	case errors.As(err, &ee):
		xe := &ExitError{Host: host, Cmd: cmd, Code: ee.ExitStatus(), Stderr: kept.String()}
		if sig := ee.Signal(); sig != "" {
			xe.Code, xe.Signal = -1, strings.TrimPrefix(sig, "SIG")
		}
		return xe
	case errors.As(err, &em):
		return &Error{Host: host, Kind: ErrNoOutcome, Detail: "the session ended without an exit status", Sent: true}
	}
	return &Error{Host: host, Kind: ErrNoOutcome, Detail: err.Error(), Sent: true}
}

// commandCut is the error of a command whose caller gave up on it while
// it ran: its deadline passed (ErrTimeout), or it was cancelled.
func commandCut(ctx context.Context, host string) error {
	e := ctxFault(ctx, host, "command interrupted")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.Detail = "command did not finish in time"
	}
	e.Sent = true
	return e
}

// Forget drops every host key, configuration and timeout error the pool keeps, and
// the connections of hosts whose settings (by Resolve, now) differ from
// those they were dialled with or that no longer resolve, so the next
// command to each of them dials afresh. Call it after reloading the
// inventory or ssh_config; commands in flight to a changed host fail.
func (p *Pool) Forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, hc := range p.hosts {
		s, err := p.opt.Resolve(name)
		hc.mu.Lock()
		hc.fatal, hc.timedOut = nil, nil
		if hc.client != nil && (err != nil || !reflect.DeepEqual(s, hc.settings)) {
			p.dropLocked(hc)
		}
		hc.mu.Unlock()
	}
}

// Close closes every connection. Runs in flight fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, hc := range p.hosts {
		hc.mu.Lock()
		if hc.client != nil {
			p.dropLocked(hc)
		}
		hc.mu.Unlock()
	}
	return nil
}

// gate is a semaphore whose limit can shrink when the server refuses a
// session (its MaxSessions is lower than configured). Long sessions (a
// log followed, a GPU stream, a gssh run's: LongSession) take at most
// the limit less a reserve, so that however many of them run, the
// passes' short commands (polls, launches, stops) always find a slot.
type gate struct {
	mu       sync.Mutex
	limit    int
	inflight int
	longs    int // of inflight, the long ones
	changed  chan struct{}
}

// reserve is how many of limit's slots only short sessions take: a
// third (at least one, when the limit leaves any).
func reserve(limit int) int {
	if limit <= 1 {
		return 0
	}
	return max(1, limit/3)
}

func (g *gate) acquire(ctx context.Context, long bool) error {
	for {
		g.mu.Lock()
		if g.inflight < g.limit && (!long || g.longs < g.limit-reserve(g.limit)) {
			g.inflight++
			if long {
				g.longs++
			}
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *gate) release(long bool) {
	g.mu.Lock()
	g.inflight--
	if long {
		g.longs--
	}
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
	g.mu.Unlock()
}

// refused records that the server refused a session while the caller held
// one slot: the limit drops to the sessions open besides it (at least 1). It
// reports whether no other session was open.
func (g *gate) refused() (alone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	others := g.inflight - 1
	if others < g.limit {
		g.limit = max(others, 1)
	}
	return others < 1
}

// classifyDial maps a TCP connect error to a sentinel.
func classifyDial(addr string, err error, timeout time.Duration) error {
	var ne net.Error
	if errors.Is(err, context.Canceled) {
		return &Error{Detail: "connect to " + addr, Err: context.Canceled}
	}
	var e *Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		e = fault(ErrTimeout, "connect to %s: no answer within %s", addr, timeout)
	case errors.As(err, &dnsErr):
		e = fault(ErrUnreachable, "%s: cannot resolve %q: %v (check the name or set `address:` in the inventory)", addr, dnsErr.Name, dnsErr.Err)
	default:
		e = fault(ErrUnreachable, "connect to %s: %v", addr, unwrapOpErr(err))
	}
	e.Err = err // errors.Is(err, syscall.ECONNREFUSED), errors.As(err, **net.DNSError) still work
	return e
}

// offeredNote says which keys were offered, for an authentication
// failure: "offered: ed25519 SHA256:... (~/.ssh/id_ed25519)".
func offeredNote(offered []string) string {
	return "offered: " + strings.Join(offered, ", ")
}

// classifyHandshake maps an ssh.NewClientConn error to a sentinel. x/crypto
// reports authentication failure only as text, so this is the one place
// that reads error text.
func classifyHandshake(addr, user string, err error, notes []string) error {
	var own *Error
	if errors.As(err, &own) {
		// Our own host key callback's error, without x/crypto's "ssh:
		// handshake failed:" in front.
		return own
	}
	msg := err.Error()
	hint := ""
	if len(notes) > 0 {
		hint = " (" + strings.Join(notes, "; ") + ")"
	}
	var e *Error
	switch {
	case strings.Contains(msg, "unable to authenticate"):
		e = fault(ErrAuth, "%s@%s refused every key offered%s", user, addr, hint)
	case strings.Contains(msg, "Too many authentication failures"):
		e = fault(ErrAuth, "%s@%s: too many authentication failures: the agent offers more keys than the server's MaxAuthTries allows; set IdentityFile and IdentitiesOnly yes for this host%s", user, addr, hint)
	case strings.Contains(msg, "no common algorithm for host key"):
		e = fault(ErrHostKey, "%s offers none of the key types known_hosts holds for it: %v", addr, err)
	default:
		e = fault(ErrUnreachable, "ssh handshake with %s: %v", addr, err)
	}
	e.Err = err
	return e
}

func unwrapOpErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// Ping sends one keepalive@openssh.com request over host's connection
// (dialling it if needed) and returns the round-trip time.
func (p *Pool) Ping(ctx context.Context, host string) (time.Duration, error) {
	hc, err := p.host(host)
	if err != nil {
		return 0, err
	}
	c, _, err := p.client(ctx, host, hc)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			return 0, &Error{Host: host, Kind: ErrUnreachable, Detail: "keepalive: " + err.Error()}
		}
		return time.Since(start), nil
	case <-ctx.Done():
		return 0, ctxFault(ctx, host, "keepalive")
	}
}
