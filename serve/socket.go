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
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The socket's protocol, version 1: a client sends one request, a line
// of JSON ({"op": "wake"}, or {"op": "gpus", "args": {...}}), and reads
// one answer line ({"ok": true, "result": ...}, or {"ok": false,
// "error": {"message": "...", ...}, "result": ...}: an error may come
// with a result, as a probe of some hosts does); then the connection
// ends.
const (
	// MaxRequest is the longest request a Server reads, in bytes, its
	// newline included: a longer one is refused unread.
	MaxRequest = 4096
	// MaxAnswer is the longest answer a client reads, in bytes.
	MaxAnswer = 64 << 20
	// RequestTimeout bounds the wait for a connection's request and the
	// writing of its answer: a client that sends nothing, or reads
	// nothing, costs the server that long at most.
	RequestTimeout = 5 * time.Second
	// OpTimeout bounds the work of one request (a probe of the hosts).
	OpTimeout = 2 * time.Minute
	// MaxConns is how many connections a Server handles at once; more
	// wait in the listen backlog.
	MaxConns = 64
)

// Op names. OpWake asks for a pass (Loop.Wake); the others are the
// Server's Handlers'.
const OpWake = "wake"

// Request is one request of the socket's protocol: the op, and its
// arguments as the op's handler reads them (JSON).
type Request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Answer is the server's answer to one Request.
type Answer struct {
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

// KindUnknownOp is the Fault kind of the answer to an op the server does
// not know (an older gssh serve): the client may do the work itself.
const KindUnknownOp = "unknown_op"

// A Handler answers one op's requests for peer p: the result (marshalled
// as the answer's result; nil for none) and the error (made a Fault by
// the Server's FaultOf), both at once when the op has both.
type Handler func(ctx context.Context, p Peer, args json.RawMessage) (result any, err error)

// Peer is the process at the other end of a unix socket connection, as
// the kernel says (SO_PEERCRED): never what the peer claims.
type Peer struct {
	UID, PID int
}

// A Listener is a unix socket bound at Path, made by Listen: its Close
// removes the socket file (if it is still the one Listen made).
type Listener struct {
	*net.UnixListener
	Path     string
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
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	tmp := path + ".new-" + hex.EncodeToString(b[:])
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
	return &Listener{UnixListener: ul, Path: path, dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
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
	// Wake is the Loop's: a wake request pokes it.
	Wake chan<- struct{}
	// Log, when set, is told of each request refused, in one line.
	Log func(string)
	// Timeout bounds the wait for each connection's request
	// (RequestTimeout when 0), and a second more to write the answer.
	Timeout time.Duration
	// Handlers answer the ops other than OpWake, by name.
	Handlers map[string]Handler
	// FaultOf makes a handler's error an answer's Fault (nil: its
	// message alone).
	FaultOf func(error) *Fault
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
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(100 * time.Millisecond) // out of descriptors: let connections end
				continue
			}
			return fmt.Errorf("socket %s: %w", l.Path, err)
		}
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
	c.SetDeadline(time.Now().Add(cmp.Or(s.Timeout, RequestTimeout)))
	peer, err := PeerOf(c)
	if err != nil {
		s.refuse(c, Peer{UID: -1}, fmt.Sprintf("the peer's credentials cannot be read: %v", err))
		return
	}
	if _, err := user.LookupId(strconv.Itoa(peer.UID)); err != nil {
		s.refuse(c, peer, fmt.Sprintf("uid %d has no account on this host: refused", peer.UID))
		return
	}
	req, err := readRequest(c)
	if err != nil {
		if !errors.Is(err, io.EOF) { // a client that only looked (Holder) says nothing
			s.refuse(c, peer, err.Error())
		}
		return
	}
	if req.Op == OpWake {
		Poke(s.Wake)
		answer(c, Answer{OK: true})
		return
	}
	h := s.Handlers[req.Op]
	if h == nil {
		why := fmt.Sprintf("unknown op %q: this gssh serve knows %s", req.Op, strings.Join(s.ops(), ", "))
		if s.Log != nil {
			s.Log(fmt.Sprintf("socket: request of uid %d (pid %d) refused: %s", peer.UID, peer.PID, why))
		}
		answer(c, Answer{Error: &Fault{Message: why, Kind: KindUnknownOp}})
		return
	}
	c.SetDeadline(time.Now().Add(OpTimeout))
	ctx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	go func() { // the client sends nothing more: a read that returns means it went away
		var b [1]byte
		c.Read(b[:])
		cancel()
	}()
	result, err := h(ctx, peer, req.Args)
	var a Answer
	if result != nil {
		b, merr := json.Marshal(result)
		if merr != nil {
			err = errors.Join(err, fmt.Errorf("the answer to %s: %w", req.Op, merr))
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
	answer(c, a)
}

// ops are the op names s answers, sorted.
func (s *Server) ops() []string {
	names := []string{strconv.Quote(OpWake)}
	for op := range s.Handlers {
		names = append(names, strconv.Quote(op))
	}
	slices.Sort(names)
	return names
}

func (s *Server) refuse(c net.Conn, p Peer, why string) {
	if s.Log != nil {
		s.Log(fmt.Sprintf("socket: request of uid %d (pid %d) refused: %s", p.UID, p.PID, why))
	}
	answer(c, Answer{Error: &Fault{Message: why}})
}

// readRequest reads one request line of at most MaxRequest bytes.
func readRequest(r io.Reader) (Request, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxRequest), MaxRequest)
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || errors.Is(err, io.EOF) && len(line) >= MaxRequest:
		return Request{}, fmt.Errorf("request longer than %d bytes: refused", MaxRequest)
	case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) == 0:
		return Request{}, io.EOF
	case err != nil && !errors.Is(err, io.EOF):
		return Request{}, fmt.Errorf("reading the request: %w", err)
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
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
