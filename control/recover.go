package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
)

// codeRecovered is the reason code of a job whose result was recovered
// from an attempt given up on its host; codeHostLost, of a job recorded
// lost when its host was down for lost_after.
const (
	codeRecovered = "result_recovered"
	codeHostLost  = "host_lost"
)

// finished reports whether st, a poll of an attempt, is an end the
// attempt reached on its own worker: an exit status, or the worker's
// own walltime stop (not a stop gssh marked, nor a vanished process).
func finished(st job.Status) bool {
	return !st.Missing && (st.State == job.Succeeded || st.State == job.Failed || st.State == job.Timeout)
}

// recoverStray records stray attempt s, which its host (answering again)
// reports finished (st), as its job's result when the job has none of
// its own yet: the job is queued again (--requeue), running a later
// attempt, or recorded lost at that very attempt. A later attempt queued
// is dropped; one that started is stopped (as a cancel: SIGTERM, the
// grace, SIGKILL) and kept in the job's Attempts as superseded, its run
// counted in fair-share (as attempt a's is, booked until it was given
// up: Runs); one whose host does not answer is recorded a
// stray of that host, killed when it answers. When the later attempt had
// finished too before the stop, the one that finished first counts (each
// end on the controller's clock: its start plus the run time its worker
// measured, so two hosts' clocks never mix; the earlier attempt on a
// tie). A job that ended otherwise (a later attempt's end recorded, a
// cancel) keeps its end. It returns the job as recorded when it changed,
// and done: false leaves the stray for the next pass (a worker or store
// error, reported; the job changed meanwhile).
func (c *Controller) recoverStray(ctx context.Context, host string, s health.Stray, st job.Status, cur job.Job, res *Result) (u job.Job, changed, done bool) {
	var err error
	a := s.Job.Attempt
	if cur.Attempt == a && cur.ReasonCode == codeRecovered {
		return u, false, true // recovered by an earlier pass, whose stop of the stray failed
	}
	if cur.State.Terminal() || cur.Attempt < a {
		return c.ignoreStray(host, s, st, cur, res)
	}
	now := c.now()
	mine := endedAt(s.Job, st, now)
	later := cur.State.Active() && cur.Attempt != a
	var stopped job.Stopped
	ran, away := false, false
	if later {
		ran, stopped, err = c.stopOnWorker(ctx, cur, c.grace)
		switch {
		case errors.Is(err, job.ErrNoContact):
			// Its host is away too: killed when it answers.
			ran, away = cur.State != job.Launching, true
			if _, err := c.addStray(cur, now, fmt.Sprintf("superseded: attempt %d's result, found on %s, counts", a, host)); err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", cur.Ref(), err))
				return u, false, false
			}
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %s: stop attempt %d, superseded by attempt %d's result found on %s: %w", cur.Ref(), cur.Attempt, a, host, err))
			return u, false, false
		case stopped.Ended != nil && endedAt(cur, *stopped.Ended, now).Before(mine):
			// The later attempt finished first: its end is the job's.
			u, ok := c.endedFirst(cur, *stopped.Ended, stopped.Signalled, res)
			if !ok {
				return u, false, false
			}
			c.ignoreStray(host, s, st, u, res)
			return u, true, true
		}
	}
	var moved bool
	u, err = c.store.Update(cur.ID, func(x *job.Job) error {
		if x.State != cur.State || x.Attempt != cur.Attempt {
			moved = true
			return errSkip
		}
		note := fmt.Sprintf("attempt %d finished on %s while %s did not answer: its result counts", a, host, host)
		switch {
		case later && stopped.Ended != nil:
			note += fmt.Sprintf("; attempt %d on %s, which finished after it, does not", x.Attempt, x.Placement.Host)
			x.EndAttempt(endedAt(cur, *stopped.Ended, now), *stopped.Ended, job.AttemptSuperseded, note)
		case later:
			fate := "was stopped"
			switch {
			case away:
				fate = fmt.Sprintf("is killed when %s answers", x.Placement.Host)
			case !ran:
				fate = "was abandoned before it started"
			}
			note += fmt.Sprintf("; attempt %d, placed on %s meanwhile, %s", x.Attempt, x.Placement.Host, fate)
			x.EndAttempt(now, job.Status{State: job.Cancelled}, job.AttemptSuperseded, note)
		case x.State == job.Queued:
			note += "; the job, queued again meanwhile (--requeue), is not run again"
		}
		if use, ok := x.Use(); ok && later {
			use.Ended = now // the later attempt's run counts in fair-share
			if stopped.Ended != nil {
				use.Ended = endedAt(cur, *stopped.Ended, now)
			}
			x.Runs = append(x.Runs, use)
		}
		// Attempt a is the job's again: out of the earlier attempts. Its
		// run stays in Runs, as booked until it was given up (the usage
		// ledger's entries never change): job.Use counts it once.
		x.Attempts = slices.DeleteFunc(slices.Clone(x.Attempts), func(e job.Attempt) bool { return e.N == a })
		x.Attempt, x.Placement, x.Remote, x.StartedAt = a, s.Job.Placement, s.Job.Remote, s.Job.StartedAt
		x.Preempt, x.Hold, x.CancelRequested = nil, nil, nil
		c.recordEnd(x, s.Job, st, 0, now)
		x.Reason, x.ReasonCode = x.Reason+"; "+note, codeRecovered
		return nil
	})
	switch {
	case moved:
		return u, false, false // the next pass looks again
	case err != nil:
		res.Errors = append(res.Errors, fmt.Errorf("job %s: record attempt %d's result found on %s: %w", cur.Ref(), a, host, err))
		return u, false, false
	}
	res.Finished = append(res.Finished, u)
	c.events.Emit(Event{Time: now, Kind: eventlog.JobRecovered, Job: u, Host: host})
	c.emit(eventlog.JobEnd, u)
	return u, true, true
}

// ignoreStray reports that stray s had finished on host (st) when its job
// had an end of its own (cur), which stands: an end is final (its
// dependents may have acted on it). A job recorded lost at that very
// attempt (no --requeue) gets what was found added to its reason. It
// returns recoverStray's answer: the job as recorded when it changed.
func (c *Controller) ignoreStray(host string, s health.Stray, st job.Status, cur job.Job, res *Result) (u job.Job, changed, done bool) {
	note := fmt.Sprintf("; when %s answered again, this attempt was found to have ended there (%s), after the job was recorded lost: its end stands (--requeue keeps such a result)", host, st.Reason)
	if strings.HasSuffix(cur.Reason, note) {
		return u, false, true // said by an earlier pass, whose stop of the stray failed
	}
	e := s.Job
	e.State, e.ExitCode, e.Signal = st.State, st.ExitCode, st.Signal
	e.Reason = fmt.Sprintf("attempt %d, given up on %s while it did not answer, had ended there (%s); the job's own end stands (%s, attempt %d)", s.Job.Attempt, host, st.Reason, cur.State, cur.Attempt)
	c.events.Emit(Event{Time: c.now(), Kind: eventlog.StrayIgnored, Job: e, Host: host})
	if cur.State != job.Lost || cur.ReasonCode != codeHostLost || cur.Attempt != s.Job.Attempt {
		return u, false, true
	}
	u, err := c.store.Update(cur.ID, func(x *job.Job) error {
		if x.State != job.Lost || x.ReasonCode != codeHostLost || x.Attempt != s.Job.Attempt {
			return errSkip
		}
		x.Reason += note
		return nil
	})
	if err != nil && !errors.Is(err, errSkip) {
		res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", cur.Ref(), err))
	}
	return u, err == nil, true
}

// strayStatus polls stray s on host (one call of its own: the job's live
// attempt may be polled there under the same id).
func (c *Controller) strayStatus(ctx context.Context, host string, s health.Stray) (job.Status, bool, error) {
	j := s.Job
	m, err := c.workers.Poll(ctx, host, []*job.Job{&j})
	if err != nil {
		return job.Status{}, false, err
	}
	st, ok := m[j.ID]
	return st, ok, nil
}
