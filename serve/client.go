package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"
)

// ErrNotServing means no server listens at the socket's path: there is
// no socket there, or one a server left when it died.
var ErrNotServing = errors.New("gssh serve is not running")

// ErrGone means the server ended the connection before its answer: it
// stopped or was killed mid-request.
var ErrGone = errors.New("gssh serve went away")

// Dial connects to the server at path and checks that it runs as uid
// (SO_PEERCRED; -1: any uid), so that nobody else's socket at that path is
// ever talked to. An error wrapping ErrNotServing when none listens.
func Dial(ctx context.Context, path string, uid int) (*net.UnixConn, Peer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, Peer{}, fmt.Errorf("%w (no server at %s)", ErrNotServing, path)
		}
		return nil, Peer{}, fmt.Errorf("socket %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	peer, err := PeerOf(uc)
	if err != nil {
		uc.Close()
		return nil, Peer{}, fmt.Errorf("socket %s: %w", path, err)
	}
	if uid >= 0 && peer.UID != uid {
		uc.Close()
		return nil, Peer{}, fmt.Errorf("socket %s is served by uid %d (pid %d), not by uid %d, gssh serve's: not used", path, peer.UID, peer.PID, uid)
	}
	return uc, peer, nil
}

// Holder is the server listening at path, whoever runs it: an error
// wrapping ErrNotServing when none does.
func Holder(ctx context.Context, path string) (Peer, error) {
	c, peer, err := Dial(ctx, path, -1)
	if err != nil {
		return Peer{}, err
	}
	c.Close() // says nothing: the server ends the connection at once
	return peer, nil
}

// Wake asks the server at path, running as uid (see Dial), for a pass now,
// and waits for its answer (bounded by ctx, and by RequestTimeout).
func Wake(ctx context.Context, path string, uid int) error {
	return Call(ctx, path, uid, OpWake, nil, nil)
}

// Pass asks the server at path, running as uid (see Dial), for a pass
// now, and waits until one that started after the request has ended
// (bounded by ctx): what the caller wrote before has been read by a pass
// then.
func Pass(ctx context.Context, path string, uid int) error {
	return Call(ctx, path, uid, OpPass, nil, nil)
}

// Call sends the request of op, with args (marshalled as JSON; nil for
// none), to the server at path, running as uid (see Dial), and reads its
// answer into result (nil: none wanted), bounded by ctx (by OpTimeout and
// then some when ctx has no deadline). The server's error is a *Fault,
// with result read all the same when the answer has one; an error
// wrapping ErrNotServing when no server listens.
func Call(ctx context.Context, path string, uid int, op string, args, result any) error {
	if _, ok := ctx.Deadline(); !ok { // a server that stopped answering is not waited for forever
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, OpTimeout+2*RequestTimeout)
		defer cancel()
	}
	return Stream(ctx, path, uid, op, args, result, nil)
}

// Stream is Call for an op whose answer streams: each piece before the
// result goes to more (an error from it ends the call, and is
// returned); no deadline but ctx's. A connection the server refused as
// one too many of this uid's (KindBusy) is tried again, for up to
// busyRetry.
func Stream(ctx context.Context, path string, uid int, op string, args, result any, more func(json.RawMessage) error) error {
	b, err := requestLine(op, args)
	if err != nil {
		return err
	}
	var f *Fault
	for wait, start := time.Millisecond, time.Now(); ; wait = min(2*wait, 100*time.Millisecond) {
		err := roundTrip(ctx, path, uid, op, b, result, more, nil)
		if !errors.As(err, &f) || f.Kind != KindBusy || time.Since(start) > busyRetry {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait/2 + time.Duration(rand.Int64N(int64(wait)))):
		}
	}
}

// Duplex is Stream for a duplex op: each value from in (marshalled as
// JSON) is sent on a line of its own after the request, in order, until
// in is closed or the call ends; the connection stays open until the
// answer's last line. A connection refused as one too many (KindBusy)
// is not tried again (what in gave would be lost): its Fault is
// returned.
func Duplex(ctx context.Context, path string, uid int, op string, args, result any, more func(json.RawMessage) error, in <-chan any) error {
	b, err := requestLine(op, args)
	if err != nil {
		return err
	}
	return roundTrip(ctx, path, uid, op, b, result, more, in)
}

// requestLine is the request line of op with args (nil for none), its
// newline included.
func requestLine(op string, args any) ([]byte, error) {
	req := Request{Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		req.Args = b
	}
	b, _ := json.Marshal(req)
	return append(b, '\n'), nil
}

// busyRetry is how long Stream tries again a server busy with this
// uid's other connections.
const busyRetry = 30 * time.Second

// roundTrip is one connection of Stream: req sent (then what in gives,
// nil: nothing), its answer read. A path that is a URL (http://,
// https://) is gssh serve's HTTP API: the request goes to its POST
// /v1/rpc, with the token of ctx (WithToken).
func roundTrip(ctx context.Context, path string, uid int, op string, req []byte, result any, more func(json.RawMessage) error, in <-chan any) error {
	if IsURL(path) {
		return httpRoundTrip(ctx, path, op, req, result, more, in)
	}
	c, _, err := Dial(ctx, path, uid)
	if err != nil {
		return err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	_, werr := c.Write(req) // a server that refused the peer answered and closed: its answer says why
	if in != nil && werr == nil {
		done := make(chan struct{})
		defer close(done)
		go sendLines(c, in, done)
	}
	return readAnswer(ctx, bufio.NewReader(c), "socket "+path, op, werr, result, more)
}

// sendLines writes each value from in as a JSON line to w, until in is
// closed, done is, or a write fails (the answer's read says why).
func sendLines(w io.Writer, in <-chan any, done <-chan struct{}) {
	for {
		select {
		case v, ok := <-in:
			if !ok {
				return
			}
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return
			}
		case <-done:
			return
		}
	}
}

// readAnswer reads an answer's lines from br (where: "socket PATH", or
// the URL, for errors): the streamed pieces to more, the result into
// result, the server's error as a *Fault. werr is the request's own
// write error, if any.
func readAnswer(ctx context.Context, br *bufio.Reader, where, op string, werr error, result any, more func(json.RawMessage) error) error {
	for {
		line, err := readLine(br, MaxAnswer)
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
				return context.DeadlineExceeded // the connection's deadline is ctx's: it came first
			}
			if werr != nil {
				err = werr
			}
			return fmt.Errorf("%s: %w: it went away without an answer: %w", where, ErrGone, err)
		}
		var a Answer
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("%s: the answer is not gssh serve's: %w", where, err)
		}
		if a.More != nil {
			if more == nil {
				return fmt.Errorf("%s: the answer to %s streams, and nothing here reads it", where, op)
			}
			if err := more(a.More); err != nil {
				return err
			}
			continue
		}
		if result != nil && len(a.Result) > 0 {
			if err := json.Unmarshal(a.Result, result); err != nil {
				return fmt.Errorf("%s: the answer to %s: %w", where, op, err)
			}
		}
		if !a.OK {
			if a.Error == nil {
				a.Error = &Fault{Message: "gssh serve said no, without saying why"}
			}
			return a.Error
		}
		return nil
	}
}

// errLineTooLong is readLine's error past its max.
var errLineTooLong = errors.New("a line too long")

// readLine reads one line of at most max bytes (an error wrapping
// errLineTooLong past them, the rest unread).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, fmt.Errorf("%w: longer than %d bytes", errLineTooLong, max)
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
