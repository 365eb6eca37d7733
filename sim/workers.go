package sim

import (
	"cmp"
	"context"
	"fmt"
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
	running        map[job.ID]*runState
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
	return &workers{now: now, duration: map[job.ID]time.Duration{}, defaultTimeout: defaultTimeout, running: map[job.ID]*runState{}}
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
	w.running[j.ID] = r
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
		r, ok := w.running[j.ID]
		switch {
		case !ok:
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

func (w *workers) end(id job.ID) { delete(w.running, id) }

// Stop implements control.Workers: the job ends now (the pass that
// stopped it records how).
func (w *workers) Stop(_ context.Context, j job.Job, _ time.Duration, _ job.State) (job.Stopped, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[j.ID]; ok {
		w.end(j.ID)
		return job.Stopped{Signalled: 1}, nil
	}
	return job.Stopped{}, nil
}

// nextEnd is the earliest end of a running job, and whether one runs.
func (w *workers) nextEnd() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for _, r := range w.running {
		e := r.ends
		if !r.overdue.IsZero() {
			e = r.overdue
		}
		if next.IsZero() || e.Before(next) {
			next = e
		}
	}
	return next, !next.IsZero()
}
