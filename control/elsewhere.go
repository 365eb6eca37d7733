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
// processes when its connection went), and returns the others.
func (c *Controller) endedElsewhere(active []job.Job, res *Result) []job.Job {
	out := active[:0]
	for i := range active {
		if !c.elsewhere(&active[i]) || !c.ownerGone(&active[i]) {
			out = append(out, active[i]) // in place: len(out) <= i
			continue
		}
		j := active[i]
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
			continue
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
		out = append(out, j)
	}
	return out
}

// ownerGoneReason is the end of an interactive job whose gssh run went
// away before the job started.
const ownerGoneReason = "its gssh run went away before the job started"

// dropOrphanedRuns ends the queued interactive jobs whose gssh run is
// gone (nobody is there to attach them: placing one would hold GPUs for
// no one) and returns the active jobs without them.
func (c *Controller) dropOrphanedRuns(active []job.Job, res *Result) []job.Job {
	out := active[:0]
	for _, j := range active {
		if j.State != job.Queued || !c.ownerGone(&j) {
			out = append(out, j)
			continue
		}
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
			continue
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record it cancelled (%s): %w", j.Ref(), ownerGoneReason, err))
		}
		out = append(out, j)
	}
	return out
}
