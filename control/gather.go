package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// The planner's input (sched.Input) for a pass, a dry run or an
// explanation: the queued and running jobs (input), the ended jobs the
// queued ones depend on (deps), and fair-share usage (Usage).

// input is the planner's input for active (the hosts aside): the queued
// jobs, the ones holding GPUs, the policy and now. Pass and DryRun plan
// alike through it. The queued jobs are moved to the front of active, in
// their order (the store's: by id), and in.Queue is that part of it: a
// queue of thousands is not copied again; active is the caller's no
// more.
func (c *Controller) input(active []job.Job) sched.Input {
	in := sched.Input{Now: c.now(), Policy: c.policy, Cluster: c.cluster, Terse: c.terse, Rebalance: c.rebal}
	queued := partition(active, func(j *job.Job) bool { return j.State == job.Queued })
	running := queued + partition(active[queued:], func(j *job.Job) bool { return j.State.Active() })
	in.Queue, in.Running = active[:queued:queued], active[queued:running:running]
	return in
}

// inputOf is the planner's input for a pass (the hosts aside): queued,
// the jobs of running that hold GPUs, the policy and now. The slices are
// the caller's still: the planner only reads them.
func (c *Controller) inputOf(queued, running []job.Job) sched.Input {
	in := sched.Input{Now: c.now(), Policy: c.policy, Cluster: c.cluster, Terse: c.terse, Rebalance: c.rebal}
	in.Queue = queued[:len(queued):len(queued)]
	if !allHold(running) {
		sc := &c.scratch
		clear(sc.held)
		sc.held = sc.held[:0]
		for i := range running {
			if running[i].State.Active() {
				sc.held = append(sc.held, running[i])
			}
		}
		running = sc.held
	}
	in.Running = running[:len(running):len(running)]
	return in
}

// allHold reports whether every job of running holds GPUs (State.Active).
func allHold(running []job.Job) bool {
	for i := range running {
		if !running[i].State.Active() {
			return false
		}
	}
	return true
}

// partition moves the jobs keep accepts to the front of js, in their
// order, and returns how many there are; the others are left after them,
// in no order. Each kept job is written at or before where it was read,
// so nothing is copied but by swaps.
func partition(js []job.Job, keep func(*job.Job) bool) int {
	n := 0
	for i := range js {
		if keep(&js[i]) {
			if i != n {
				js[n], js[i] = js[i], js[n]
			}
			n++
		}
	}
	return n
}

// deps fills in.Deps with the ended jobs in.Queue depends on, read from
// the store. A dependency the store does not hold is left out (the plan
// cancels its dependents); one it cannot read is given as "unreadable"
// (not ended: its dependents wait) and reported.
func (c *Controller) deps(in *sched.Input) error {
	waits := false
	for i := range in.Queue {
		waits = waits || len(in.Queue[i].Spec.After) > 0
	}
	if !waits {
		return nil // most queues: nothing to read
	}
	// Every job some queued one waits for, once: a whole array named by
	// many dependents is listed once, its tasks not materialized per
	// dependent.
	var need []job.ID
	of := map[job.ID]job.ID{} // dependency → a job waiting for it (for errors)
	arrays := map[job.Dependency]bool{}
	add := func(dep, waiter job.ID) {
		if _, ok := of[dep]; !ok {
			of[dep] = waiter
			need = append(need, dep)
		}
	}
	for i := range in.Queue {
		j := &in.Queue[i] // in place: a queue of thousands is not copied
		for _, d := range j.Spec.After {
			if d.Tasks == 0 {
				add(d.Job, j.ID)
				continue
			}
			if key := (job.Dependency{Job: d.Job, Tasks: d.Tasks}); !arrays[key] {
				arrays[key] = true
				for k := range d.Tasks {
					add(d.Job+job.ID(k), j.ID)
				}
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	known := make(map[job.ID]bool, len(in.Queue)+len(in.Running)) // queued or running: in the plan already
	for _, q := range in.Queue {
		known[q.ID] = true
	}
	for _, r := range in.Running {
		known[r.ID] = true
	}
	var errs []error
	for _, id := range need {
		if _, ok := in.Deps[id]; ok || known[id] {
			continue
		}
		dep, err := c.store.Get(id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("job %d: its dependency, job %d: %w", of[id], id, err))
			dep = job.Job{ID: id, State: "unreadable"}
		}
		if in.Deps == nil {
			in.Deps = map[job.ID]job.Job{}
		}
		in.Deps[id] = dep
	}
	return errors.Join(errs...)
}

// Usage is each user's fair-share usage at now (sched.Usage under the
// policy's FairShare), from the uses of the jobs that ended within
// sched.Horizon (the store's ledger, or Options.Usage) and of the active ones (running up to
// now). With an error wrapping state.ErrBadRecord it is the usage of what
// could be read.
func (c *Controller) Usage(active []job.Job, now time.Time) (map[string]float64, error) {
	usage, _, err := c.usageOf(now, nil, func(buf []job.Use) []job.Use { return appendUses(buf, active) })
	return usage, err
}

// usageOf is Usage, the uses of the active jobs appended by held, all
// gathered in buf's room; it returns buf, grown as needed, for the next
// call.
func (c *Controller) usageOf(now time.Time, buf []job.Use, held func([]job.Use) []job.Use) (map[string]float64, []job.Use, error) {
	if c.usage != nil {
		usage, err := c.usage.UsageAt(now, c.policy.FairShare)
		if err != nil && !errors.Is(err, state.ErrBadRecord) {
			return nil, buf, err
		}
		buf = held(buf[:0])
		for user, v := range sched.Usage(buf, now, c.policy.FairShare) {
			usage[user] += v
		}
		return usage, buf, err
	}
	ended, err := c.ended(now)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return nil, buf, err
	}
	buf = held(append(buf[:0], ended...))
	return sched.Usage(buf, now, c.policy.FairShare), buf, err
}

// appendUses appends the GPU uses of jobs to uses (sched.Uses: those that
// never started left out), reading the jobs in place.
func appendUses(uses []job.Use, jobs []job.Job) []job.Use {
	for i := range jobs {
		if u, ok := jobs[i].Use(); ok {
			uses = append(uses, u)
		}
	}
	return uses
}

// UsageStore works the fair-share usage of the store's ended jobs out
// itself, as sched.Usage would from Store.Uses (Options.Usage: the
// simulator's store keeps it up to date as jobs end, so that a simulated
// week of passes does not read its whole ledger every pass). The map
// returned is the caller's.
type UsageStore interface {
	UsageAt(now time.Time, fs sched.FairShare) (map[string]float64, error)
}

// ended are the uses of the jobs that ended within the policy's horizon
// of now, from the store's ledger.
func (c *Controller) ended(now time.Time) ([]job.Use, error) {
	return c.store.Uses(now.Add(-sched.Horizon(c.policy.FairShare)))
}
