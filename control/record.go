package control

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
)

// The changes to a job's record that the pass and the job operations
// share: back in the queue (requeue), an end as its worker reports it
// (recordEnd, endedAt, timeoutReason), and the walltime it runs under.

// requeue puts x back in the queue under its id (gssh requeue, a
// preemption, a host or GPU that failed under it): when it ran, its run
// so far counts in fair-share until now and as a restart
// (GSSH_RESTART_COUNT); the next pass may place it anywhere. The attempt
// it leaves is kept in x.Attempts, ended at now as st says (its command's
// end: an exit status, stopped, lost), for the reason ended (a
// job.Attempt* code).
func requeue(x *job.Job, now time.Time, ran bool, why, code string, st job.Status, ended string) {
	x.EndAttempt(now, st, ended, why)
	if use, ok := x.Use(); ok && ran {
		use.Ended = now
		x.Runs = append(x.Runs, use)
		x.Restarts++
	}
	x.State, x.Reason, x.ReasonCode = job.Queued, why, code
	x.Preempt = nil
	x.Placement, x.Remote, x.StartedAt, x.ExitCode, x.Signal = job.Placement{}, job.Remote{}, time.Time{}, nil, ""
}

// recordEnd records in x how the worker says j ended (st), by now: its
// state (Lost for a job whose leader died without an exit status), its
// end on the controller's clock (endedAt), the reason (a walltime stop's
// in the controller's words; with the leftover processes killed, when
// leftovers > 0), its exit code and signal. A job found ended with no
// start recorded (a launch whose outcome was unknown) gets the start its
// run time gives.
func (c *Controller) recordEnd(x *job.Job, j job.Job, st job.Status, leftovers int, now time.Time) {
	state, reason := st.State, st.Reason
	if !state.Terminal() {
		state = job.Lost
	}
	if state == job.Timeout {
		reason = c.timeoutReason(j)
	}
	if leftovers > 0 {
		reason = fmt.Sprintf("%s; its %d leftover processes were killed", reason, leftovers)
	}
	x.State, x.EndedAt, x.Reason, x.ReasonCode = state, endedAt(j, st, now), reason, ""
	x.ExitCode, x.Signal = st.ExitCode, st.Signal
	if x.StartedAt.IsZero() { // a launch whose outcome was unknown, found ended
		x.StartedAt = x.EndedAt.Add(-st.Runtime)
	}
}

// endedAt is when j ended on the controller's clock: its start plus the
// run time the worker measured on its own clock (job.Status.Runtime), so
// two hosts' clocks never mix; for an exit file without a run time, what
// the worker reported (the exit file's mtime, whole seconds, by the
// worker's clock), else now. Never before the start nor after now.
func endedAt(j job.Job, st job.Status, now time.Time) time.Time {
	switch {
	case st.Runtime > 0 && !j.StartedAt.IsZero():
		if e := j.StartedAt.Add(st.Runtime); e.Before(now) {
			return e
		}
		return now
	case st.EndedAt.IsZero() || !st.EndedAt.Before(now):
		return now
	case st.EndedAt.Before(j.StartedAt):
		return j.StartedAt
	}
	return st.EndedAt
}

// timeoutReason is the reason of a job stopped past its walltime (by a
// pass, or by its worker: run.sh's own walltime stop).
func (c *Controller) timeoutReason(j job.Job) string {
	switch {
	case c.walltime(j) == 0: // the policy's default_timeout is gone since
		return "stopped: past its walltime"
	case j.Spec.Timeout == 0:
		return fmt.Sprintf("ran past the default walltime of %s (policy default_timeout): stopped", c.walltime(j))
	}
	return fmt.Sprintf("ran past its walltime of %s: stopped", c.walltime(j))
}

// walltime is what j may run: its --timeout, else the policy's
// default_timeout (0: no limit).
func (c *Controller) walltime(j job.Job) time.Duration {
	return cmp.Or(j.Spec.Timeout, c.policy.DefaultTimeout)
}

// pastWalltime reports whether j, running, has run longer than its
// walltime by now.
func (c *Controller) pastWalltime(j job.Job, now time.Time) bool {
	w := c.walltime(j)
	return w > 0 && !j.StartedAt.IsZero() && now.Sub(j.StartedAt) > w
}

// errSkip aborts a store update that no longer applies.
var errSkip = errors.New("skip")

// placementText is "host:0,1".
func placementText(p job.Placement) string {
	idx := make([]string, len(p.Indexes))
	for i, n := range p.Indexes {
		idx[i] = strconv.Itoa(n)
	}
	return p.Host + ":" + strings.Join(idx, ",")
}
