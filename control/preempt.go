package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
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
		c.emit(eventlog.JobPreempt, u)
		stopped, err := c.workers.Stop(ctx, u, 0, job.Preempting)
		switch {
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %d: signal its preemption (SIGKILL follows after its %s grace): %w", p.Job, u.Spec.Grace(), err))
		case stopped.Ended != nil:
			// It had ended on its own (or at its walltime) before the
			// signal: that end stands, and nothing runs it again.
			c.endedFirst(u, *stopped.Ended, stopped.Signalled, res)
		}
	}
}

// endedFirst records the end of job j that ended on its own (or was
// stopped at its walltime by its worker) before a stop could: preempting,
// before its preemption signal, rather than requeueing it (a job that
// finished is never run again); a later attempt, before the result of an
// earlier one was found (recoverStray). A job no longer in j's state and
// attempt is left as it is.
func (c *Controller) endedFirst(j job.Job, st job.Status, leftovers int, res *Result) (job.Job, bool) {
	now := c.now()
	u, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State != j.State || x.Attempt != j.Attempt {
			return errSkip // cancelled or requeued meanwhile
		}
		x.Preempt = nil
		c.recordEnd(x, j, st, leftovers, now)
		return nil
	})
	if err != nil {
		if !errors.Is(err, errSkip) {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record how it ended before its preemption: %w", j.Ref(), err))
		}
		return j, false
	}
	res.Finished = append(res.Finished, u)
	c.emit(eventlog.JobEnd, u)
	return u, true
}

// preempted records what the worker says of preempting job j: while its
// processes run (the job checkpoints), nothing until its grace
// (Spec.Grace) since the SIGTERM is over, then SIGKILL; once they are gone
// the job goes back to the queue under its id, its run recorded in Runs
// for fair-share and Restarts counted (its next attempt gets
// GSSH_RESTART_COUNT). However the worker says it ended once signalled
// (stopped, lost), a preempted job is requeued, never recorded ended;
// one whose exit status shows it ended on its own before the signal (no
// stop mark: see launch's end gate) is recorded as it ended.
func (c *Controller) preempted(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	if st.State == job.Succeeded || st.State == job.Failed {
		// An exit status and no stop mark: its command ended on its own
		// before the preemption's signal could mark it.
		n := 0
		if st.Orphans > 0 {
			stopped, err := c.workers.Stop(ctx, j, c.orphan, "")
			if err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("job %s: end its leftover processes: %w", j.Ref(), err))
				return j, false
			}
			n = stopped.Signalled
		}
		return c.endedFirst(j, st, n, res)
	}
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
			res.Errors = append(res.Errors, fmt.Errorf("job %s: kill it after its %s preemption grace: %w", j.Ref(), grace, err))
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
		requeue(x, now, true, why+"; requeued", string(sched.CodePreempted), job.Status{State: job.Cancelled}, job.AttemptPreempted) // its GPUs were booked until now
		return nil
	})
	if err != nil {
		if !errors.Is(err, errSkip) {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: requeue it after its preemption: %w", j.Ref(), err))
		}
		return j, false
	}
	res.Requeued = append(res.Requeued, u)
	c.emit(eventlog.JobRequeue, u)
	return u, true
}
