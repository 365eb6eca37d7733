package serve

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestLoop runs passes of half a second: the first at once; five wakes
// during it cost one pass, right after it; then the interval; a wake
// while idle starts one at once; a stop during a pass lets it end and
// starts no other.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var starts []time.Duration
		wake := NewWake()
		l := &Loop{Interval: 2 * time.Second, Wake: wake, Pass: func(context.Context) {
			starts = append(starts, time.Since(t0))
			time.Sleep(500 * time.Millisecond)
		}}
		stop := make(chan struct{})
		var ended time.Duration
		done := make(chan struct{})
		go func() {
			l.Run(t.Context(), stop)
			ended = time.Since(t0)
			close(done)
		}()
		time.Sleep(100 * time.Millisecond)
		for range 5 {
			Poke(wake)
		}
		time.Sleep(3900 * time.Millisecond) // t = 4.0 s
		Poke(wake)
		time.Sleep(200 * time.Millisecond)
		close(stop)
		<-done
		want := []time.Duration{0, 500 * time.Millisecond, 3 * time.Second, 4 * time.Second}
		if !slices.Equal(starts, want) {
			t.Errorf("passes started at %v, want %v", starts, want)
		}
		if ended != 4500*time.Millisecond {
			t.Errorf("Run returned at %v, want 4.5s (the pass in flight ended first)", ended)
		}
	})
}

// TestLoopCancel: a cancelled ctx reaches the pass in flight, and Run
// returns after it without another.
func TestLoopCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		passes := 0
		l := &Loop{Interval: time.Second, Wake: NewWake(), Pass: func(ctx context.Context) {
			passes++
			select {
			case <-ctx.Done():
			case <-time.After(time.Hour):
				t.Error("the pass in flight never saw the cancel")
			}
		}}
		done := make(chan struct{})
		go func() { l.Run(ctx, nil); close(done) }()
		time.Sleep(10 * time.Millisecond)
		Poke(l.Wake)
		cancel()
		<-done
		if passes != 1 {
			t.Errorf("%d passes, want 1", passes)
		}
	})
}

// TestLoopNext: Next's channel closes when a pass that started after the
// call has ended, not the one in flight then; and when Run returns.
func TestLoopNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		l := &Loop{Interval: time.Hour, Wake: NewWake(), Pass: func(context.Context) { time.Sleep(time.Second) }}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { l.Run(t.Context(), stop); close(done) }()
		time.Sleep(500 * time.Millisecond) // the first pass is in flight
		ch := l.Next()
		Poke(l.Wake)
		<-ch
		if d := time.Since(t0); d != 2*time.Second {
			t.Errorf("Next closed at %v, want 2s (the end of the pass after the one in flight)", d)
		}
		late := l.Next() // no wake: no pass comes within the hour
		close(stop)
		<-done
		select {
		case <-late:
		default:
			t.Error("a Next still open after Run returned")
		}
		select {
		case <-l.Next():
		default:
			t.Error("Next after Run returned is not closed")
		}
	})
}
