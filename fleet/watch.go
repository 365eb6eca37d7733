package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/units"
)

// The bounds of a stream's restarts: one that ended soon after its start
// waits before the next, from watchBackoff doubling up to watchBackoffMax;
// one that ran for a while starts again at once.
const (
	watchBackoff    = time.Second
	watchBackoffMax = 30 * time.Second
	// helperRetry is how long a host whose helper could not stream (NVML
	// failing, bogus process records) streams nvidia-smi before the
	// helper is tried again.
	helperRetry = 10 * time.Minute
)

// streams are the GPU streams of a watched fleet: each host's latest
// frame, and the streams running.
type streams struct {
	mu      sync.Mutex
	every   time.Duration
	latest  map[string]frame
	running map[string]context.CancelFunc
	hung    map[string]Report // a probe that hung, since the host's last frame (hungProbe)
	wg      sync.WaitGroup
	stop    func() // ends every stream and waits for them
	log     func(problem bool, text string)
}

// frame is one host's snapshot from its stream and when it came.
type frame struct {
	snap probe.Snapshot
	at   time.Time
}

// Watch keeps a GPU stream open to every host of the inventory (and of
// every inventory Reload reads): one long-lived session per host on its
// pooled connection, in which the helper (-watch) or, where it cannot
// run, a loop of nvidia-smi's probe prints a snapshot every interval. A
// probe asking for snapshots at most ProbeOptions.MaxAge old is answered
// from the latest frame. A stream that ends or stalls (nothing for
// probe.StallAfter(every)) is started again, at once when it ran a
// while, else after a backoff of 1 s doubling to 30 s; when it ended
// before its first frame, the host is probed once first (which pushes
// the helper, learns the fields nvidia-smi rejects, or finds the host
// down). A stream's frame stands until the next, or until its stream
// ends: then the host is probed again, with the failure rules of a
// probe. The streams stop when ctx ends or the fleet is closed; stop
// waits for them. Hosts probed by Options.Source (tests) stream nothing.
//
// log, when set, is told (one line, the host first) when a host's stream
// stops standing for it (a problem: once, however often it is restarted
// in vain), when it runs again, and when a host streams nvidia-smi
// instead of the helper.
func (f *Fleet) Watch(ctx context.Context, every time.Duration, log func(problem bool, text string)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	if log == nil {
		log = func(bool, string) {}
	}
	s := &streams{every: every, latest: map[string]frame{}, running: map[string]context.CancelFunc{}, hung: map[string]Report{}, log: log}
	s.stop = func() {
		cancel()
		s.wg.Wait()
	}
	f.mu.Lock()
	f.streams = s
	f.mu.Unlock()
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			f.syncStreams(ctx, s)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return s.stop
}

// syncStreams starts a stream for each host of the inventory without one
// and stops those of hosts it no longer lists.
func (f *Fleet) syncStreams(ctx context.Context, s *streams) {
	if f.opt.Source != nil || ctx.Err() != nil {
		return
	}
	inv := f.Inventory()
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := map[string]bool{}
	for _, h := range inv.Hosts {
		listed[h.Name] = true
		if s.running[h.Name] != nil {
			continue
		}
		hctx, cancel := context.WithCancel(ctx)
		s.running[h.Name] = cancel
		s.wg.Go(func() { f.watchHost(hctx, s, h.Name) })
	}
	for name, cancel := range s.running {
		if !listed[name] {
			cancel()
			delete(s.running, name)
			delete(s.latest, name)
			delete(s.hung, name)
		}
	}
}

// watchHost runs host name's stream, and starts it again, until ctx ends.
func (f *Fleet) watchHost(ctx context.Context, s *streams, name string) {
	ctx = sshexec.LongSession(ctx) // its stream lasts: never in the passes' reserve (probes after a failed start are long too: few)
	backoff := time.Duration(0)
	var smiWhy string // why this host streams nvidia-smi, not the helper
	var smiUntil time.Time
	pushed := false  // a probe pushed the helper after a stream found none
	failing := false // its failure was logged, and no frame came since
	var told string  // the last reason logged for streaming nvidia-smi
	for ctx.Err() == nil {
		h, ok := f.Lookup(name)
		if !ok {
			return
		}
		if !smiUntil.IsZero() && f.opt.Now().After(smiUntil) {
			smiWhy, smiUntil = "", time.Time{}
		}
		began := f.opt.Now()
		frames := 0
		err := f.streamer(h, smiWhy).Stream(ctx, s.every, func(snap probe.Snapshot) {
			snap.Host = name
			if frames++; failing {
				failing = false
				s.log(false, name+": the GPU stream runs again")
			}
			s.mu.Lock()
			s.latest[name] = frame{snap, f.opt.Now()}
			delete(s.hung, name)
			s.mu.Unlock()
		})
		s.mu.Lock()
		delete(s.latest, name) // its state is the next probe's to say
		s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		var hu *probe.HelperUnusable
		var rej *probe.RejectedFieldError
		again := false // start the other stream, or the same after the probe fixed it, at once
		switched := "" // why this host streams nvidia-smi from now on
		switch {
		case errors.As(err, &hu) && smiWhy == "":
			switched = hu.Reason
		case errors.Is(err, probe.ErrProcsBogus) && smiWhy == "":
			switched = "NVML's process records are bogus"
		case errors.Is(err, probe.ErrHelperMissing) && !pushed:
			pushed, again = true, true
		case errors.As(err, &rej) && frames == 0:
			// the probe below learns the fields this nvidia-smi knows
		case !failing:
			failing = true
			s.log(true, hostFirst(name, err.Error())+"; each pass probes the host until it streams again")
		}
		if switched != "" {
			smiWhy, smiUntil, again = switched, f.opt.Now().Add(helperRetry), true
		}
		if switched != "" && switched != told {
			told = switched
			s.log(false, fmt.Sprintf("%s: the GPU stream runs nvidia-smi for %s, the helper cannot: %s", name, units.FormatDuration(helperRetry), switched))
		}
		if frames == 0 && hu == nil {
			f.probeOne(ctx, h, ProbeOptions{}) // pushes the helper, learns nvidia-smi's fields, finds the host down
		}
		if again {
			continue
		}
		if f.opt.Now().Sub(began) >= 2*s.every {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, watchBackoff), watchBackoffMax)
		}
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

// hostFirst is text after "host: ", unless it starts so already.
func hostFirst(host, text string) string {
	if strings.HasPrefix(text, host+": ") {
		return text
	}
	return host + ": " + text
}

// streamer is how host h streams: the helper, or nvidia-smi with why.
func (f *Fleet) streamer(h inventory.Host, why string) probe.Streamer {
	run := f.Runner(h)
	if f.helper != nil && why == "" {
		return probe.HelperStream(run, h.Name, f.helper, f.memo, h.Local)
	}
	if f.helper == nil {
		why = f.noHelperWhy
	}
	return probe.SMIStream(run, h.Name, f.fields, why)
}

// hungFor is how long a watched host's hung probe stands for the host
// while its stream prints nothing (ProbeOptions.MaxAge): a probe is tried
// again after it.
const hungFor = time.Minute

// probeHung remembers r, the report of a probe that hung on a watched
// host, for hungProbe.
func (f *Fleet) probeHung(r Report) {
	f.mu.RLock()
	s := f.streams
	f.mu.RUnlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.latest[r.Host.Name]; !ok && s.running[r.Host.Name] != nil {
		s.hung[r.Host.Name] = r
	}
}

// hungProbe is the report of host name's last probe, when it hung at
// most hungFor ago and no stream frame came since.
func (f *Fleet) hungProbe(name string) (Report, bool) {
	f.mu.RLock()
	s := f.streams
	f.mu.RUnlock()
	if s == nil {
		return Report{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.hung[name]
	if !ok || f.opt.Now().Sub(r.At) > hungFor {
		return Report{}, false
	}
	return r, true
}

// Streamed is host name's latest GPU-stream frame and when it came, when
// one came at most maxAge ago and its stream still runs.
func (f *Fleet) Streamed(name string, maxAge time.Duration) (probe.Snapshot, time.Time, bool) {
	fr, ok := f.streamed(name, maxAge)
	return fr.snap, fr.at, ok
}

// streamed is Streamed as a frame.
func (f *Fleet) streamed(name string, maxAge time.Duration) (frame, bool) {
	f.mu.RLock()
	s := f.streams
	f.mu.RUnlock()
	if s == nil || maxAge <= 0 {
		return frame{}, false
	}
	s.mu.Lock()
	fr, ok := s.latest[name]
	s.mu.Unlock()
	if !ok || f.opt.Now().Sub(fr.at) > maxAge {
		return frame{}, false
	}
	// Each caller gets lists of its own (the GPUs' values are shared,
	// and never written).
	fr.snap.Warnings = slices.Clone(fr.snap.Warnings)
	fr.snap.GPUs = slices.Clone(fr.snap.GPUs)
	return fr, true
}
