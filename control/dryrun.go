package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Trial is what a plan made now says of one job: gssh submit --dry-run's
// and gssh show's answer.
type Trial struct {
	Start     bool          // it would start now
	Placement job.Placement // where, when Start
	// Rejected are the hosts turned down for it, and why (when Start: why
	// not elsewhere).
	Rejected []sched.Rejection
	// Pending says why it would wait, its place in the queue and its
	// reservation, when not Start.
	Pending sched.Pending
	// Forecast is when it is expected to start, when not Start.
	Forecast sched.Forecast
}

// DryRun plans the queue as a pass would now, with j (which is not
// stored; give it an id after every real one) queued behind the jobs of
// its priority, and says what would become of j. It changes nothing: no
// worker is polled and nothing is written.
func (c *Controller) DryRun(ctx context.Context, j job.Job) (Trial, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	j.State, j.SubmittedAt = job.Queued, c.now()
	return c.trial(ctx, append(active, j), j.ID)
}

// Explain plans the queue as a pass would now and says what it makes of
// queued job id: why it waits, where it stands, when it is expected to
// start. Like DryRun, it polls no worker (the jobs are as the last pass
// recorded them) and writes nothing. A job not queued is an error.
func (c *Controller) Explain(ctx context.Context, id job.ID) (Trial, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	if !slices.ContainsFunc(active, func(j job.Job) bool { return j.ID == id && j.State == job.Queued }) {
		return Trial{}, fmt.Errorf("job %d is not queued", id)
	}
	return c.trial(ctx, active, id)
}

// trial plans active (with the hosts as Snapshots gives them) and says
// what becomes of job id.
func (c *Controller) trial(ctx context.Context, active []job.Job, id job.ID) (Trial, error) {
	in := c.input(active)
	in.Explain = id
	if err := c.deps(&in); err != nil {
		return Trial{}, err
	}
	ended, err := c.ended(in.Now)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, fmt.Errorf("fair-share usage: %w", err)
	}
	if ended == nil {
		ended = []job.Use{} // the forecast works usage out again as it goes
	}
	in.Usage = sched.Usage(append(slices.Clip(ended), sched.Uses(in.Running)...), in.Now, c.policy.FairShare)
	if in.Hosts, err = c.hosts(ctx); err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	plan := sched.Plan(in)
	for _, s := range plan.Starts {
		if s.Job == id {
			return Trial{Start: true, Placement: s.Placement, Rejected: s.Rejected}, nil
		}
	}
	for _, p := range plan.Pending {
		if p.Job == id {
			return Trial{Pending: p, Rejected: p.Rejected, Forecast: sched.ForecastStart(in, id, ended)}, nil
		}
	}
	for _, cn := range plan.Cancels {
		if cn.Job == id { // the next pass cancels it
			return Trial{Pending: sched.Pending{Job: id, Reason: cn.Reason}, Forecast: sched.Forecast{Why: "it never starts: " + cn.Reason.Text}}, nil
		}
	}
	return Trial{}, fmt.Errorf("job %d is not in the plan", id)
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
	if in.Hosts, err = c.hosts(ctx); err != nil && !errors.Is(err, state.ErrBadRecord) {
		return sched.Decisions{}, err
	}
	return sched.Plan(in), nil
}
