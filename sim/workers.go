package sim

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/job"
)

// workers are the simulated worker side (control.Workers): a job started
// runs for its trace duration on the virtual clock, then ends with exit
// status 0; stopped, it ends at once. A launch always succeeds. Poll
// reports only what a pass must act on — jobs that ended, and jobs past
// their walltime (still running: the pass stops them) — and leaves out
// the jobs that run on as they were, as control.Workers allows.
type workers struct {
	mu       sync.Mutex
	now      func() time.Time
	duration map[job.ID]time.Duration // what each job runs
	// defaultTimeout is the policy's: the walltime of a job without one.
	defaultTimeout time.Duration
	running        []*runState // by id − 1 (ids are dense); nil: not running
	// due are the running jobs by when a pass must see them (their end,
	// or past their walltime), earliest first; one that ended before
	// stays until it comes first (nextEnd).
	due dueHeap
}

// dueAt is a running job and when a pass must see it.
type dueAt struct {
	at time.Time
	id job.ID
	r  *runState // the run it is of: the job may run again
}

// dueHeap is a min-heap of dueAt by at (container/heap).
type dueHeap []dueAt

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueAt)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type runState struct {
	started time.Time
	ends    time.Time // its run time is over
	// overdue is when a pass finds it past its walltime (just after it:
	// a pass stops a job that ran longer than its walltime); zero when it
	// ends first or has none.
	overdue time.Time
}

func newWorkers(now func() time.Time, defaultTimeout time.Duration) *workers {
	return &workers{now: now, duration: map[job.ID]time.Duration{}, defaultTimeout: defaultTimeout}
}

// Start implements control.Workers.
func (w *workers) Start(_ context.Context, j job.Job) (job.Remote, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.duration[j.ID]
	if !ok {
		return job.Remote{}, fmt.Errorf("job %d: no duration known to the simulator", j.ID)
	}
	now := w.now()
	r := &runState{started: now, ends: now.Add(d)}
	if wt := cmp.Or(j.Spec.Timeout, w.defaultTimeout); wt > 0 && wt < d {
		r.overdue = now.Add(wt + time.Nanosecond)
	}
	if n := int(j.ID); n > len(w.running) {
		w.running = slices.Grow(w.running, n-len(w.running))[:n]
	}
	w.running[j.ID-1] = r
	heap.Push(&w.due, dueAt{at: cmp.Or(r.overdue, r.ends), id: j.ID, r: r})
	return job.Remote{PID: int(j.ID), Dir: fmt.Sprintf("sim/%d.%d", j.ID, j.Attempt)}, nil
}

// Abandon implements control.Workers: a simulated launch is never left
// half done, so there is nothing to abandon.
func (w *workers) Abandon(context.Context, job.Job) (bool, error) { return false, nil }

// Poll implements control.Workers.
func (w *workers) Poll(_ context.Context, _ string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var out map[job.ID]job.Status // most polls report nothing: no map
	report := func(id job.ID, st job.Status) {
		if out == nil {
			out = map[job.ID]job.Status{}
		}
		out[id] = st
	}
	for _, j := range jobs {
		r := w.run(j.ID)
		switch {
		case r == nil:
			report(j.ID, job.Status{State: job.Lost, Missing: true, Reason: "not started by the simulator"})
		case !now.Before(r.ends):
			code := 0
			report(j.ID, job.Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0", Runtime: r.ends.Sub(r.started)})
			w.end(j.ID)
		case !r.overdue.IsZero() && !now.Before(r.overdue):
			report(j.ID, job.Status{State: job.Running, PID: int(j.ID)}) // past its walltime: the pass stops it
		}
	}
	return out, nil
}

// run is job id's run, nil when it does not run.
func (w *workers) run(id job.ID) *runState {
	if id < 1 || int(id) > len(w.running) {
		return nil
	}
	return w.running[id-1]
}

func (w *workers) end(id job.ID) {
	if w.run(id) != nil {
		w.running[id-1] = nil
	}
}

// Stop implements control.Workers: the job ends now (the pass that
// stopped it records how).
func (w *workers) Stop(_ context.Context, j job.Job, _ time.Duration, _ job.State) (job.Stopped, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run(j.ID) != nil {
		w.end(j.ID)
		return job.Stopped{Signalled: 1}, nil
	}
	return job.Stopped{}, nil
}

// nextEnd is the earliest end of a running job (or the instant it is
// past its walltime), and whether one runs.
func (w *workers) nextEnd() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.due) > 0 && w.run(w.due[0].id) != w.due[0].r {
		heap.Pop(&w.due) // it ended
	}
	if len(w.due) == 0 {
		return time.Time{}, false
	}
	return w.due[0].at, true
}
