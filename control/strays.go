package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
)

// addStray records attempt j.Attempt of j as a stray of its host and
// returns the host's record after it.
func (c *Controller) addStray(j job.Job, now time.Time, why string) (health.Host, error) {
	if c.ledger == nil {
		return health.Host{}, nil
	}
	h, err := c.ledger.UpdateHost(j.Placement.Host, func(h *health.Host) error {
		*h = h.AddStray(j, now, why)
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("record the attempt left on %s: %w", j.Placement.Host, err)
	}
	return h, nil
}

// killStrays settles, on host, the attempts given up on it that are not
// their job's live attempt. Each is polled first: one that finished there
// (an exit status, its worker's walltime stop) has its result recorded as
// its job's when the job has none of its own yet (recoverStray), before
// the pass plans anything for the job. Then what is left of it is ended:
// abandoned if it never started, else stopped (SIGTERM, the orphan grace,
// SIGKILL; matched on the attempt, so the job's next attempt on the same
// host is left alone). Each stray is dropped from the record once done;
// one that fails stays for the next pass. With record (a host this pass
// did not poll), the first call's outcome is recorded as the pass's
// contact with the host, and a host that does not answer is left for a
// later pass. It returns the jobs it changed, as recorded.
func (c *Controller) killStrays(ctx context.Context, host string, record bool, res *Result) map[job.ID]job.Job {
	recorded := !record
	var changed map[job.ID]job.Job // most hosts have no strays: no map
	contact := func(err error) {
		if !recorded {
			recorded = true
			why := ""
			if errors.Is(err, job.ErrNoContact) {
				why = err.Error()
			}
			c.observe(host, why, c.now(), res)
		}
	}
	// failed says what err, of the call that does what to stray s, leaves:
	// away (a host this pass did not poll still does not answer: the next
	// pass tries again), or skip (an error, reported: s stays for the next
	// pass).
	failed := func(s health.Stray, what string, err error) (away, skip bool) {
		switch {
		case errors.Is(err, job.ErrNoContact) && record:
			return true, true
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %s attempt %d left on %s (%s): %w", s.Job.Ref(), what, s.Job.Attempt, host, s.Why, err))
			return false, true
		}
		return false, false
	}
	for _, s := range c.health[host].Strays {
		cur, gerr := c.store.Get(s.Job.ID)
		if gerr == nil && s.Live(cur) {
			c.dropStray(host, s, res) // a record left by a crash before the attempt was given up
			continue
		}
		st, polled, err := c.strayStatus(ctx, host, s)
		contact(err)
		if away, skip := failed(s, "poll", err); away {
			return changed
		} else if skip {
			continue
		}
		if polled && finished(st) && gerr == nil { // a job that cannot be read: its stray is killed, as any
			u, ok, done := c.recoverStray(ctx, host, s, st, cur, res)
			if ok {
				if changed == nil {
					changed = map[job.ID]job.Job{}
				}
				changed[u.ID] = u
			}
			if !done {
				continue
			}
		}
		abandoned, err := c.workers.Abandon(ctx, s.Job)
		n := 0
		if err == nil && !abandoned {
			var stopped job.Stopped
			stopped, err = c.workers.Stop(ctx, s.Job, c.orphan, "")
			n = stopped.Signalled
		}
		if away, skip := failed(s, "stop", err); away {
			return changed
		} else if skip {
			continue
		}
		if n > 0 {
			res.Strays = append(res.Strays, s)
			c.events.Emit(Event{Time: c.now(), Kind: eventlog.StrayKilled, Job: s.Job, Host: host})
		}
		c.dropStray(host, s, res)
	}
	return changed
}

func (c *Controller) dropStray(host string, s health.Stray, res *Result) {
	h, err := c.ledger.UpdateHost(host, func(h *health.Host) error {
		*h = h.DropStray(s.Job.ID, s.Job.Attempt)
		return nil
	})
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("host %s: %w", host, err))
		return
	}
	c.health[host] = h
}
