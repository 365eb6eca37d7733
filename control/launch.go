package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// start claims j (launching, with its placement), launches it and records
// where it runs. A failed launch puts the job back in the queue with the
// reason; it is never left in launching by this function. A job cancelled
// while it launched is stopped on its worker at once: nothing runs that
// the queue does not track.
func (c *Controller) start(ctx context.Context, j job.Job, p job.Placement) (job.Job, error) {
	unlockPorts := func() {}
	if c.ports.Blocks() > 0 {
		// Starts run at once: a block is chosen and claimed (recorded in
		// the job's placement, below) by one at a time; the launch after
		// the claim runs beside the others.
		c.portsMu.Lock()
		unlockPorts = c.portsMu.Unlock
		base, ok, err := c.freePorts(p.Host)
		if err != nil {
			unlockPorts()
			return job.Job{}, fmt.Errorf("job %s: its ports on %s: %w", j.Ref(), p.Host, err)
		}
		if !ok {
			defer unlockPorts()
			// Every block is some running job's: the job waits, saying so.
			u, err := c.store.Update(j.ID, func(x *job.Job) error {
				if x.State != job.Queued {
					return errSkip
				}
				x.Reason = fmt.Sprintf("%s: all %d port blocks of %d-%d (%d each) are held by gssh jobs running there; one frees as one ends (the policy's ports)",
					p.Host, c.ports.Blocks(), c.ports.Lo, c.ports.Hi, c.ports.Count)
				x.ReasonCode = "ports"
				return nil
			})
			if errors.Is(err, errSkip) {
				return job.Job{}, nil // cancelled meanwhile
			}
			return u, err
		}
		p.PortBase, p.PortCount = base, c.ports.Count
	}
	claimed, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State != job.Queued {
			return errSkip
		}
		x.State, x.Placement, x.Reason, x.ReasonCode = job.Launching, p, "launching on "+p.Host, ""
		x.Attempt++ // each attempt has a directory of its own on the worker
		x.Remote = job.Remote{}
		for len(x.AttemptHosts) < x.Attempt-1 { // earlier attempts of a gssh that did not record them
			x.AttemptHosts = append(x.AttemptHosts, "")
		}
		x.AttemptHosts = append(x.AttemptHosts[:x.Attempt-1], p.Host) // where housekeeping finds its directory
		return nil
	})
	unlockPorts()
	if errors.Is(err, errSkip) {
		return job.Job{}, nil // cancelled meanwhile
	}
	if err != nil {
		return job.Job{}, fmt.Errorf("job %s: claim: %w", j.Ref(), err)
	}
	if claimed.Spec.Interactive != nil {
		// Its gssh run launches it in the foreground (launch.Attach): the
		// claim books the GPUs; run records it running.
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Launching || x.Attempt != claimed.Attempt {
				return errSkip
			}
			x.Reason = "placed on " + placementText(p) + ": waiting for its gssh run to start it"
			return nil
		})
		if err != nil {
			return claimed, nil // cancelled meanwhile, or the reason unwritten: the claim stands
		}
		return u, nil
	}
	launched := claimed
	launched.Spec.Timeout = c.walltime(claimed)                               // the worker enforces it too
	launched.Spec.LogLimit = cmp.Or(claimed.Spec.LogLimit, c.defaultLogLimit) // run.sh caps the log
	remote, lerr := c.workers.Start(ctx, launched)
	now := c.now()
	unknown := errors.Is(lerr, job.ErrOutcomeUnknown)
	var cancelled bool
	updated, err := c.store.Update(j.ID, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			cancelled = true // while it launched
			if lerr == nil {
				x.Remote = remote
			}
		case unknown:
			// It may run: the next pass asks the worker, never launches it
			// again blindly.
			x.Reason, x.ReasonCode = "launch outcome unknown ("+lerr.Error()+"); the next pass asks "+p.Host, "launch_unknown"
		case errors.Is(lerr, job.ErrDirExists):
			// Another attempt would run it twice, if this one is the job's
			// own (see job.ErrDirExists).
			x.State, x.EndedAt = job.Failed, now
			x.Reason, x.ReasonCode = dirExistsReason(x.ID, lerr), codeDirExists
		case lerr != nil:
			x.Reason, x.ReasonCode = "launch failed: "+lerr.Error()+"; the job stays queued", "launch_failed"
			x.EndAttempt(now, job.Status{}, job.AttemptLaunchFailed, x.Reason)
			x.State, x.Placement = job.Queued, job.Placement{}
		default:
			x.State, x.Remote, x.StartedAt, x.Reason = job.Running, remote, now, ""
		}
		return nil
	})
	if err != nil {
		return job.Job{}, fmt.Errorf("job %s: record the launch: %w", j.Ref(), err)
	}
	if cancelled {
		if lerr == nil || unknown {
			// Recorded cancelled while it launched: it may have run for an
			// instant, never longer.
			if _, err := c.workers.Stop(ctx, updated, c.grace, job.Cancelled); err != nil {
				return job.Job{}, fmt.Errorf("job %s was cancelled while it launched; stopping it: %w", j.Ref(), err)
			}
		}
		return job.Job{}, nil
	}
	if unknown {
		return job.Job{}, fmt.Errorf("job %s: %w", j.Ref(), lerr) // neither started nor queued: launching
	}
	if lerr != nil && updated.State.Terminal() {
		c.emit(eventlog.JobEnd, updated)
		return updated, fmt.Errorf("job %s: %w", j.Ref(), lerr)
	}
	if lerr != nil {
		c.emit(eventlog.JobRequeue, updated)
		return updated, fmt.Errorf("job %s: %w", j.Ref(), lerr)
	}
	c.emit(eventlog.JobStart, updated)
	return updated, nil
}

// codeDirExists is the reason code of a job failed for job.ErrDirExists.
const codeDirExists = "dir_exists"

// dirExistsReason is why job id failed for job.ErrDirExists (lerr).
func dirExistsReason(id job.ID, lerr error) string {
	return fmt.Sprintf("not started: %s: job id %d was handed out before, by a state file this one was copied from (put back from a backup by hand?), or this attempt ran after the copy was taken; "+
		"it is not run again. Resubmit it; gssh state restore puts a backup back with new ids past the workers' directories", lerr, id)
}

// freePorts is the lowest port block of c.ports that no active job on
// host holds, and false when every one is held.
func (c *Controller) freePorts(host string) (int, bool, error) {
	active, err := c.store.Active()
	if err != nil && len(active) == 0 {
		return 0, false, err
	}
	held := map[int]bool{}
	for _, a := range active {
		if a.Placement.Host == host && a.Placement.PortBase > 0 {
			held[a.Placement.PortBase] = true
		}
	}
	for b := 0; b < c.ports.Blocks(); b++ {
		if base := c.ports.Lo + b*c.ports.Count; !held[base] {
			return base, true, nil
		}
	}
	return 0, false, nil
}
