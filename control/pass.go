package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// Result says what a pass did.
type Result struct {
	Started  []job.Job // launched in this pass
	Finished []job.Job // reached an end state in this pass
	// Pending are the queued jobs whose pending reason this pass wrote
	// (new, or changed: a cron log prints only those) and those a failed
	// launch put back in the queue, with their reasons.
	Pending []job.Job
	Queued  int     // how many jobs the pass left queued
	Errors  []error // per host or per job problems that did not stop the pass
	// Preempted are the jobs this pass signalled for a preemption (now
	// preempting; Job.Preempt says for whom and why). The pass that
	// finds one gone puts it back in the queue (Requeued).
	Preempted []job.Job
	// Requeued are the preempted jobs this pass found gone (or killed
	// after their grace) and put back in the queue, and the --requeue
	// jobs whose host failed under them, as recorded then (Job.Reason
	// says why); the plan may start them again at once.
	Requeued []job.Job
	// Hosts are the hosts this pass called down, found still down, or
	// found answering again after they were down.
	Hosts []HostNote
	// GPUFailed are the running jobs whose GPU this pass found unhealthy
	// (Job.Reason says which and how).
	GPUFailed []job.Job
	// Unknown are the jobs this pass found on a host called down: they
	// may still run (unknown), their GPUs still booked.
	Unknown []job.Job
	// Strays are the attempts given up on a failed host that this pass
	// found running there when it answered again, and killed.
	Strays []health.Stray
	// Reaped are the GPU processes this pass meant to kill (orphans of
	// gssh jobs; foreign ones where reap_foreign: kill) and what became
	// of each (reap.go).
	Reaped []Reaped
	// Housekeeping is what the pass trimmed (housekeep.go): job records
	// moved to the history, ledger entries pruned, job directories
	// removed on the workers.
	Housekeeping Housekeeping
}

// Pass runs one pass. It probes (asks Snapshots) only when some job is
// queued. The error is one that stopped the pass: the store could not be
// read, or ctx ended (then nothing is planned on a half-done probe); the
// rest are in Result.Errors. A pass that was not stopped ends with its
// housekeeping (housekeep), on the hosts it reached.
func (c *Controller) Pass(ctx context.Context) (Result, error) {
	if c.reached == nil {
		c.reached = map[string]bool{}
	}
	clear(c.reached)
	res, err := c.pass(ctx)
	if err == nil && ctx.Err() == nil {
		c.housekeep(ctx, &res)
	}
	return res, err
}

// pass is Pass but its housekeeping.
func (c *Controller) pass(ctx context.Context) (Result, error) {
	var res Result
	if err := c.readActive(); err != nil {
		if !errors.Is(err, state.ErrBadRecord) {
			return res, err
		}
		res.Errors = append(res.Errors, err) // the others still get their pass
	}
	c.loadHealth(&res)
	c.cancelRequested(ctx, &res)
	c.reconcile(ctx, &res)
	c.dropOrphanedRuns(&res)

	in := c.inputOf(c.act.queued, c.act.running)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(in.Queue) == 0 {
		c.watchGPUs(ctx, in.Running, &res)
		return res, nil
	}
	held := c.act.uses // what each holds, worked out as it was read
	if len(in.Running) != len(c.act.running) {
		held = func(buf []job.Use) []job.Use { return appendUses(buf, in.Running) } // the others left out
	}
	var err error
	if in.Usage, c.scratch.uses, err = c.usageOf(in.Now, c.scratch.uses, held); err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("fair-share usage: %w", err)) // planned on what could be read
	}
	if in.Hosts, err = c.hosts(ctx); err != nil {
		res.Errors = append(res.Errors, err)
		if !errors.Is(err, state.ErrBadRecord) {
			return res, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err // cut short: what was half probed is not planned on
	}
	c.probed(in.Hosts, c.contacted, c.now(), &res)
	c.gpuHealth(in.Hosts, in.Running, c.now(), &res)
	c.reapOrphans(ctx, in.Hosts, &res, c.act.queued, c.act.running)
	if err := c.deps(&in); err != nil {
		res.Errors = append(res.Errors, err)
	}
	c.carryOut(ctx, c.planner.Plan(in), in.Running, &res)
	return res, nil
}
