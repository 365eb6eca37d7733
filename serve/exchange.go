package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Exchange answers one request of the socket's protocol that another
// front end carried (the HTTP API's POST /v1/rpc, for gssh --server
// URL): the request line read from in (then, for a duplex op, what
// follows it), each line of the answer written to out and flushed, as
// Serve answers a connection's. p is the peer as that front end
// authenticated it (Peer.User set); OpWake and OpPass are refused (they
// are the socket's own). ctx is the request's: its end ends the work.
func (s *Server) Exchange(ctx context.Context, p Peer, in io.Reader, out io.Writer, flush func() error) {
	var mu sync.Mutex
	write := func(a Answer) error {
		b, _ := json.Marshal(a)
		mu.Lock()
		defer mu.Unlock()
		if _, err := out.Write(append(b, '\n')); err != nil {
			return err
		}
		return flush()
	}
	br := bufio.NewReader(in)
	req, err := readRequest(br, 0)
	if err != nil {
		write(Answer{Error: &Fault{Message: err.Error(), Kind: KindRefused}})
		return
	}
	h, duplex := s.Handlers[req.Op], s.Duplex[req.Op]
	if h == nil && duplex == nil {
		write(Answer{Error: &Fault{Message: fmt.Sprintf("unknown op %.40q over HTTP: this gssh serve answers %s", req.Op, s.opsExcept(OpWake, OpPass)), Kind: KindUnknownOp}})
		return
	}
	if duplex != nil {
		// A duplex op's client going away is for its handler to read (recv
		// ends, as on the socket), not a cancel: it says what that means.
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if h != nil && !s.Long[req.Op] {
		ctx, cancel = context.WithTimeout(ctx, OpTimeout)
		defer cancel()
	}
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := write(Answer{More: b}); err != nil {
			cancel()
			return fmt.Errorf("the client went away: %w", err)
		}
		return nil
	}
	if duplex != nil {
		recv := receive(ctx, br)
		h = func(ctx context.Context, p Peer, args json.RawMessage, send func(any) error) (any, error) {
			return duplex(ctx, p, args, send, recv)
		}
	}
	result, err := call(ctx, h, p, req, send)
	write(s.last(req.Op, result, err))
}
