package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// preempt carries out the plan's preemptions: each victim is recorded
// preempting (one transaction: for whom, when, why; its GPUs stay
// booked), then sent SIGTERM on its worker without waiting (Workers.Stop
// with why job.Preempting). A later pass sees it gone and requeues it, or
// kills it once its grace is over (preempted). A victim that is no longer
// the running attempt the plan saw is left alone. A signal that fails
// leaves the job preempting: the pass after its grace kills it.
func (c *Controller) preempt(ctx context.Context, ps []sched.Preempt, running []job.Job, res *Result) {
	for _, p := range ps {
		i := slices.IndexFunc(running, func(j job.Job) bool { return j.ID == p.Job })
		if i < 0 || ctx.Err() != nil {
			continue
		}
		seen := running[i]
		now := c.now()
		u, err := c.store.Update(p.Job, func(x *job.Job) error {
			if x.State != job.Running || x.Attempt != seen.Attempt {
				return errSkip // ended, cancelled or requeued meanwhile
			}
			x.State, x.Reason, x.ReasonCode = job.Preempting, p.Reason.Text, string(p.Reason.Code)
			x.Preempt = &job.Preemption{For: p.For, At: now, Reason: p.Reason.Text}
			return nil
		})
		switch {
		case errors.Is(err, errSkip):
			continue
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %d: record its preemption: %w", p.Job, err))
			continue
		}
		res.Preempted = append(res.Preempted, u)
		c.emit(JobPreempt, u)
		if _, err := c.workers.Stop(ctx, u, 0, job.Preempting); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %d: signal its preemption (SIGKILL follows after its %s grace): %w", p.Job, u.Spec.Grace(), err))
		}
	}
}

// preempted records what the worker says of preempting job j: while its
// processes run (the job checkpoints), nothing until its grace
// (Spec.Grace) since the SIGTERM is over, then SIGKILL; once they are gone
// the job goes back to the queue under its id, its run recorded in Runs
// for fair-share and Restarts counted (its next attempt gets
// GSSH_RESTART_COUNT). However the worker says it ended (an exit status,
// stopped, lost), a preempted job is requeued, never recorded ended.
func (c *Controller) preempted(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	alive := st.State == job.Running || st.State == job.Launching || st.Orphans > 0
	grace := j.Spec.Grace()
	var since time.Time
	if j.Preempt != nil {
		since = j.Preempt.At
	}
	killed := false
	if alive {
		if now.Sub(since) < grace {
			return j, false // its grace runs: the next pass looks again
		}
		if _, err := c.workers.Stop(ctx, j, 0, ""); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %d: kill it after its %s preemption grace: %w", j.ID, grace, err))
			return j, false
		}
		killed = true
	}
	u, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State != job.Preempting || x.Attempt != j.Attempt {
			return errSkip // cancelled or requeued meanwhile
		}
		why := "preempted"
		if x.Preempt != nil {
			why = x.Preempt.Reason
		}
		if killed {
			why += fmt.Sprintf("; killed after its %s grace", grace)
		}
		x.Reason, x.ReasonCode = why+"; requeued", string(sched.CodePreempted)
		if use, ok := x.Use(); ok {
			use.Ended = now // its GPUs were booked until now
			x.Runs = append(x.Runs, use)
		}
		x.Restarts++
		x.State, x.Preempt = job.Queued, nil
		x.Placement, x.Remote, x.StartedAt, x.ExitCode, x.Signal = job.Placement{}, job.Remote{}, time.Time{}, nil, ""
		return nil
	})
	if err != nil {
		if !errors.Is(err, errSkip) {
			res.Errors = append(res.Errors, fmt.Errorf("job %d: requeue it after its preemption: %w", j.ID, err))
		}
		return j, false
	}
	res.Requeued = append(res.Requeued, u)
	c.emit(JobRequeued, u)
	return u, true
}

// Preempts plans the queue as a rebalancing pass would now (sched.Input
// .Rebalance set, whatever the policy says) and returns the preemptions
// it would make, with the plan's other decisions: gssh schedule
// --rebalance --dry-run. Like DryRun it polls no worker (the jobs are as
// the last pass recorded them) and writes nothing.
func (c *Controller) Preempts(ctx context.Context) (sched.Decisions, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return sched.Decisions{}, err
	}
	in := c.input(active)
	in.Rebalance = true
	if len(in.Queue) == 0 {
		return sched.Decisions{Starts: []sched.Start{}, Pending: []sched.Pending{}}, nil
	}
	if err := c.deps(&in); err != nil {
		return sched.Decisions{}, err
	}
	if in.Usage, err = c.Usage(in.Running, in.Now); err != nil && !errors.Is(err, state.ErrBadRecord) {
		return sched.Decisions{}, fmt.Errorf("fair-share usage: %w", err)
	}
	if in.Hosts, err = c.snaps.Hosts(ctx); err != nil {
		return sched.Decisions{}, fmt.Errorf("host snapshots: %w", err)
	}
	return sched.Plan(in), nil
}
