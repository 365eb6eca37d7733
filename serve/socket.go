package serve

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The socket's protocol, version 1: a client sends one request, a line
// of JSON ({"op": "wake"}, or {"op": "gpus", "args": {...}}), and reads
// its answer: lines of {"more": ...} first when the op streams (a log's
// bytes, events), then one line ({"ok": true, "result": ...}, or
// {"ok": false, "error": {"message": "...", ...}, "result": ...}: an
// error may come with a result, as a probe of some hosts does); then
// the connection ends. The client of a duplex op (a job run in the
// foreground: its input, its signals) goes on sending lines of JSON
// after its request, each at most MaxRequest bytes, while it reads.
const (
	// MaxRequest is the longest request a Server reads, in bytes, its
	// newline included: a longer one is refused unread. (A submit's
	// request carries the job's command and environment.)
	MaxRequest = 1 << 20
	// MaxAnswer is the longest answer a client reads, in bytes.
	MaxAnswer = 64 << 20
	// RequestTimeout bounds the wait for a connection's request and the
	// writing of its answer: a client that sends nothing, or reads
	// nothing, costs the server that long at most. (A gssh command sends
	// its request as soon as it connects.)
	RequestTimeout = 2 * time.Second
	// OpTimeout bounds the work of one request (a probe of the hosts).
	OpTimeout = 2 * time.Minute
	// MaxConns is how many connections a Server handles at once; more
	// wait in the listen backlog. MaxPeerConns is how many of them one
	// uid may have open that have not sent their request yet: its next
	// ones are refused at once (KindBusy: the client tries again), so
	// that one user's idle connections hold up nobody else's.
	MaxConns     = 256
	MaxPeerConns = 16
	// SendTimeout bounds the writing of each line of a streamed answer:
	// a client that stops reading is dropped.
	SendTimeout = 10 * time.Second
)

// Op names. OpWake asks for a pass (Loop.Wake); OpPass asks for one and
// is answered once it has ended (Server.Next); the others are the
// Server's Handlers'.
const (
	OpWake = "wake"
	OpPass = "pass"
)

// Request is one request of the socket's protocol: the op, and its
// arguments as the op's handler reads them (JSON).
type Request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Answer is the server's answer to one Request.
type Answer struct {
	// More is one piece of a streamed answer (Handler's send), on a line
	// of its own before the last; the last line has none.
	More   json.RawMessage `json:"more,omitempty"`
	OK     bool            `json:"ok"`
	Error  *Fault          `json:"error,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Fault is a request's error as the answer carries it: its words, and
// what the server's caller says of it (its own code and kind), so that
// a client can make of it what the server's own error would have made.
type Fault struct {
	Message string `json:"message"`
	Code    int    `json:"code,omitempty"` // the caller's (gssh: the exit status the error maps to)
	Kind    string `json:"kind,omitempty"` // the caller's (gssh: "partial", "damaged", ...)
	// Failed and Total: a Kind "partial" error's hosts that failed, of
	// how many.
	Failed int `json:"failed,omitempty"`
	Total  int `json:"total,omitempty"`
}

func (f *Fault) Error() string { return f.Message }

// Fault kinds of the Server's own: KindUnknownOp, the answer to an op it
// does not know (an older gssh serve); KindRefused, to a request it
// refused unread or could not read (too long, not JSON); KindBusy, to a
// connection beyond its peer's MaxPeerConns, which Call tries again.
const (
	KindUnknownOp = "unknown_op"
	KindRefused   = "refused"
	KindBusy      = "busy"
)

// A Handler answers one op's requests for peer p: the result (marshalled
// as the answer's result; nil for none) and the error (made a Fault by
// the Server's FaultOf), both at once when the op has both. send writes
// one piece of a streamed answer before them (an error once the client
// has gone or stopped reading for SendTimeout).
type Handler func(ctx context.Context, p Peer, args json.RawMessage, send func(any) error) (result any, err error)

// A DuplexHandler answers the requests of a duplex op, as a Handler
// does, and is given what the client sends after its request: each
// line, in order, on recv, which is closed when the client's side ends
// (it closed the connection, or sent something not a line within
// MaxRequest bytes). The handler says what that end means; ctx is not
// cancelled by it. Its sends wait for the client to read, bounded by
// ctx alone (no SendTimeout: a person's job waits for its terminal).
type DuplexHandler func(ctx context.Context, p Peer, args json.RawMessage, send func(any) error, recv <-chan json.RawMessage) (result any, err error)

// Peer is the process at the other end of a unix socket connection, as
// the kernel says (SO_PEERCRED): never what the peer claims.
type Peer struct {
	UID, PID int
	// User, when set, is the user another front end authenticated the
	// request as (the HTTP API's token: Exchange); never set for a
	// socket's peer, whose user is its uid's.
	User string
}

// A Listener is a unix socket bound at Path, made by Listen: its Close
// removes the socket file (if it is still the one Listen made).
type Listener struct {
	*net.UnixListener
	Path string // absolute
	// Replaced says what Listen found at Path and replaced, when it was
	// not a socket ("a regular file", "a symbolic link"); "" otherwise.
	Replaced string
	dev, ino uint64 // the socket file Listen made
}

// Listen binds a unix socket at path with mode perm (a client needs
// write permission to connect): it is bound at a fresh name beside path,
// given its mode there, and renamed over path, so whatever was at path
// (a stale socket of a server that died, or any other file) is replaced
// whole, and no client ever finds the socket with another mode. The
// caller makes sure no other server uses path (a lock of its own).
// Errors name path.
func Listen(path string, perm fs.FileMode) (*Listener, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	var replaced string
	if fi, err := os.Lstat(path); err == nil {
		switch t := fi.Mode().Type(); {
		case t == fs.ModeDir:
			// Renamed aside whole, whatever is in it and whoever's it is
			// (the caller owns the directory it is in): a socket cannot
			// take its place.
			aside := path + ".untrusted-" + randHex()
			if err := os.Rename(path, aside); err != nil {
				return nil, fmt.Errorf("socket %s: a directory is there, and it cannot be moved aside: %w (remove it and start again)", path, err)
			}
			replaced = "a directory (moved aside to " + aside + ")"
		case t == fs.ModeSymlink:
			replaced = "a symbolic link"
		case t == 0:
			replaced = "a regular file"
		case t != fs.ModeSocket:
			replaced = "a " + t.String() + " file"
		}
	}
	tmp := path + ".new-" + randHex()
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	ul.SetUnlinkOnClose(false) // the name it was bound at is gone: Close removes path
	fail := func(err error) (*Listener, error) {
		ul.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fail(errors.New("no inode to tell the socket by"))
	}
	// The fresh name is this process's in a directory where nobody else
	// may remove it (the caller's, or a sticky lab directory): a chmod of
	// it by name changes this socket.
	if err := os.Chmod(tmp, perm); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return &Listener{UnixListener: ul, Path: path, Replaced: replaced, dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

// randHex is 12 random hex digits, for a fresh name.
func randHex() string {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Close stops listening and removes the socket file, unless something
// else has taken its name since.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.Path); serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Dev) == l.dev && uint64(st.Ino) == l.ino {
			if rerr := os.Remove(l.Path); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	return err
}

// A Server answers the socket's requests.
type Server struct {
	// Wake is the Loop's: a wake request pokes it. Next is its Next
	// (nil: OpPass is answered as OpWake is, at once).
	Wake chan<- struct{}
	Next func() <-chan struct{}
	// Log, when set, is told of each request refused, in one line.
	Log func(string)
	// Timeout bounds the wait for each connection's request
	// (RequestTimeout when 0), and a second more to write the answer.
	Timeout time.Duration
	// Handlers answer the ops other than OpWake, by name. Each request's
	// work is bounded by OpTimeout, unless its op is Long's (a log
	// followed until its job ends): those go on until the client goes.
	Handlers map[string]Handler
	Long     map[string]bool
	// Duplex answers the duplex ops, by name: their work is not bounded
	// by OpTimeout either.
	Duplex map[string]DuplexHandler
	// FaultOf makes a handler's error an answer's Fault (nil: its
	// message alone).
	FaultOf func(error) *Fault

	mu       sync.Mutex
	peers    map[int]int // connections being handled, by uid
	lastLog  time.Time   // of the last refusal logged
	unlogged int         // refusals not logged since (at most one a second is)
}

// Serve answers the connections l accepts, each in a goroutine of its
// own, at most MaxConns at once, until ctx is done or l is closed; it
// returns once every connection it took has ended. A client that sends
// garbage, sends too much, sends nothing or goes away costs the server
// one connection's Timeout at most.
func (s *Server) Serve(ctx context.Context, l *Listener) error {
	stop := context.AfterFunc(ctx, func() { l.UnixListener.Close() })
	defer stop()
	slots := make(chan struct{}, MaxConns)
	var backoff time.Duration
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		slots <- struct{}{}
		c, err := l.AcceptUnix()
		if err != nil {
			<-slots
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors or memory, a connection reset before
			// its accept: wait and go on, as net/http does; only a
			// closed listener ends the loop.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if s.Log != nil && backoff == time.Second {
				s.Log(fmt.Sprintf("socket %s: accept: %v (again in 1s)", l.Path, err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		wg.Go(func() {
			defer func() { <-slots }()
			defer c.Close()
			s.handle(ctx, c)
		})
	}
}

// handle answers one connection: the peer's identity first, then its one
// request.
func (s *Server) handle(ctx context.Context, c *net.UnixConn) {
	timeout := cmp.Or(s.Timeout, RequestTimeout)
	c.SetDeadline(time.Now().Add(timeout))
	peer, err := PeerOf(c)
	if err != nil {
		s.refuse(c, Peer{UID: -1}, fmt.Sprintf("the peer's credentials cannot be read: %v", err))
		return
	}
	if !s.admit(peer.UID) {
		why := fmt.Sprintf("uid %d has %d connections open that sent no request yet: try again", peer.UID, MaxPeerConns)
		s.log(peer, why)
		answer(c, Answer{Error: &Fault{Message: why, Kind: KindBusy}})
		return
	}
	br := bufio.NewReader(c)
	req, err := readRequest(br, timeout)
	s.leave(peer.UID) // its request read: it is idle no longer
	if err != nil {
		if !errors.Is(err, io.EOF) { // a client that only looked (Holder) says nothing
			s.refuse(c, peer, err.Error())
		}
		return
	}
	switch {
	case req.Op == OpWake || req.Op == OpPass && s.Next == nil:
		Poke(s.Wake)
		answer(c, Answer{OK: true})
		return
	case req.Op == OpPass:
		passed := s.Next() // a pass that starts after this: it reads what the client wrote
		Poke(s.Wake)
		select { // a client that went away meanwhile costs a wait for one pass
		case <-passed:
			answer(c, Answer{OK: true})
		case <-ctx.Done():
			answer(c, Answer{Error: &Fault{Message: "gssh serve is stopping", Kind: KindRefused}})
		case <-time.After(OpTimeout):
			answer(c, Answer{Error: &Fault{Message: fmt.Sprintf("no pass ended within %s", OpTimeout), Kind: KindRefused}})
		}
		return
	}
	h, duplex := s.Handlers[req.Op], s.Duplex[req.Op]
	if h == nil && duplex == nil {
		why := fmt.Sprintf("unknown op %.40q: this gssh serve knows %s", req.Op, strings.Join(s.ops(), ", "))
		s.log(peer, why)
		answer(c, Answer{Error: &Fault{Message: why, Kind: KindUnknownOp}})
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if h != nil && !s.Long[req.Op] {
		c.SetDeadline(time.Now().Add(OpTimeout))
		ctx, cancel = context.WithTimeout(ctx, OpTimeout)
		defer cancel()
	} else {
		c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	var recv chan json.RawMessage
	if duplex == nil {
		go func() { // the client sends nothing more: a read that returns means it went away
			br.ReadByte()
			cancel()
		}()
	} else {
		recv = receive(ctx, br)
	}
	var sendMu sync.Mutex
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line, _ := json.Marshal(Answer{More: b})
		sendMu.Lock()
		defer sendMu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		if duplex == nil {
			c.SetWriteDeadline(time.Now().Add(SendTimeout))
		}
		if _, err := c.Write(append(line, '\n')); err != nil {
			cancel()
			return fmt.Errorf("the client went away: %w", err)
		}
		return nil
	}
	if duplex != nil {
		h = func(ctx context.Context, p Peer, args json.RawMessage, send func(any) error) (any, error) {
			return duplex(ctx, p, args, send, recv)
		}
	}
	result, err := call(ctx, h, peer, req, send)
	stop() // the answer's own deadline is answer's: ctx's end must not cut it
	answer(c, s.last(req.Op, result, err))
}

// last is the last line of op's answer: its result and error.
func (s *Server) last(op string, result any, err error) Answer {
	var a Answer
	if result != nil {
		b, merr := json.Marshal(result)
		if merr != nil {
			err = errors.Join(err, fmt.Errorf("the answer to %s: %w", op, merr))
		} else {
			a.Result = b
		}
	}
	if err != nil {
		a.Error = &Fault{Message: err.Error()}
		if s.FaultOf != nil {
			a.Error = s.FaultOf(err)
		}
	}
	a.OK = err == nil
	return a
}

// call runs h for req, a panic in it an error (the daemon goes on).
func call(ctx context.Context, h Handler, p Peer, req Request, send func(any) error) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("gssh serve failed answering %s: %v", req.Op, r)
		}
	}()
	return h(ctx, p, req.Args, send)
}

// opsExcept is ops less the names given, in words.
func (s *Server) opsExcept(names ...string) string {
	var out []string
	for _, op := range s.ops() {
		if !slices.Contains(names, strings.Trim(op, `"`)) {
			out = append(out, op)
		}
	}
	return strings.Join(out, ", ")
}

// ops are the op names s answers, sorted.
func (s *Server) ops() []string {
	names := []string{strconv.Quote(OpWake), strconv.Quote(OpPass)}
	for op := range s.Handlers {
		names = append(names, strconv.Quote(op))
	}
	for op := range s.Duplex {
		names = append(names, strconv.Quote(op))
	}
	slices.Sort(names)
	return names
}

// admit counts a connection of uid that has not sent its request yet,
// unless it has MaxPeerConns such already; leave uncounts it.
func (s *Server) admit(uid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers == nil {
		s.peers = map[int]int{}
	}
	if s.peers[uid] >= MaxPeerConns {
		return false
	}
	s.peers[uid]++
	return true
}

func (s *Server) leave(uid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers[uid]--; s.peers[uid] <= 0 {
		delete(s.peers, uid)
	}
}

func (s *Server) refuse(c net.Conn, p Peer, why string) {
	s.log(p, why)
	answer(c, Answer{Error: &Fault{Message: why, Kind: KindRefused}})
}

// log tells Log of a refusal, at most one a second (and how many were
// not told since): a client sending garbage in a loop cannot flood it.
func (s *Server) log(p Peer, why string) {
	if s.Log == nil {
		return
	}
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.lastLog) < time.Second {
		s.unlogged++
		s.mu.Unlock()
		return
	}
	more := s.unlogged
	s.lastLog, s.unlogged = now, 0
	s.mu.Unlock()
	line := fmt.Sprintf("socket: request of uid %d (pid %d) refused: %s", p.UID, p.PID, why)
	if more > 0 {
		line += fmt.Sprintf(" (and %d more refused since the last said)", more)
	}
	s.Log(line)
}

// readRequest reads one request line of at most MaxRequest bytes, which
// is to come within timeout.
func readRequest(br *bufio.Reader, timeout time.Duration) (Request, error) {
	line, err := readLine(br, MaxRequest)
	switch {
	case errors.Is(err, errLineTooLong):
		return Request{}, fmt.Errorf("request longer than %d bytes: refused", MaxRequest)
	case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) == 0:
		return Request{}, io.EOF
	case errors.Is(err, os.ErrDeadlineExceeded):
		return Request{}, fmt.Errorf("no request within %s: dropped", timeout)
	case err != nil && !errors.Is(err, io.EOF):
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err // without the socket's addresses
		}
		return Request{}, fmt.Errorf("reading the request: %w", err)
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err = dec.Decode(&req)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("more after the request")
	}
	if err != nil {
		return Request{}, fmt.Errorf("request is not a JSON line like {\"op\": %q}: %v", OpWake, err)
	}
	return req, nil
}

// answer writes a, with a second of its own to write it in: a client
// that let the request's time run out still hears why it was dropped.
func answer(c net.Conn, a Answer) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	b, _ := json.Marshal(a)
	c.Write(append(b, '\n'))
}

// receive is the lines a duplex op's client sends after its request,
// read from br until its side ends (or a line is too long), or ctx does:
// then the channel is closed.
func receive(ctx context.Context, br *bufio.Reader) chan json.RawMessage {
	recv := make(chan json.RawMessage, 16)
	go func() {
		defer close(recv)
		for {
			line, err := readLine(br, MaxRequest)
			if err != nil {
				return
			}
			select {
			case recv <- json.RawMessage(bytes.TrimSpace(line)):
			case <-ctx.Done():
				return
			}
		}
	}()
	return recv
}
