package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// HostLedger keeps what passes learned of each host (*state.Bolt and
// *state.Mem are ones): failed contacts, down, and the strays to kill.
// Each method is one short transaction; fn never does I/O.
type HostLedger interface {
	Hosts() (map[string]health.Host, error)
	UpdateHost(name string, fn func(*health.Host) error) (health.Host, error)
}

// HostNote is what a pass says of a host whose contacts fail, or that
// came back: for the pass's output, not an error of the pass.
type HostNote struct {
	Host   health.Host
	Change string // "down" (called down in this pass), "still down", "up" (answered again)
}

// observe records one contact with host at now (why "" for one that
// succeeded), and returns the host's record after it; with no ledger, or
// when the ledger cannot be written (reported), it returns a record of
// one failure or none, never down.
func (c *Controller) observe(host string, why string, now time.Time, res *Result) health.Host {
	if c.ledger == nil {
		return health.Host{Name: host}
	}
	prev := c.health[host]
	if why == "" && prev.Failures == 0 && !prev.Down() {
		return prev // nothing to write: passes keep up hosts off the disk
	}
	h, err := c.ledger.UpdateHost(host, func(h *health.Host) error {
		if why == "" {
			*h = h.Answered(now)
		} else {
			*h = h.Failed(now, why, c.rules)
		}
		return nil
	})
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("host %s: record the contact: %w", host, err))
		return prev
	}
	c.health[host] = h
	switch {
	case why == "" && prev.Down():
		res.Hosts = append(res.Hosts, HostNote{Host: h, Change: "up"})
		c.events.Emit(Event{Time: now, Kind: eventlog.HostUp, Host: host, Record: &h})
	case why == "":
	case h.Down() && !prev.Down():
		res.Hosts = append(res.Hosts, HostNote{Host: h, Change: "down"})
		c.events.Emit(Event{Time: now, Kind: eventlog.HostDown, Host: host, Record: &h})
	case h.Down():
		res.Hosts = append(res.Hosts, HostNote{Host: h, Change: "still down"})
	}
	return h
}

// loadHealth reads every host record for the pass (c.health); an error
// leaves the records it could read and is reported.
func (c *Controller) loadHealth(res *Result) {
	c.health = map[string]health.Host{}
	if c.ledger == nil {
		return
	}
	hs, err := c.ledger.Hosts()
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("host records: %w", err))
	}
	for k, v := range hs {
		c.health[k] = v
	}
}

// noAnswer handles the jobs of host, whose poll failed with a failed
// contact (err wraps job.ErrNoContact): the failure is recorded, and
// once the host is down its running jobs become unknown and, after
// lost_after, lost (or requeued). Interactive jobs are their gssh run's
// (it sees its connection drop) and are left as they are.
func (c *Controller) noAnswer(ctx context.Context, host string, err error, jobs []*job.Job, now time.Time, res *Result) map[job.ID]job.Job {
	h := c.observe(host, err.Error(), now, res)
	if !h.Down() {
		res.Errors = append(res.Errors, fmt.Errorf("%w (failed contact %d in a row, since %s; the host is called down after %d spanning down_after (%s); its jobs are kept as they are)",
			err, h.Failures, clock(h.FailingSince), c.rules.Failures, c.rules.DownAfter))
		return nil
	}
	changed := map[job.ID]job.Job{}
	for _, j := range jobs {
		if j.Spec.Interactive != nil {
			continue
		}
		if h.JobsLost(now, c.rules) {
			if u, ok := c.giveUp(*j, h, now, res); ok {
				changed[j.ID] = u
			}
			continue
		}
		if j.State != job.Running {
			continue // launching: its outcome is asked for when the host answers; preempting: its kill waits too
		}
		u, uerr := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Running || x.Attempt != j.Attempt {
				return errSkip
			}
			x.State, x.ReasonCode = job.Unknown, "host_down"
			x.Reason = fmt.Sprintf("%s has not answered since %s (down since %s): the job may still run, and keeps its GPUs until the host answers, or for lost_after (%s)",
				host, clock(h.FailingSince), clock(h.DownSince), c.rules.LostAfter)
			return nil
		})
		switch {
		case uerr == nil:
			changed[j.ID] = u
			res.Unknown = append(res.Unknown, u)
			c.emit(eventlog.JobUnknown, u)
		case !errors.Is(uerr, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record it unknown: %w", j.Ref(), uerr))
		}
	}
	return changed
}

// giveUp records j, on the host h that has been down for lost_after,
// lost, or back in the queue when it asked for it (--requeue). The
// attempt is first recorded as a stray of the host, so that the copy
// still running there, if any, is killed when the host answers again:
// never two copies of one job.
func (c *Controller) giveUp(j job.Job, h health.Host, now time.Time, res *Result) (job.Job, bool) {
	why := "recorded lost: its host was down for lost_after"
	if j.Spec.Requeue {
		why = "requeued: its host was down for lost_after"
	}
	sh, err := c.addStray(j, now, why)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		return j, false
	}
	if c.ledger != nil {
		c.health[sh.Name] = sh
	}
	lost := fmt.Sprintf("%s stopped answering at %s and was down for lost_after (%s)", h.Name, clock(h.FailingSince), c.rules.LostAfter)
	u, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State.Terminal() || x.Attempt != j.Attempt || x.Placement.Host != j.Placement.Host {
			return errSkip
		}
		if x.Spec.Requeue {
			requeue(x, now, true, lost+"; requeued (if it still runs there, it is killed when the host answers)", "requeued", job.Status{State: job.Lost}, job.AttemptHostLost)
			return nil
		}
		x.State, x.EndedAt, x.ReasonCode = job.Lost, now, codeHostLost
		x.Reason = lost + "; if it still runs there, it is killed when the host answers"
		return nil
	})
	switch {
	case err == nil:
		if u.State == job.Queued {
			res.Requeued = append(res.Requeued, u)
			c.emit(eventlog.JobRequeue, u)
		} else {
			res.Finished = append(res.Finished, u)
			c.emit(eventlog.JobEnd, u)
		}
		return u, true
	case !errors.Is(err, errSkip):
		res.Errors = append(res.Errors, fmt.Errorf("job %s: record it lost: %w", j.Ref(), err))
	}
	return j, false
}

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
	changed := map[job.ID]job.Job{}
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

// inInventory reports whether host is in the inventory (Options.Known).
func (c *Controller) inInventory(host string) bool { return c.known == nil || c.known(host) }

// notInInventory gives the active jobs placed on a host the inventory no
// longer has a reason that says so (once), and returns active: they are
// not polled, nor an error of every pass; gssh cancel --force ends them.
func (c *Controller) notInInventory(active []job.Job, res *Result) []job.Job {
	for i := range active {
		j := &active[i]
		if !j.State.Active() || j.Placement.Host == "" || c.inInventory(j.Placement.Host) || j.ReasonCode == codeNotInInventory {
			continue
		}
		why := fmt.Sprintf("%s is not in the inventory any more: gssh cannot reach it, and the job may still run there; add the host back, or `gssh cancel --force %d` to forget the job", j.Placement.Host, j.ID)
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if !x.State.Active() || x.Placement.Host != j.Placement.Host {
				return errSkip
			}
			x.Reason, x.ReasonCode = why, codeNotInInventory
			return nil
		})
		switch {
		case err == nil:
			*j = u
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
	}
	return active
}

// codeNotInInventory is the reason code of an active job whose host the
// inventory no longer has.
const codeNotInInventory = "not_in_inventory"

// probed records a contact for each host the pass probed but did not
// poll (polled hosts were recorded by their poll).
func (c *Controller) probed(hosts []sched.Host, polled map[string]bool, now time.Time, res *Result) {
	for _, h := range hosts {
		if polled[h.Name] {
			continue
		}
		switch s := h.Snapshot.State; s {
		case gpuinfo.HostTimeout, gpuinfo.HostAuthFailed, gpuinfo.HostKeyMismatch, gpuinfo.HostKeyUnknown:
			if h.Reached {
				c.observe(h.Name, "", now, res) // it answered SSH: the probe itself hung (a stuck GPU)
				c.reached[h.Name] = true
				continue
			}
			c.observe(h.Name, fmt.Sprintf("%s: %s", s, h.Snapshot.Error), now, res)
		case gpuinfo.HostUnreachable, gpuinfo.HostConnectionLost, gpuinfo.HostTransportError:
			c.observe(h.Name, fmt.Sprintf("%s: %s", s, h.Snapshot.Error), now, res)
		case "":
			// not probed (cut short): no contact either way
		default:
			c.observe(h.Name, "", now, res)
			c.reached[h.Name] = true
		}
	}
}

// ForceCancel records j cancelled without reaching its worker (gssh
// cancel --force): for a job whose host is down or no longer in the
// inventory. Its attempt is recorded as a stray of the host, killed if
// the host answers again. who is who asked.
func (c *Controller) ForceCancel(id job.ID, who string) (job.Job, error) {
	j, err := c.store.Get(id)
	if err != nil {
		return job.Job{}, err
	}
	if j.State.Terminal() {
		return j, fmt.Errorf("job %s %w (%s)", j.Ref(), ErrEnded, j.State)
	}
	now := c.now()
	if j.State != job.Queued && j.Placement.Host != "" {
		if _, err := c.addStray(j, now, "cancelled with --force"); err != nil {
			return j, fmt.Errorf("job %s: %w", j.Ref(), err)
		}
	}
	u, err := c.store.Update(id, func(x *job.Job) error {
		if x.State.Terminal() {
			return fmt.Errorf("job %s %w (%s)", x.Ref(), ErrEnded, x.State)
		}
		x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
		x.Reason = "cancelled with --force by " + who
		if j.State != job.Queued && j.Placement.Host != "" {
			x.Reason += "; its processes on " + j.Placement.Host + " may still run (gssh did not reach the host; they are killed if a pass reaches it again)"
		}
		return nil
	})
	if err == nil {
		c.emit(eventlog.JobEnd, u)
	}
	return u, err
}

// clock is t as the pass reasons write it: local time, to the second.
func clock(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

// HostsOf probes only the hosts named (Options.HostsOf; fleet.Snapshots
// is one). A pass with running jobs and nothing queued uses it to read
// the health of the GPUs those jobs hold; without one, such a pass probes
// nothing.
type HostsOf interface {
	HostsOf(ctx context.Context, names []string) ([]sched.Host, error)
}

// codeGPUFailed is the reason code of a running job whose GPU failed.
const codeGPUFailed = "gpu_failed"

// watchGPUs probes the hosts of the running jobs, when nothing is
// queued (a pass that plans probes every host anyway), and applies
// gpuHealth to them.
func (c *Controller) watchGPUs(ctx context.Context, running []job.Job, res *Result) {
	if c.hostsOf == nil || len(running) == 0 {
		return
	}
	var names []string
	for _, j := range running {
		if j.State == job.Running && j.Placement.Host != "" && !slices.Contains(names, j.Placement.Host) && !c.elsewhere(&j) {
			names = append(names, j.Placement.Host)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	hosts, err := c.hostsOf.HostsOf(ctx, names)
	if err != nil || ctx.Err() != nil {
		return // the next pass looks again
	}
	c.gpuHealth(hosts, running, c.now(), res)
	c.reapOrphans(ctx, hosts, running, res) // nothing is queued: running is every active job
}

// gpuHealth records, for each host the pass probed, which GPUs read
// unhealthy (lost, requires reset, error) and which recover, and marks
// the running jobs on a GPU that failed (Job.Reason; the pass that
// records their end requeues them with --requeue). It sets each host's
// Recovering: the GPUs no job is placed on until they read healthy in
// health.HealthyProbes probes in a row.
func (c *Controller) gpuHealth(hosts []sched.Host, running []job.Job, now time.Time, res *Result) {
	if c.ledger == nil {
		return // a simulator's GPUs never fail
	}
	for i := range hosts {
		h := &hosts[i]
		h.Recovering = nil
		if s := h.Snapshot.State; s != gpuinfo.HostOK && s != gpuinfo.HostDegraded {
			continue
		}
		readings := make([]health.Reading, 0, len(h.Snapshot.GPUs))
		bad := map[string]string{} // GPU or MIG UUID → its health, for the jobs
		byIndex := map[int]string{}
		for _, g := range h.Snapshot.GPUs {
			r := health.Reading{Index: g.Index}
			if !g.Schedulable() {
				r.Bad = cmp.Or(string(g.Health), "health unknown")
			}
			readings = append(readings, r)
			byIndex[g.Index] = r.Bad
			for _, k := range append([]string{g.UUID}, migUUIDs(g)...) {
				if k != "" {
					bad[k] = r.Bad
				}
			}
		}
		rec := c.health[h.Name]
		if next, changed := rec.Probed(readings, now); changed {
			u, err := c.ledger.UpdateHost(h.Name, func(x *health.Host) error { *x, _ = x.Probed(readings, now); return nil })
			if err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("host %s: record its GPUs' health: %w", h.Name, err))
				u = next
			} else {
				c.emitGPUs(h.Name, rec, u, now)
			}
			c.health[h.Name], rec = u, u
		}
		if len(rec.GPUs) > 0 {
			h.Recovering = map[int]string{}
			for _, g := range rec.GPUs {
				h.Recovering[g.Index] = "recovering: " + g.Text()
			}
		}
		for _, j := range running {
			if j.State != job.Running || j.Placement.Host != h.Name || j.ReasonCode == codeGPUFailed {
				continue
			}
			for k, id := range j.Placement.GPUs {
				idx := -1
				if k < len(j.Placement.Indexes) {
					idx = j.Placement.Indexes[k]
				}
				why, listed := bad[id]
				if !listed {
					why, listed = byIndex[idx] // its UUID unreadable: a GPU fallen off the bus
				}
				if listed && why == "" {
					continue
				}
				if !listed {
					why = "missing from the probe"
				}
				c.markGPUFailed(j, fmt.Sprintf("GPU %d (%s) on %s read %s at %s while the job ran", idx, id, h.Name, why, clock(now)), res)
				break
			}
		}
	}
}

// emitGPUs reports the GPUs of host whose record came (gpu_failed) or
// went (gpu_healthy) from before to after, by index.
func (c *Controller) emitGPUs(host string, before, after health.Host, now time.Time) {
	var evs []Event
	for k, g := range after.GPUs {
		if _, had := before.GPUs[k]; !had {
			evs = append(evs, Event{Time: now, Kind: eventlog.GPUFailed, Host: host, GPU: &g})
		}
	}
	for k, g := range before.GPUs {
		if _, has := after.GPUs[k]; !has {
			evs = append(evs, Event{Time: now, Kind: eventlog.GPUHealthy, Host: host, GPU: &g})
		}
	}
	slices.SortFunc(evs, func(a, b Event) int { return cmp.Compare(a.GPU.Index, b.GPU.Index) })
	for _, e := range evs {
		c.events.Emit(e)
	}
}

func migUUIDs(g gpuinfo.GPU) []string {
	var out []string
	for _, m := range g.MIG {
		out = append(out, m.UUID)
	}
	return out
}

// markGPUFailed gives running job j the reason its GPU failed.
func (c *Controller) markGPUFailed(j job.Job, why string, res *Result) {
	u, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State != job.Running || x.Attempt != j.Attempt {
			return errSkip
		}
		x.Reason, x.ReasonCode = why, codeGPUFailed
		return nil
	})
	switch {
	case err == nil:
		res.GPUFailed = append(res.GPUFailed, u)
		c.emit(eventlog.JobGPUFailed, u)
	case !errors.Is(err, errSkip):
		res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
	}
}
