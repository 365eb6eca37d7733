package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// ErrNotQueued means a job asked to be held is not queued (launching,
// running or ended).
var ErrNotQueued = errors.New("is not queued")

// ErrNotHeld means a job asked to be released is not held.
var ErrNotHeld = errors.New("is not held")

// Hold keeps queued job id from being placed until Release, recording
// who held it and when. A job held already keeps its first hold. A job
// that is not queued is an error wrapping ErrNotQueued (what to do
// instead is in its words); a missing one, the store's not-found error.
func (c *Controller) Hold(id job.ID, who string) (job.Job, error) {
	now := c.now()
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotQueued, x.State)
		case x.State != job.Queued:
			return fmt.Errorf("job %s %w: it is %s (a hold keeps a queued job from starting; gssh cancel stops a running one)", x.Ref(), ErrNotQueued, x.State)
		case x.Hold == nil:
			x.Hold = &job.Hold{By: who, At: now}
			r := sched.HeldReason(x) // at once, not at the next pass
			x.Reason, x.ReasonCode = r.Text, string(r.Code)
		}
		return nil
	})
}

// Release takes the hold off queued job id; its dependencies and --begin
// still apply. A job not held is an error wrapping ErrNotHeld.
func (c *Controller) Release(id job.ID) (job.Job, error) {
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotHeld, x.State)
		case x.Hold == nil && x.State == job.Queued:
			return fmt.Errorf("job %s %w (gssh hold %s holds it)", x.Ref(), ErrNotHeld, x.Ref())
		case x.Hold == nil:
			return fmt.Errorf("job %s %w (it is %s)", x.Ref(), ErrNotHeld, x.State)
		}
		x.Hold = nil
		x.Reason, x.ReasonCode = "released; waiting for the next scheduling pass", ""
		return nil
	})
}

// Update changes queued job id's spec with fn (scontrol update): its
// priority, walltime, GPU memory, name. fn's error leaves the job as it
// was; a job not queued is an error wrapping ErrNotQueued.
func (c *Controller) Update(id job.ID, fn func(*job.Spec) error) (job.Job, error) {
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotQueued, x.State)
		case x.State != job.Queued:
			return fmt.Errorf("job %s %w: it is %s (update changes queued jobs only)", x.Ref(), ErrNotQueued, x.State)
		}
		return fn(&x.Spec)
	})
}

// ErrNotRunning means a job asked to be requeued is neither launching
// nor running.
var ErrNotRunning = errors.New("is not running")

// Requeue stops job id on its worker (as Cancel does: SIGTERM, grace,
// SIGKILL) and puts it back in the queue under its id, its place in the
// queue kept (ids order it), recording the run it ended in Runs so that
// fair-share counts it; the next start is a new attempt. A launching job
// whose launch is abandoned never ran: it is queued again with no run. A
// job neither launching nor running is an error wrapping ErrNotRunning;
// one that ended meanwhile keeps how it ended.
func (c *Controller) Requeue(ctx context.Context, id job.ID, grace time.Duration, who string) (job.Job, error) {
	return c.untilSettled(id, "changed state ten times while being requeued", func(j job.Job) (job.Job, bool, error) {
		return c.requeueOnce(ctx, j, grace, who)
	})
}

// requeueOnce is one try of Requeue on j as the store had it; moved says
// a pass changed the job meanwhile: nothing was recorded, Requeue looks
// again.
func (c *Controller) requeueOnce(ctx context.Context, j job.Job, grace time.Duration, who string) (u job.Job, moved bool, err error) {
	if !j.State.Active() {
		return j, false, fmt.Errorf("job %s %w (it is %s; requeue takes launching and running jobs)", j.Ref(), ErrNotRunning, j.State)
	}
	if j.Spec.Interactive != nil {
		return j, false, fmt.Errorf("job %s is interactive (gssh run): it cannot go back to the queue; gssh cancel %s ends it", j.Ref(), j.Ref())
	}
	stop, stopped, err := c.stopOnWorker(ctx, j, grace)
	if err != nil {
		return j, false, err
	}
	now := c.now()
	var ended bool
	u, err = c.store.Update(j.ID, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			ended = true
			return errSkip // ended meanwhile: keep how
		case x.State != j.State || x.Attempt != j.Attempt:
			moved = true
			return errSkip
		case stopped.Ended != nil:
			// It had ended on its worker before the requeue: that
			// outcome stands, and nothing runs it again.
			ended = true
			c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
			return nil
		}
		requeue(x, now, stop, fmt.Sprintf("requeued by %s (it ran on %s)", who, placementText(x.Placement)), "requeued", job.Status{State: job.Cancelled}, job.AttemptRequeued)
		return nil
	})
	switch {
	case moved:
		return u, true, nil
	case ended && err == nil:
		c.emit(eventlog.JobEnd, u)
		return u, false, fmt.Errorf("job %s %w before the requeue (%s: %s): it is not queued again", u.Ref(), ErrEnded, u.State, u.Reason)
	case ended:
		got, err := c.store.Get(j.ID)
		if err != nil {
			return j, false, err
		}
		return got, false, fmt.Errorf("job %s %w (it %s meanwhile)", got.Ref(), ErrEnded, got.State)
	case err == nil:
		c.emit(eventlog.JobRequeue, u)
	}
	return u, false, err
}

// untilSettled calls once with job id as the store has it, and again
// while once says the job moved (a pass changed its state or attempt
// between once's read and its write: Cancel and Requeue do not hold the
// pass lock), ten times at most; then the error says what the job kept
// doing. It returns once's answer, or the store's error reading the job.
func (c *Controller) untilSettled(id job.ID, kept string, once func(job.Job) (job.Job, bool, error)) (job.Job, error) {
	for range 10 {
		j, err := c.store.Get(id)
		if err != nil {
			return job.Job{}, err
		}
		if u, moved, err := once(j); !moved {
			return u, err
		}
	}
	return job.Job{}, fmt.Errorf("job %d: it %s; try again", id, kept)
}

// stopOnWorker ends what j runs on its worker (SIGTERM, grace, SIGKILL),
// for Cancel and Requeue: a launching job's launch is resolved first
// (abandoned, it never runs; started, it is stopped like a running one).
// ran reports whether something ran (and was stopped, or had ended on
// its own: then s.Ended says how).
func (c *Controller) stopOnWorker(ctx context.Context, j job.Job, grace time.Duration) (ran bool, s job.Stopped, err error) {
	if c.elsewhere(&j) {
		// Out of this controller's reach: its owner's gssh run sees the
		// record end and stops it (its keeper does when that gssh run is
		// gone).
		return j.State == job.Running, s, nil
	}
	if j.State != job.Queued && j.Placement.Host != "" && !c.inInventory(j.Placement.Host) {
		return false, s, fmt.Errorf("job %s runs on %s, which is not in the inventory any more: gssh cannot reach it; add the host back, or `gssh cancel --force %s` records the job cancelled (its processes may still run there)", j.Ref(), j.Placement.Host, j.Ref())
	}
	stop := j.State == job.Running || j.State == job.Preempting || j.State == job.Unknown
	if j.State == job.Launching {
		abandoned, err := c.workers.Abandon(ctx, j)
		if err != nil {
			return false, s, unreached(j, err)
		}
		stop = !abandoned
	}
	if stop {
		if s, err = c.workers.Stop(ctx, j, grace, job.Cancelled); err != nil {
			return false, s, unreached(j, err)
		}
	}
	return stop, s, nil
}

// unreached is err of a worker call for j, with what to do when its host
// did not answer.
func unreached(j job.Job, err error) error {
	if errors.Is(err, job.ErrNoContact) {
		return fmt.Errorf("job %s: %w; `gssh cancel --force %s` records it cancelled without reaching the host (its processes there are killed when a pass reaches it again)", j.Ref(), err, j.Ref())
	}
	return fmt.Errorf("job %s: %w", j.Ref(), err)
}

// ErrEnded means a job asked to be cancelled has ended already.
var ErrEnded = errors.New("has already ended")

// Cancel stops job id and records it cancelled by who: a queued job at
// once; an active one after its processes got SIGTERM on its worker and,
// after grace, SIGKILL. A job that ended meanwhile keeps how it ended,
// and so does one whose command had ended on its worker before the
// cancel could mark it (no pass had recorded it yet) or that the
// worker's walltime stop had ended: Cancel records that end (its exit
// status, timeout), never a cancel that did not happen; the job returned
// then is not cancelled. An ended job is an error wrapping ErrEnded; a
// missing one, the store's not-found error.
//
// Cancel does not hold the pass lock, so a pass may act on the job
// meanwhile (start an attempt, requeue one). Its record is written only
// if the job is still in the state and attempt Cancel acted on; otherwise
// Cancel looks again and acts on what the job is now. A job cancelled
// while a pass launches it is stopped by that pass (see start).
func (c *Controller) Cancel(ctx context.Context, id job.ID, grace time.Duration, who string) (job.Job, error) {
	return c.untilSettled(id, "kept changing while being cancelled", func(j job.Job) (job.Job, bool, error) {
		return c.cancelOnce(ctx, j, grace, who)
	})
}

// cancelOnce is one try of Cancel on j as the store had it; moved says a
// pass changed the job meanwhile: nothing was recorded, Cancel looks
// again.
func (c *Controller) cancelOnce(ctx context.Context, j job.Job, grace time.Duration, who string) (u job.Job, moved bool, err error) {
	if j.State.Terminal() {
		return j, false, fmt.Errorf("job %s %w (%s)", j.Ref(), ErrEnded, j.State)
	}
	_, stopped, err := c.stopOnWorker(ctx, j, grace)
	if err != nil {
		return j, false, err
	}
	now := c.now()
	var ended bool
	u, err = c.store.Update(j.ID, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			ended = true // ended meanwhile: keep how
		case x.State != j.State || x.Attempt != j.Attempt:
			moved = true // a pass acted on it meanwhile: look again
			return errSkip
		case stopped.Ended != nil:
			c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now) // it had ended before the cancel
		default:
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, "cancelled by "+who, ""
		}
		return nil
	})
	switch {
	case moved:
		return u, true, nil
	case err == nil && !ended:
		c.emit(eventlog.JobEnd, u) // cancelled, or the end it had reached before
	}
	return u, false, err
}

// RequestCancel is Cancel without SSH (shared-lab mode, a member's gssh
// cancel): a queued job is cancelled at once; an active one gets a
// recorded request (job.Job.CancelRequested) that the next pass carries
// out, and recorded is true. One transaction either way. An ended job is
// an error wrapping ErrEnded.
func (c *Controller) RequestCancel(id job.ID, grace time.Duration, who string) (j job.Job, recorded bool, err error) {
	now := c.now()
	u, err := c.store.Update(id, func(x *job.Job) error {
		recorded = false
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w (%s)", x.Ref(), ErrEnded, x.State)
		case x.State == job.Queued:
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, "cancelled by "+who, ""
		case x.CancelRequested == nil:
			x.CancelRequested = &job.CancelRequest{By: who, At: now, Grace: grace}
			recorded = true
		default:
			recorded = true // asked already: the first request stands
		}
		return nil
	})
	if err != nil {
		if got, gerr := c.store.Get(id); gerr == nil {
			u = got
		}
		return u, false, err
	}
	if !recorded {
		c.emit(eventlog.JobEnd, u)
	}
	return u, recorded, nil
}

// cancelRequested carries out the cancels recorded for the pass
// (shared-lab mode: job.Job.CancelRequested) and takes the jobs it ended
// off c.act. A job it could not stop keeps its request for the next
// pass.
func (c *Controller) cancelRequested(ctx context.Context, res *Result) {
	if c.act.marks.cancels == 0 {
		return
	}
	var asked []job.Job // copies: c.act changes as they end
	c.act.each(func(j *job.Job) {
		if j.CancelRequested != nil {
			asked = append(asked, *j)
		}
	})
	for _, j := range asked {
		r := j.CancelRequested
		u, err := c.Cancel(ctx, j.ID, r.Grace, r.By)
		switch {
		case err == nil && u.State.Terminal():
			res.Finished = append(res.Finished, u)
			c.act.drop(j.ID)
		case errors.Is(err, ErrEnded):
			c.act.drop(j.ID)
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %s: the cancel %s asked for: %w", j.Ref(), r.By, err))
		}
	}
}

// ForceCancel records j cancelled without reaching its worker (gssh
// cancel --force): for a job whose host is down or no longer in the
// inventory. Its attempt is recorded as a stray of the host, killed if
// the host answers again. who is who asked.
func (c *Controller) ForceCancel(id job.ID, who string) (job.Job, error) {
	j, err := c.store.Get(id)
	if err != nil {
		return job.Job{}, err
	}
	if j.State.Terminal() {
		return j, fmt.Errorf("job %s %w (%s)", j.Ref(), ErrEnded, j.State)
	}
	now := c.now()
	if j.State != job.Queued && j.Placement.Host != "" {
		if _, err := c.addStray(j, now, "cancelled with --force"); err != nil {
			return j, fmt.Errorf("job %s: %w", j.Ref(), err)
		}
	}
	u, err := c.store.Update(id, func(x *job.Job) error {
		if x.State.Terminal() {
			return fmt.Errorf("job %s %w (%s)", x.Ref(), ErrEnded, x.State)
		}
		x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
		x.Reason = "cancelled with --force by " + who
		if j.State != job.Queued && j.Placement.Host != "" {
			x.Reason += "; its processes on " + j.Placement.Host + " may still run (gssh did not reach the host; they are killed if a pass reaches it again)"
		}
		return nil
	})
	if err == nil {
		c.emit(eventlog.JobEnd, u)
	}
	return u, err
}
