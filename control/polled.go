package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// apply records what the worker reported of active job j (st, polled at
// now), one outcome per case, and returns the job as recorded and whether
// its record changed: a preempting job's end or grace (preempted); a
// running one stopped past its walltime or for its gssh run gone; one
// adopted when its host answers again; a launch that did start, or that
// did not and is abandoned; leftover processes killed; a job lost,
// requeued (--requeue) or ended on a failed GPU; any other end.
func (c *Controller) apply(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	switch {
	case j.State == job.Preempting:
		return c.preempted(ctx, j, st, now, res)
	case st.State == job.Running && c.pastWalltime(j, now):
		return c.stopPastWalltime(ctx, j, now, res)
	case st.State == job.Running && c.ownerGone(&j):
		return c.stopOwnerGone(ctx, j, now, res)
	case j.Spec.Interactive != nil && j.State == job.Launching && (st.Missing || st.State == job.Launching) && !c.ownerGone(&j):
		// Its gssh run is attaching it: leave it be.
		return j, false
	case st.State == job.Running && j.State == job.Unknown:
		return c.adopt(j, res)
	case st.State == job.Running && j.State == job.Launching:
		return c.launched(j, st, now, res)
	case j.State == job.Launching && (st.Missing || st.State == job.Launching || st.Abandoned):
		return c.abandonLaunch(ctx, j, st, now, res)
	case st.Orphans > 0:
		return c.endLeftovers(ctx, j, st, now, res)
	case st.State == job.Lost && j.Spec.Requeue:
		return c.recordPoll(j, res, func(x *job.Job) {
			requeue(x, endedAt(j, st, now), true, st.Reason+"; requeued (--requeue)", "requeued", st, job.AttemptLost)
		})
	case j.ReasonCode == codeGPUFailed && (st.State == job.Failed || st.State == job.Lost):
		return c.endOnFailedGPU(j, st, now, res)
	case st.State.Terminal():
		return c.recordPoll(j, res, func(x *job.Job) { c.recordEnd(x, j, st, 0, now) })
	}
	return j, false
}

// recordPoll changes j's record with fn, unless it ended meanwhile (a
// cancel), and reports the change: an end (Result.Finished, job_end) or
// a job back in the queue (job_requeue). It returns the job as recorded
// and whether it changed; a store error is reported.
func (c *Controller) recordPoll(j job.Job, res *Result, fn func(*job.Job)) (job.Job, bool) {
	u, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State.Terminal() {
			return errSkip // ended meanwhile (cancel)
		}
		fn(x)
		return nil
	})
	if err != nil {
		if !errors.Is(err, errSkip) {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
		return j, false
	}
	switch {
	case u.State.Terminal():
		res.Finished = append(res.Finished, u)
		c.emit(eventlog.JobEnd, u)
	case u.State == job.Queued:
		c.emit(eventlog.JobRequeue, u)
	}
	return u, true
}

// stopRunning stops running job j on its worker (SIGTERM, the grace,
// SIGKILL; why is what the worker says of it from then on) and records
// the end stop gives it, or the end it reached on its own just before
// the stop. what names the stop in an error.
func (c *Controller) stopRunning(ctx context.Context, j job.Job, why job.State, what string, now time.Time, res *Result, stop func(*job.Job)) (job.Job, bool) {
	stopped, err := c.workers.Stop(ctx, j, c.grace, why)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("job %s: %s: %w", j.Ref(), what, err))
		return j, false
	}
	return c.recordPoll(j, res, func(x *job.Job) {
		if stopped.Ended != nil { // it ended on its own just before
			c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
			return
		}
		stop(x)
	})
}

// stopPastWalltime stops j, which runs past its walltime: timeout.
func (c *Controller) stopPastWalltime(ctx context.Context, j job.Job, now time.Time, res *Result) (job.Job, bool) {
	return c.stopRunning(ctx, j, job.Timeout, "walltime", now, res, func(x *job.Job) {
		x.State, x.EndedAt, x.Reason = job.Timeout, now, c.timeoutReason(j)
	})
}

// stopOwnerGone stops interactive job j, whose gssh run is gone (killed,
// its terminal closed) while the keeper did not stop it (the connection
// is still up, or the keeper was killed too): nobody is at it any more.
func (c *Controller) stopOwnerGone(ctx context.Context, j job.Job, now time.Time, res *Result) (job.Job, bool) {
	return c.stopRunning(ctx, j, job.Cancelled, "its gssh run is gone", now, res, func(x *job.Job) {
		x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
		x.Reason = "its gssh run went away; its processes were stopped"
	})
}

// adopt records unknown job j running again: its host answers again and
// the job still runs, as it was (its GPUs stayed booked).
func (c *Controller) adopt(j job.Job, res *Result) (job.Job, bool) {
	u, ok := c.recordPoll(j, res, func(x *job.Job) { x.State, x.Reason, x.ReasonCode = job.Running, "", "" })
	if ok {
		c.emit(eventlog.JobAdopted, u)
	}
	return u, ok
}

// launched records launching job j running: a launch whose outcome was
// unknown did start (st says its pid and directory, when the launch did
// not record them).
func (c *Controller) launched(j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	return c.recordPoll(j, res, func(x *job.Job) {
		x.State, x.Reason, x.ReasonCode = job.Running, "", ""
		if x.StartedAt.IsZero() {
			x.StartedAt = now
		}
		if x.Remote.PID == 0 {
			x.Remote.PID, x.Remote.StartTicks = st.PID, st.StartTicks
		}
		if x.Remote.Dir == "" {
			x.Remote.Dir = st.Dir
		}
	})
}

// abandonLaunch settles launching job j whose launch did not finish (it
// never reached the worker, or run.sh has not recorded its pid): the
// attempt is abandoned, atomically against run.sh's own start, so that a
// launch merely slow can never start after the job is queued again. An
// abandoned attempt puts the job back in the queue (cancelled, for an
// interactive job whose gssh run is gone: nobody waits for it to start);
// one that started is left for the next poll.
func (c *Controller) abandonLaunch(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	abandoned, err := st.Abandoned, error(nil)
	if !abandoned {
		abandoned, err = c.workers.Abandon(ctx, j)
	}
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("job %s: abandon an unfinished launch: %w", j.Ref(), err))
		return j, false
	}
	if !abandoned {
		return j, false // run.sh started: the next poll sees its pid
	}
	why := fmt.Sprintf("attempt %d did not start on %s and was abandoned", j.Attempt, j.Placement.Host)
	if st.Abandoned && st.Reason != "" {
		why = fmt.Sprintf("attempt %d on %s: %s", j.Attempt, j.Placement.Host, st.Reason)
	}
	if c.ownerGone(&j) {
		// Nobody waits for it to start again.
		return c.recordPoll(j, res, func(x *job.Job) {
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, ownerGoneReason+" ("+why+")", ""
		})
	}
	return c.recordPoll(j, res, func(x *job.Job) {
		x.EndAttempt(now, job.Status{}, job.AttemptAbandoned, why)
		x.State, x.Placement, x.Remote = job.Queued, job.Placement{}, job.Remote{}
		x.Reason, x.ReasonCode = why+"; queued again", "requeued"
	})
}

// endLeftovers ends the processes job j left running with its GPUs when
// it ended (or its leader died without an exit status), before the GPUs
// are offered again, as Slurm does when a batch script ends; then
// records its end, or requeues a lost job that asked for it (--requeue).
func (c *Controller) endLeftovers(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	stopped, err := c.workers.Stop(ctx, j, c.orphan, "")
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("job %s: end its leftover processes: %w", j.Ref(), err))
		return j, false
	}
	n := stopped.Signalled
	if (st.State == job.Lost || !st.State.Terminal()) && j.Spec.Requeue {
		return c.recordPoll(j, res, func(x *job.Job) {
			requeue(x, endedAt(j, st, now), true, fmt.Sprintf("%s; its %d leftover processes were killed; requeued (--requeue)", st.Reason, n), "requeued", st, job.AttemptLost)
		})
	}
	return c.recordPoll(j, res, func(x *job.Job) { c.recordEnd(x, j, st, n, now) })
}

// endOnFailedGPU records the end of job j, whose GPU failed under it
// (failed or lost): the reason says so, and with --requeue it goes back
// to the queue (its processes are gone: this is their end).
func (c *Controller) endOnFailedGPU(j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	why := st.Reason + "; " + j.Reason
	if j.Spec.Requeue {
		return c.recordPoll(j, res, func(x *job.Job) {
			requeue(x, endedAt(j, st, now), true, why+"; requeued (--requeue)", "requeued", st, job.AttemptGPUFailed)
		})
	}
	return c.recordPoll(j, res, func(x *job.Job) {
		x.State, x.EndedAt, x.Reason, x.ReasonCode = st.State, endedAt(j, st, now), why, codeGPUFailed
		x.ExitCode, x.Signal = st.ExitCode, st.Signal
	})
}
