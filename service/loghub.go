package service

import (
	"context"
	"io"
	"sync"

	"github.com/gssh/gssh/job"
)

// logHub shares the following of a job's whole log among its followers
// (gssh serve: a dashboard's, the API's, members' gssh logs -f): one
// remote tail -f, one SSH session, however many follow it. A feed keeps
// what it read, so that a follower who joins later gets the log from its
// start; one past maxFeed bytes takes no new followers (they follow with
// sessions of their own). The last follower to leave ends the feed.
type logHub struct {
	mu    sync.Mutex
	feeds map[feedKey]*logFeed
}

// maxFeed is how much of a log a feed keeps for followers to come.
const maxFeed = 16 << 20

type feedKey struct {
	host    string
	id      job.ID
	attempt int
}

// logFeed is one followed log: its bytes so far and who reads them.
type logFeed struct {
	mu      sync.Mutex
	buf     []byte
	full    bool // past maxFeed: no new followers
	done    bool
	err     error
	wake    chan struct{} // closed, and made anew, at each change
	readers int
	cancel  context.CancelFunc
}

// follow writes to out the whole log the feed of k reads (start runs it:
// a follow of the log to its job's end, written to the writer given),
// from its first byte, as it comes, until it ends (its error is
// follow's) or ctx does. ok false: the feed of k takes no new followers
// (full), and nothing was written.
func (h *logHub) follow(ctx context.Context, k feedKey, start func(context.Context, io.Writer) error, out io.Writer) (ok bool, err error) {
	h.mu.Lock()
	if h.feeds == nil {
		h.feeds = map[feedKey]*logFeed{}
	}
	f := h.feeds[k]
	if f == nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &logFeed{wake: make(chan struct{}), cancel: cancel}
		h.feeds[k] = f
		go func() {
			err := start(fctx, feedWriter{f})
			f.mu.Lock()
			f.done, f.err = true, err
			f.changed()
			f.mu.Unlock()
			h.mu.Lock()
			if h.feeds[k] == f {
				delete(h.feeds, k) // ended: a follower to come starts another
			}
			h.mu.Unlock()
		}()
	}
	f.mu.Lock()
	if f.full {
		f.mu.Unlock()
		h.mu.Unlock()
		return false, nil
	}
	f.readers++
	f.mu.Unlock()
	h.mu.Unlock()
	defer h.leave(k, f)

	pos := 0
	for {
		f.mu.Lock()
		chunk := f.buf[pos:]
		done, ferr, wake := f.done, f.err, f.wake
		f.mu.Unlock()
		if len(chunk) > 0 {
			if _, err := out.Write(chunk); err != nil {
				return true, err
			}
			pos += len(chunk)
			continue
		}
		if done {
			return true, ferr
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
}

// leave is a follower of f leaving: the last one ends f's feed.
func (h *logHub) leave(k feedKey, f *logFeed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.mu.Lock()
	f.readers--
	last := f.readers == 0
	f.mu.Unlock()
	if last {
		f.cancel()
		if h.feeds[k] == f {
			delete(h.feeds, k)
		}
	}
}

// changed wakes f's followers; f.mu is held.
func (f *logFeed) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// feedWriter appends what the feed's follow reads to it.
type feedWriter struct{ f *logFeed }

func (w feedWriter) Write(b []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.f.buf = append(w.f.buf, b...)
	if len(w.f.buf) > maxFeed {
		w.f.full = true
	}
	w.f.changed()
	return len(b), nil
}
