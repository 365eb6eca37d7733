// Package serve is gssh serve's machinery, apart from what a pass does:
// the loop that runs passes on a timer and when woken, and the unix
// socket beside the state through which gssh commands wake it (each
// peer known by its uid, from SO_PEERCRED). It knows nothing of jobs or
// hosts: the caller gives it the pass to run.
package serve

import (
	"context"
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
		l.Pass(ctx)
		timer.Reset(interval)
	}
}
