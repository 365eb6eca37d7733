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
// sessions of their own) and keeps only what its slowest follower has
// not read yet, at most maxFeed: past that its reading of the log waits
// for that follower (whom the API drops when it stops reading). The last
// follower to leave ends the feed.
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
	buf     []byte // the log from byte base on
	base    int
	full    bool // past maxFeed: no new followers
	done    bool
	err     error
	wake    chan struct{} // closed, and made anew, at each change
	readers map[*int]bool // each follower's position in the log (bytes)
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
		f = &logFeed{wake: make(chan struct{}), cancel: cancel, readers: map[*int]bool{}}
		h.feeds[k] = f
		go func() {
			err := start(fctx, feedWriter{f: f, ctx: fctx})
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
	pos := new(int) // from the log's first byte, which a feed that took this follower still holds
	f.readers[pos] = true
	f.mu.Unlock()
	h.mu.Unlock()
	defer h.leave(k, f, pos)

	for {
		f.mu.Lock()
		chunk := f.buf[*pos-f.base:]
		chunk = chunk[:len(chunk):len(chunk)] // what is appended after is not this chunk's
		done, ferr, wake := f.done, f.err, f.wake
		f.mu.Unlock()
		if len(chunk) > 0 {
			if _, err := out.Write(chunk); err != nil {
				return true, err
			}
			f.mu.Lock()
			*pos += len(chunk)
			f.trim()
			f.mu.Unlock()
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

// leave is the follower at pos leaving f: the last one ends f's feed.
func (h *logHub) leave(k feedKey, f *logFeed, pos *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.mu.Lock()
	delete(f.readers, pos)
	last := len(f.readers) == 0
	f.trim()
	f.mu.Unlock()
	if last {
		f.cancel()
		if h.feeds[k] == f {
			delete(h.feeds, k)
		}
	}
}

// changed wakes f's followers and its writer; f.mu is held.
func (f *logFeed) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// least is the position of f's slowest follower; f.mu is held.
func (f *logFeed) least() int {
	least := f.base + len(f.buf)
	for p := range f.readers {
		least = min(least, *p)
	}
	return least
}

// trim drops, from a full feed (no new followers), what every follower
// has read, once that is at least half of what it holds (a copy now and
// then, not at every read); f.mu is held.
func (f *logFeed) trim() {
	if !f.full {
		return
	}
	if n := f.least() - f.base; n > 0 && 2*n >= len(f.buf) {
		f.buf = append(f.buf[:0:0], f.buf[n:]...) // a new array: the old one is freed
		f.base += n
	}
	f.changed() // a writer waiting for room
}

// feedWriter appends what the feed's follow reads to it, waiting while
// a full feed holds maxFeed bytes its slowest follower has not read.
type feedWriter struct {
	f   *logFeed
	ctx context.Context
}

func (w feedWriter) Write(b []byte) (int, error) {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.full && f.base+len(f.buf)-f.least() >= maxFeed {
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-w.ctx.Done():
			f.mu.Lock()
			return 0, w.ctx.Err()
		}
		f.mu.Lock()
	}
	f.buf = append(f.buf, b...)
	if f.base+len(f.buf) > maxFeed {
		f.full = true
		f.trim()
	}
	f.changed()
	return len(b), nil
}
