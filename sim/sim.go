// Package sim replays a workload through gssh's own scheduling pass
// (control.Controller, and through it sched.Plan) on a virtual clock, with
// simulated workers and an in-memory queue: no SSH, no sleeping, no copy
// of any scheduling code. All arrivals and ends at one instant are applied
// before one pass runs, as a pass that finds them would.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// Epoch is the virtual time a run starts at (its first arrival).
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Job is one job to replay.
type Job struct {
	Name     string
	Submit   time.Duration // after the run's start
	User     string
	GPUs     int    // on one host
	Mem      uint64 // bytes per GPU (--mem); 0 = the GPUs exclusively
	Priority int    // 0 first ... 10
	Runtime  time.Duration
	Walltime time.Duration // its --timeout; 0 = none
}

// Config is one run.
type Config struct {
	Hosts  []sched.Host
	Jobs   []Job // in any order
	Policy sched.Policy
	// Progress, when set, is called after each pass with the number of
	// jobs it settled: ended, or found never placeable on arrival. A run
	// settles every job but those left waiting when nothing else can
	// happen. Called on the run's goroutine.
	Progress func(settled int)
}

// Outcome is what became of one job.
type Outcome struct {
	Job        int           // index in Config.Jobs
	Placeable  bool          // some host of the lab can take it at all (sched.Validate)
	Started    bool          // it ran
	Start, End time.Duration // after the run's start, when Started
	Host       string
	Share      float64 // whole GPUs it counted for
}

// Sample is the lab between two passes (from After until the next
// sample).
type Sample struct {
	After  time.Duration
	Queued int     // jobs waiting
	Booked float64 // GPUs booked: whole GPUs, and the booked part of shared ones
	// Whole: a job that needs whole GPUs waits; Partial: GPUs partly
	// booked by shared jobs (fragmentation when Whole).
	Whole   bool
	Partial int
}

// Result is a run's outcome.
type Result struct {
	Jobs     []Outcome // by Config.Jobs index
	Samples  []Sample
	Passes   int
	Makespan time.Duration // to the last end
}

// queue is the job queue a run goes through: the pass's control.Store,
// and the submit the trace's arrivals go through.
type queue interface {
	control.Store
	Submit(job.Job) (job.Job, error)
}

// Run replays cfg. The error is a pass's that stopped the run.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	st := newStore(len(cfg.Jobs))
	return run(ctx, cfg, st, st, st, nil)
}

// run replays cfg through st (a test runs it over state.Mem, whose
// semantics are the state file's, to show the simulator's store decides
// nothing differently), with what changed in st from changes, st's
// fair-share usage from usage and its housekeeping by keeper, when not
// nil (control.Options.Changes, Usage, Keeper).
func run(ctx context.Context, cfg Config, st queue, changes control.ChangeFeed, usage control.UsageStore, keeper control.Keeper) (*Result, error) {
	order := make([]int, len(cfg.Jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cfg.Jobs[a].Submit, cfg.Jobs[b].Submit) })

	now := epoch
	clock := func() time.Time { return now }
	w := newWorkers(clock, cfg.Policy.DefaultTimeout)
	hosts := slices.Clone(cfg.Hosts)
	sched.Prepare(hosts) // the lab never changes: its GPUs are listed once
	ctl, err := control.New(control.Options{Store: st, Snapshots: staticHosts(hosts), Workers: w, Now: clock, Policy: cfg.Policy,
		Terse: true, PollSerially: true, Changes: changes, Usage: usage, Keeper: keeper})
	if err != nil {
		return nil, err
	}
	res := &Result{Jobs: make([]Outcome, len(cfg.Jobs))}
	byID := map[job.ID]int{}
	type shape struct {
		gpus int
		mem  uint64
	}
	placeable := map[shape]bool{}
	for i := range cfg.Jobs {
		res.Jobs[i].Job = i
	}
	next := 0 // in order
	for {
		settled := 0
		// Arrivals due now.
		for ; next < len(order) && !epoch.Add(cfg.Jobs[order[next]].Submit).After(now); next++ {
			i := order[next]
			j := cfg.Jobs[i]
			req := sched.Request{Host: "auto", GPUs: j.GPUs, MemPerGPU: j.Mem}
			ok, seen := placeable[shape{j.GPUs, j.Mem}]
			if !seen {
				ok = sched.Validate(cfg.Hosts, req) == nil
				placeable[shape{j.GPUs, j.Mem}] = ok
			}
			res.Jobs[i].Placeable = ok
			if !ok {
				settled++
				continue // reported, never queued
			}
			q, err := st.Submit(job.Job{User: j.User, SubmittedAt: now, Spec: job.Spec{Name: j.Name, Argv: []string{"sim"}, Host: "auto", Workdir: "~",
				GPUs: j.GPUs, MemPerGPU: j.Mem, Priority: j.Priority, Timeout: j.Walltime}})
			if err != nil {
				return res, fmt.Errorf("submit job %d (%s): %w", i, j.Name, err)
			}
			byID[q.ID] = i
			w.duration[q.ID] = j.Runtime
		}
		pass, err := ctl.Pass(ctx)
		if err != nil {
			return res, fmt.Errorf("pass at %s: %w", now.Sub(epoch), err)
		}
		res.Passes++
		for _, j := range pass.Started {
			o := &res.Jobs[byID[j.ID]]
			o.Started, o.Start, o.Host, o.Share = true, now.Sub(epoch), j.Placement.Host, j.Placement.Share
		}
		for _, j := range pass.Finished {
			o := &res.Jobs[byID[j.ID]]
			o.End = j.EndedAt.Sub(epoch)
			res.Makespan = max(res.Makespan, o.End)
		}
		if cfg.Progress != nil {
			cfg.Progress(settled + len(pass.Finished))
		}
		smp, err := sampleOf(st, now.Sub(epoch))
		if err != nil {
			return res, err
		}
		res.Samples = append(res.Samples, smp)
		// The next instant something happens.
		var at time.Time
		if next < len(order) {
			at = epoch.Add(cfg.Jobs[order[next]].Submit)
		}
		if e, ok := w.nextEnd(); ok && (at.IsZero() || e.Before(at)) {
			at = e
		}
		if at.IsZero() {
			break // nothing runs and nothing comes: what waits never starts
		}
		now = at
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// staticHosts are the lab's hosts, the same at every pass: a simulated
// lab has no other users' processes, so what gssh books is all that
// changes, and the pass books from its own ledger.
type staticHosts []sched.Host

func (h staticHosts) Hosts(context.Context) ([]sched.Host, error) { return h, nil }

// sampleOf is the lab as st's active jobs show it now: from what each
// adds to a sample, kept as it was written, where st is the simulator's
// store, else from a copy of them.
func sampleOf(st queue, at time.Duration) (Sample, error) {
	if s, ok := st.(*store); ok {
		return s.sample(at), nil
	}
	active, err := st.Active()
	if err != nil {
		return Sample{}, err
	}
	var sm sampler
	for i := range active {
		x := sampledOf(&active[i])
		sm.add(&x)
	}
	return sm.sample(at), nil
}

// sampled is what one active job adds to a Sample.
type sampled struct {
	queued bool
	whole  bool     // queued, it needs whole GPUs
	booked bool     // it holds GPUs, share of them (job.Use)
	share  float64  // whole GPUs
	shared []string // the GPUs it holds shared (--mem), by UUID
}

// sampledOf is what active job j adds to a sample.
func sampledOf(j *job.Job) sampled {
	var x sampled
	switch {
	case j.State == job.Queued:
		x.queued, x.whole = true, j.Spec.MemPerGPU == 0
	case j.State.Active():
		if u, ok := j.Use(); ok {
			x.booked, x.share = true, u.Share
		}
		if j.Spec.MemPerGPU > 0 {
			x.shared = j.Placement.GPUs // sim GPU UUIDs name their host
		}
	}
	return x
}

// sampler adds up what the active jobs add to a sample, in id order.
type sampler struct {
	s       Sample
	partial map[string]bool // GPUs partly booked by shared jobs; cleared by sample
}

func (sm *sampler) add(x *sampled) {
	switch {
	case x.queued:
		sm.s.Queued++
		sm.s.Whole = sm.s.Whole || x.whole
	case x.booked:
		sm.s.Booked += x.share
	}
	if len(x.shared) > 0 && sm.partial == nil {
		sm.partial = map[string]bool{}
	}
	for _, g := range x.shared {
		sm.partial[g] = true
	}
}

// sample is the sum at at, and starts the next one.
func (sm *sampler) sample(at time.Duration) Sample {
	s := sm.s
	s.After, s.Partial = at, len(sm.partial)
	sm.s = Sample{}
	clear(sm.partial)
	return s
}
