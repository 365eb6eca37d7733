package control

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// carryOut carries a plan out, one outcome after the other: the jobs it
// cancels (a dependency that can never be met), its preemptions
// (preempt.go), its starts in order (launch.go), then the pending reasons
// that changed. The queued jobs are c.act's; running are those that hold
// GPUs (sched.Input.Running).
func (c *Controller) carryOut(ctx context.Context, plan sched.Decisions, running []job.Job, res *Result) {
	res.Queued = len(plan.Pending)
	for _, cn := range plan.Cancels {
		c.cancelQueued(cn, res)
	}
	c.preempt(ctx, plan.Preempts, running, res)
	c.startAll(ctx, plan.Starts, res)
	seen, at := c.scratch.seen[:0], -1
	var ids []job.ID
	var changed []*sched.Pending
	for i := range plan.Pending {
		p := &plan.Pending[i]
		var text string
		var j *job.Job
		text, seen = sameText(p.Reason.Text, seen, c.act.reasons)
		j, at = c.queuedJob(p.Job, at)
		if j.ReasonCode == string(p.Reason.Code) && j.Reason == text {
			continue // nothing new to write
		}
		ids, changed = append(ids, p.Job), append(changed, p)
	}
	clear(seen)
	c.scratch.seen = seen[:0]
	if len(ids) > 0 {
		c.leaveAllPending(ids, changed, res)
	}
}

// leaveAllPending records the plan's pending reasons ps of the queued
// jobs ids (each a reason they do not have), in one transaction; a job
// no longer queued is left as it is.
func (c *Controller) leaveAllPending(ids []job.ID, ps []*sched.Pending, res *Result) {
	out, errs, err := c.store.UpdateEach(ids, func(i int, x *job.Job) error {
		if x.State != job.Queued {
			return errSkip
		}
		x.Reason, x.ReasonCode = ps[i].Reason.Text, string(ps[i].Reason.Code)
		return nil
	})
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("record the pending reasons of %d jobs: %w", len(ids), err))
		return
	}
	for i := range ids {
		switch {
		case errs[i] == nil:
			res.Pending = append(res.Pending, out[i])
		case !errors.Is(errs[i], errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %d: record the pending reason: %w", ids[i], errs[i]))
		}
	}
}

// seenText is a reason the planner gave, and the string of c.act's
// queued jobs with its text (itself, when none has it).
type seenText struct{ text, same string }

// sameText is the string of interned (active.reasons) with text's text,
// or text: the planner gives many jobs one string, and a job's reason
// that is interned compares with it at once. seen are the planner's
// strings looked up already in this pass; it returns them, text's
// added.
func sameText(text string, seen []seenText, interned map[string]string) (string, []seenText) {
	if len(text) < internMin {
		return text, seen
	}
	for _, s := range seen {
		if s.text == text { // at once for the same string; texts that differ do early
			return s.same, seen
		}
	}
	same, ok := interned[text]
	if !ok {
		same = text
	}
	if len(seen) < 16 { // a plan of many texts: the others are compared as they are
		seen = append(seen, seenText{text, same})
	}
	return same, seen
}

// queuedJob is queued job id, which is there, in place in c.act (a job
// is too big to pass around by value), and its place there. The plan
// often lists jobs in id order: the place after the one before is tried
// first.
func (c *Controller) queuedJob(id job.ID, after int) (*job.Job, int) {
	i := after + 1
	if i >= len(c.act.qids) || c.act.qids[i] != id {
		i, _ = find(c.act.qids, id)
	}
	return &c.act.queued[i], i
}

// cancelQueued records the queued job the plan cancels cancelled, with
// the plan's reason; one placed or cancelled meanwhile is left as it is.
func (c *Controller) cancelQueued(cn sched.Cancel, res *Result) {
	now := c.now()
	u, err := c.store.Update(cn.Job, func(x *job.Job) error {
		if x.State != job.Queued {
			return errSkip // placed or cancelled meanwhile
		}
		x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, cn.Reason.Text, string(cn.Reason.Code)
		return nil
	})
	switch {
	case err == nil:
		res.Finished = append(res.Finished, u)
		c.emit(eventlog.JobEnd, u)
	case !errors.Is(err, errSkip):
		res.Errors = append(res.Errors, fmt.Errorf("job %d: record it cancelled (%s): %w", cn.Job, cn.Reason.Text, err))
	}
}

// startAll starts the plan's starts, c.launches at once (one after the
// other when it is 0 or 1), and adds their outcomes to res in plan order.
// A start the pass's end (ctx) leaves unlaunched is the next pass's.
func (c *Controller) startAll(ctx context.Context, starts []sched.Start, res *Result) {
	if c.launches <= 1 || len(starts) < 2 {
		for _, s := range starts {
			if ctx.Err() != nil {
				res.Queued++ // the next pass starts it
				continue
			}
			j, _ := c.queuedJob(s.Job, -1)
			started, err := c.start(ctx, *j, s.Placement)
			addStart(started, err, res)
		}
		return
	}
	type outcome struct {
		started job.Job
		err     error
		skipped bool
	}
	out := make([]outcome, len(starts))
	slots := make(chan struct{}, c.launches)
	var wg sync.WaitGroup
	for i, s := range starts {
		j, _ := c.queuedJob(s.Job, -1)
		queued := *j
		slots <- struct{}{}
		if ctx.Err() != nil {
			<-slots
			out[i].skipped = true
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i].started, out[i].err = c.start(ctx, queued, s.Placement)
		})
	}
	wg.Wait()
	for _, o := range out {
		if o.skipped {
			res.Queued++ // the next pass starts it
			continue
		}
		addStart(o.started, o.err, res)
	}
}

// addStart adds the outcome of a start (c.start's) to res: started;
// failed for good (job.ErrDirExists); back in the queue with the reason
// (a failed launch); still launching (an outcome unknown: an error); or
// nothing, for a job cancelled meanwhile.
func addStart(started job.Job, err error, res *Result) {
	switch {
	case err == nil && started.ID == 0: // cancelled meanwhile
	case err == nil && started.State == job.Queued: // not started: waits for a port block
		res.Pending = append(res.Pending, started)
		res.Queued++
	case err != nil && started.State.Terminal(): // failed: job.ErrDirExists
		res.Errors = append(res.Errors, err)
		res.Finished = append(res.Finished, started)
	case err != nil && started.ID != 0:
		res.Errors = append(res.Errors, err)
		res.Pending = append(res.Pending, started) // back in the queue, with the reason
		res.Queued++
	case err != nil:
		res.Errors = append(res.Errors, err)
	default:
		res.Started = append(res.Started, started)
	}
}
