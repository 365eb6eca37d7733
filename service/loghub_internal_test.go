package service

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// checker is a follower that checks each byte is the next of the log
// (the counter start writes) and, at each write, how much the feed
// holds.
type checker struct {
	f    func() *logFeed
	next uint32
	part []byte
	most int
	t    *testing.T
}

func (c *checker) Write(b []byte) (int, error) {
	c.part = append(c.part, b...)
	for len(c.part) >= 4 {
		if got := binary.BigEndian.Uint32(c.part); got != c.next {
			c.t.Fatalf("word %d of the log is %d", c.next, got)
		}
		c.next++
		c.part = c.part[4:]
	}
	if f := c.f(); f != nil {
		f.mu.Lock()
		c.most = max(c.most, len(f.buf))
		f.mu.Unlock()
	}
	return len(b), nil
}

// TestLogFeedBounded: a log of four times maxFeed followed by two
// followers, one of them slow, reaches both whole and in order, while
// the feed never holds more than twice maxFeed.
func TestLogFeedBounded(t *testing.T) {
	var h logHub
	k := feedKey{host: "h", id: 1, attempt: 1}
	const words = 4 * maxFeed / 4
	begin := make(chan struct{}) // both followers are in
	start := func(ctx context.Context, w io.Writer) error {
		<-begin
		var buf bytes.Buffer
		for i := uint32(0); i < words; i++ {
			binary.Write(&buf, binary.BigEndian, i)
			if buf.Len() >= 32<<10 {
				if _, err := w.Write(buf.Bytes()); err != nil {
					return err
				}
				buf.Reset()
			}
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	feed := func() *logFeed {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.feeds[k]
	}
	fast, slow := &checker{f: feed, t: t}, &checker{f: feed, t: t}
	done := make(chan error, 2)
	for _, w := range []io.Writer{fast, writerFunc(func(b []byte) (int, error) {
		for i := 0; i < 1000; i++ { // slow: some work per write
			_ = i * i
		}
		return slow.Write(b)
	})} {
		go func() {
			ok, err := h.follow(context.Background(), k, start, w)
			if !ok {
				err = errors.New("not taken")
			}
			done <- err
		}()
	}
	for {
		if f := feed(); f != nil {
			f.mu.Lock()
			n := len(f.readers)
			f.mu.Unlock()
			if n == 2 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	close(begin)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]*checker{"fast": fast, "slow": slow} {
		if c.next != words || len(c.part) != 0 {
			t.Errorf("%s follower read %d words of %d", name, c.next, words)
		}
		if c.most > 2*maxFeed+32<<10 {
			t.Errorf("%s follower saw the feed hold %d bytes, more than twice maxFeed (%d)", name, c.most, maxFeed)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
