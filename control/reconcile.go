package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// onHosts groups the active jobs placed on a host by host, hosts in name
// order, jobs in their order, as pointers into active (a pass over a lab
// of hundreds of running jobs copies none of them).
func onHosts(active []job.Job, skip func(*job.Job) bool) (hosts []string, byHost [][]*job.Job) {
	at := map[string]int{} // host → its place in hosts
	var count []int
	placed := 0
	for i := range active {
		if j := &active[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k, ok := at[j.Placement.Host]
			if !ok {
				k = len(hosts)
				at[j.Placement.Host] = k
				hosts, count = append(hosts, j.Placement.Host), append(count, 0)
			}
			count[k]++
			placed++
		}
	}
	slices.Sort(hosts)
	all := make([]*job.Job, placed)
	byHost = make([][]*job.Job, len(hosts))
	off := 0
	for k, h := range hosts {
		n := count[at[h]]
		byHost[k] = all[off : off : off+n]
		at[h] = k
		off += n
	}
	for i := range active {
		if j := &active[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k := at[j.Placement.Host]
			byHost[k] = append(byHost[k], j)
		}
	}
	return hosts, byHost
}

// reconcile polls every host with launching or running jobs (one call per
// host, hosts in parallel), records ends, enforces walltimes, and returns
// the active jobs as they are now.
func (c *Controller) reconcile(ctx context.Context, active []job.Job, res *Result) []job.Job {
	active = c.endedElsewhere(active, res)
	active = c.notInInventory(active, res)
	hosts, byHost := onHosts(active, func(j *job.Job) bool { return c.elsewhere(j) || !c.inInventory(j.Placement.Host) })
	// Hosts with strays and no job to poll are reached all the same: the
	// attempts given up there must be killed when they answer.
	c.contacted = map[string]bool{}
	for _, h := range hosts {
		c.contacted[h] = true
	}
	var strayOnly []string
	for _, name := range slices.Sorted(maps.Keys(c.health)) {
		if len(c.health[name].Strays) > 0 && !c.contacted[name] && c.inInventory(name) {
			strayOnly = append(strayOnly, name)
			c.contacted[name] = true
		}
	}
	polled := make([]map[job.ID]job.Status, len(hosts))
	errs := make([]error, len(hosts))
	c.onEach(hosts, func(i int, host string) { polled[i], errs[i] = c.workers.Poll(ctx, host, byHost[i]) })
	now := c.now()
	changed := map[job.ID]job.Job{}
	for i, host := range hosts {
		if errs[i] != nil {
			if errors.Is(errs[i], job.ErrNoContact) {
				maps.Copy(changed, c.noAnswer(ctx, host, errs[i], byHost[i], now, res))
			} else {
				res.Errors = append(res.Errors, errs[i]) // a host that cannot be polled keeps its jobs as they are
			}
			continue
		}
		c.observe(host, "", now, res)
		c.reached[host] = true
		maps.Copy(changed, c.killStrays(ctx, host, false, res))
	}
	for _, host := range strayOnly {
		maps.Copy(changed, c.killStrays(ctx, host, true, res))
	}
	// The polls are applied after every stray was settled: a result
	// recovered from an attempt given up on a host is weighed against the
	// job's later attempt before that attempt's own end is recorded.
	for i := range hosts {
		if errs[i] != nil {
			continue
		}
		for _, j := range byHost[i] {
			st, ok := polled[i][j.ID]
			if u, settled := changed[j.ID]; !ok || settled && (u.State.Terminal() || u.Attempt != j.Attempt) {
				continue // ended by an earlier attempt's result
			}
			if u, ok := c.apply(ctx, *j, st, now, res); ok {
				changed[j.ID] = u
			}
		}
	}
	if len(changed) == 0 {
		return active
	}
	out := active[:0] // in place: each job is written at or before where it was read
	for i := range active {
		if u, ok := changed[active[i].ID]; ok && !active[i].State.Terminal() {
			active[i] = u // a queued job too: one whose earlier attempt's result was recovered
		}
		if !active[i].State.Terminal() {
			out = append(out, active[i])
		}
	}
	return out
}

// onEach calls fn for each host (and its place in hosts), the hosts in
// parallel unless the controller polls serially (PollSerially), and
// returns when every call has.
func (c *Controller) onEach(hosts []string, fn func(i int, host string)) {
	var wg sync.WaitGroup
	for i, h := range hosts {
		if c.serial {
			fn(i, h)
			continue
		}
		wg.Go(func() { fn(i, h) })
	}
	wg.Wait()
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

// apply records what the worker reported of j.
func (c *Controller) apply(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	update := func(fn func(*job.Job)) (job.Job, bool) {
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State.Terminal() {
				return errSkip // ended meanwhile (cancel)
			}
			fn(x)
			return nil
		})
		if err != nil {
			if !errors.Is(err, errSkip) {
				res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
			}
			return j, false
		}
		switch {
		case u.State.Terminal():
			res.Finished = append(res.Finished, u)
			c.emit(eventlog.JobEnd, u)
		case u.State == job.Queued:
			c.emit(eventlog.JobRequeue, u)
		}
		return u, true
	}
	switch {
	case j.State == job.Preempting:
		return c.preempted(ctx, j, st, now, res)
	case st.State == job.Running && c.pastWalltime(j, now):
		stopped, err := c.workers.Stop(ctx, j, c.grace, job.Timeout)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: walltime: %w", j.Ref(), err))
			return j, false
		}
		return update(func(x *job.Job) {
			if stopped.Ended != nil { // it ended on its own just before
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
				return
			}
			x.State, x.EndedAt, x.Reason = job.Timeout, now, c.timeoutReason(j)
		})
	case st.State == job.Running && c.ownerGone(&j):
		// Its gssh run is gone (killed, its terminal closed) and the
		// keeper did not stop it (the connection is still up, or the
		// keeper was killed too): nobody is at it any more.
		stopped, err := c.workers.Stop(ctx, j, c.grace, job.Cancelled)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: its gssh run is gone: %w", j.Ref(), err))
			return j, false
		}
		return update(func(x *job.Job) {
			if stopped.Ended != nil {
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
				return
			}
			x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
			x.Reason = "its gssh run went away; its processes were stopped"
		})
	case j.Spec.Interactive != nil && j.State == job.Launching && (st.Missing || st.State == job.Launching) && !c.ownerGone(&j):
		// Its gssh run is attaching it: leave it be.
		return j, false
	case st.State == job.Running && j.State == job.Unknown:
		// Its host answers again and the job still runs: adopted, as it
		// was (its GPUs stayed booked).
		u, ok := update(func(x *job.Job) { x.State, x.Reason, x.ReasonCode = job.Running, "", "" })
		if ok {
			c.emit(eventlog.JobAdopted, u)
		}
		return u, ok
	case st.State == job.Running && j.State == job.Launching:
		// A launch whose outcome was unknown: it did start.
		return update(func(x *job.Job) {
			x.State, x.Reason, x.ReasonCode = job.Running, "", ""
			if x.StartedAt.IsZero() {
				x.StartedAt = now
			}
			if x.Remote.PID == 0 {
				x.Remote.PID, x.Remote.StartTicks = st.PID, st.StartTicks
			}
			if x.Remote.Dir == "" {
				x.Remote.Dir = st.Dir
			}
		})
	case j.State == job.Launching && (st.Missing || st.State == job.Launching || st.Abandoned):
		// The launch did not finish (it never reached the worker, or run.sh
		// has not recorded its pid): abandon the attempt, atomically against
		// run.sh's own start, so that a launch merely slow can never start
		// after the job is queued again.
		abandoned, err := st.Abandoned, error(nil)
		if !abandoned {
			abandoned, err = c.workers.Abandon(ctx, j)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: abandon an unfinished launch: %w", j.Ref(), err))
			return j, false
		}
		if !abandoned {
			return j, false // run.sh started: the next poll sees its pid
		}
		why := fmt.Sprintf("attempt %d did not start on %s and was abandoned", j.Attempt, j.Placement.Host)
		if st.Abandoned && st.Reason != "" {
			why = fmt.Sprintf("attempt %d on %s: %s", j.Attempt, j.Placement.Host, st.Reason)
		}
		if c.ownerGone(&j) {
			// Nobody waits for it to start again.
			return update(func(x *job.Job) {
				x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, ownerGoneReason+" ("+why+")", ""
			})
		}
		return update(func(x *job.Job) {
			x.EndAttempt(now, job.Status{}, job.AttemptAbandoned, why)
			x.State, x.Placement, x.Remote = job.Queued, job.Placement{}, job.Remote{}
			x.Reason, x.ReasonCode = why+"; queued again", "requeued"
		})
	case st.Orphans > 0:
		// The job ended (or its leader died without an exit status) but
		// some of its processes still run, with its GPUs: end them before
		// the GPUs are offered again, as Slurm does when a batch script
		// ends.
		stopped, err := c.workers.Stop(ctx, j, c.orphan, "")
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: end its leftover processes: %w", j.Ref(), err))
			return j, false
		}
		n := stopped.Signalled
		if (st.State == job.Lost || !st.State.Terminal()) && j.Spec.Requeue {
			return update(func(x *job.Job) {
				requeue(x, endedAt(j, st, now), true, fmt.Sprintf("%s; its %d leftover processes were killed; requeued (--requeue)", st.Reason, n), "requeued", st, job.AttemptLost)
			})
		}
		return update(func(x *job.Job) { c.recordEnd(x, j, st, n, now) })
	case st.State == job.Lost && j.Spec.Requeue:
		return update(func(x *job.Job) {
			requeue(x, endedAt(j, st, now), true, st.Reason+"; requeued (--requeue)", "requeued", st, job.AttemptLost)
		})
	case j.ReasonCode == codeGPUFailed && (st.State == job.Failed || st.State == job.Lost):
		// Its GPU failed under it: the reason says so, and with --requeue
		// it goes back to the queue (its processes are gone: this is
		// their end).
		why := st.Reason + "; " + j.Reason
		if j.Spec.Requeue {
			return update(func(x *job.Job) {
				requeue(x, endedAt(j, st, now), true, why+"; requeued (--requeue)", "requeued", st, job.AttemptGPUFailed)
			})
		}
		return update(func(x *job.Job) {
			x.State, x.EndedAt, x.Reason, x.ReasonCode = st.State, endedAt(j, st, now), why, codeGPUFailed
			x.ExitCode, x.Signal = st.ExitCode, st.Signal
		})
	case st.State.Terminal():
		return update(func(x *job.Job) { c.recordEnd(x, j, st, 0, now) })
	}
	return j, false
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
