// Package serve is gssh serve's machinery, apart from what a pass does:
// the loop that runs passes on a timer and when woken, and the unix
// socket beside the state through which gssh commands wake it (each
// peer known by its uid, from SO_PEERCRED). It knows nothing of jobs or
// hosts: the caller gives it the pass to run.
package serve

import (
	"context"
	"sync"
	"time"
)

// DefaultInterval is how often a Loop passes when nothing wakes it.
const DefaultInterval = 2 * time.Second

// A Loop runs passes one at a time: one at once, then one Interval after
// the end of the last, and one as soon as possible after each wake. Wakes
// coalesce: however many come before a pass starts (or while one runs),
// they cost one pass, which reads what all of them wrote.
type Loop struct {
	// Interval is the most time between the end of one pass and the
	// start of the next (DefaultInterval when 0).
	Interval time.Duration
	// Pass runs one pass; what it found it reports itself. Its ctx is
	// Run's: cancelled, the pass in flight is to be given up safely.
	Pass func(ctx context.Context)
	// Wake asks for a pass: a send that would block is dropped, since a
	// pass is asked for already (make it with NewWake).
	Wake chan struct{}

	mu sync.Mutex
	// next are the channels of Next's callers waiting for a pass to
	// start; current those waiting for the one in flight to end.
	next, current []chan struct{}
	ended         bool // Run returned: Next's channels come closed
}

// Next returns a channel that closes when the first pass that starts
// after this call has ended (or when Run has returned). With a wake sent
// after it, the caller learns when a pass has read what it wrote.
func (l *Loop) Next() <-chan struct{} {
	ch := make(chan struct{})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		close(ch)
		return ch
	}
	l.next = append(l.next, ch)
	return ch
}

// started moves the waiters for a pass to start to the pass now in
// flight; done closes theirs once it ended (all of them, with end: Run
// returns).
func (l *Loop) started() {
	l.mu.Lock()
	l.current, l.next = l.next, nil
	l.mu.Unlock()
}

func (l *Loop) done(end bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.current {
		close(ch)
	}
	l.current = nil
	if end {
		for _, ch := range l.next {
			close(ch)
		}
		l.next, l.ended = nil, true
	}
}

// NewWake is a Loop's wake channel: room for one wake, the one that
// stands for every wake until the next pass starts.
func NewWake() chan struct{} { return make(chan struct{}, 1) }

// Poke asks for a pass on wake without waiting: a wake already waiting
// stands for this one.
func Poke(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// Run runs passes until stop closes or ctx is done. stop lets the pass in
// flight end first (Run returns once it has); ctx's end reaches the pass
// in flight through its ctx. Nothing runs after Run returns.
func (l *Loop) Run(ctx context.Context, stop <-chan struct{}) {
	interval := l.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	timer := time.NewTimer(0) // the first pass at once
	defer timer.Stop()
	defer l.done(true)
	for {
		select { // a stop that came during the last pass goes first
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.Wake:
		}
		select { // this pass reads what the waiting wake asked for
		case <-l.Wake:
		default:
		}
		l.started()
		l.Pass(ctx)
		l.done(false)
		timer.Reset(interval)
	}
}
