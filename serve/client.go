package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// ErrNotServing means no server listens at the socket's path: there is
// no socket there, or one a server left when it died.
var ErrNotServing = errors.New("gssh serve is not running")

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
	return call(ctx, path, uid, Request{Op: OpWake})
}

// call sends r to the server at path and reads its answer: the server's
// refusal as an error.
func call(ctx context.Context, path string, uid int, r Request) error {
	c, _, err := Dial(ctx, path, uid)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	b, _ := json.Marshal(r)
	_, werr := c.Write(append(b, '\n')) // a server that refused the peer answered and closed: its answer says why
	line, err := bufio.NewReader(io.LimitReader(c, MaxRequest)).ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		if werr != nil {
			return fmt.Errorf("socket %s: %w", path, werr)
		}
		return fmt.Errorf("socket %s: no answer: %w", path, err)
	}
	var a Answer
	if err := json.Unmarshal(line, &a); err != nil {
		return fmt.Errorf("socket %s: the answer is not gssh serve's: %w", path, err)
	}
	if !a.OK {
		return fmt.Errorf("gssh serve at %s: %s", path, a.Error)
	}
	return nil
}
