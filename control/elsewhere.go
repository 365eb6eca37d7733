package control

import (
	"errors"
	"fmt"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// ownerGone reports whether j is interactive and the gssh run process
// that owns it is gone.
func (c *Controller) ownerGone(j *job.Job) bool {
	return j.Spec.Interactive != nil && c.owners != nil && !c.owners.Alive(*j.Spec.Interactive)
}

// elsewhere reports whether j was launched by another user's gssh, with
// its own SSH identity (Remote.By): its worker side is out of reach.
func (c *Controller) elsewhere(j *job.Job) bool {
	return j.Remote.By != "" && j.Remote.By != c.self
}

// endedElsewhere ends, without SSH, the active jobs launched elsewhere
// whose gssh run is gone (its keeper on the worker stopped the job's
// processes when its connection went), and takes them off c.act.
func (c *Controller) endedElsewhere(res *Result) {
	if c.act.marks.remote == 0 {
		return // none launched by a gssh of its own
	}
	var gone []job.Job // copies: c.act changes as they end
	c.act.each(func(j *job.Job) {
		if c.elsewhere(j) && c.ownerGone(j) {
			gone = append(gone, *j)
		}
	})
	for _, j := range gone {
		now := c.now()
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State.Terminal() || x.Remote.By != j.Remote.By || x.Attempt != j.Attempt {
				return errSkip
			}
			x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
			x.Reason = "its gssh run (of " + j.Remote.By + ") went away; its keeper on the worker stopped its processes"
			return nil
		})
		switch {
		case err == nil:
			res.Finished = append(res.Finished, u)
			c.emit(eventlog.JobEnd, u)
			c.act.drop(j.ID)
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
	}
}

// ownerGoneReason is the end of an interactive job whose gssh run went
// away before the job started.
const ownerGoneReason = "its gssh run went away before the job started"

// dropOrphanedRuns ends the queued interactive jobs whose gssh run is
// gone (nobody is there to attach them: placing one would hold GPUs for
// no one) and takes them off c.act.
func (c *Controller) dropOrphanedRuns(res *Result) {
	if c.act.marks.runs == 0 {
		return // no gssh run waits
	}
	var gone []job.Job // copies: c.act changes as they end
	for i := range c.act.queued {
		if j := &c.act.queued[i]; c.ownerGone(j) {
			gone = append(gone, *j)
		}
	}
	for _, j := range gone {
		now := c.now()
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Queued {
				return errSkip
			}
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, ownerGoneReason, ""
			return nil
		})
		switch {
		case err == nil:
			res.Finished = append(res.Finished, u)
			c.emit(eventlog.JobEnd, u)
			c.act.drop(j.ID)
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record it cancelled (%s): %w", j.Ref(), ownerGoneReason, err))
		}
	}
}
