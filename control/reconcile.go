package control

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/job"
)

// scratch is what a pass fills anew each time, kept in the controller
// for its room: a simulator's thousands of passes allocate it once.
type scratch struct {
	count   []int // by place in active.hosts
	slot    []int // by place in active.hosts: its place in hosts
	hosts   []string
	all     []*job.Job
	byHost  [][]*job.Job
	polled  []map[job.ID]job.Status
	errs    []error
	uses    []job.Use  // fair-share: the ended jobs' and the running ones'
	held    []job.Job  // the jobs holding GPUs, when others are among c.act.running
	changed changes    // what reconcile changed
	seen    []seenText // the planner's reasons, for carryOut
}

// onHosts groups the jobs of a.running (the active jobs not queued) that
// hold GPUs on a host, but those skip skips, by host, hosts in name
// order, jobs in their order, as pointers into a.running (a pass over a
// lab of hundreds of running jobs copies none of them). The slices are
// sc's, filled anew by the next call.
func (sc *scratch) onHosts(a *active, skip func(*job.Job) bool) (hosts []string, byHost [][]*job.Job) {
	n := len(a.hosts.names)
	count := slices.Grow(sc.count[:0], n)[:n]
	slot := slices.Grow(sc.slot[:0], n)[:n]
	clear(count)
	polled := func(i int) bool {
		j := &a.running[i]
		return a.rhost[i] >= 0 && j.State.Active() && !skip(j)
	}
	placed := 0
	for i := range a.running {
		if polled(i) {
			count[a.rhost[i]]++
			placed++
		}
	}
	hosts, byHost = sc.hosts[:0], sc.byHost[:0]
	all := slices.Grow(sc.all[:0], placed)[:placed]
	off := 0
	for _, k := range a.hosts.sorted() {
		if c := count[k]; c > 0 {
			slot[k] = len(hosts)
			hosts, byHost = append(hosts, a.hosts.names[k]), append(byHost, all[off:off:off+c])
			off += c
		}
	}
	for i := range a.running {
		if polled(i) {
			k := slot[a.rhost[i]]
			byHost[k] = append(byHost[k], &a.running[i])
		}
	}
	sc.count, sc.slot, sc.hosts, sc.all, sc.byHost = count, slot, hosts, all, byHost
	return hosts, byHost
}

// reconcile polls every host with launching or running jobs (one call per
// host, hosts in parallel), records ends, enforces walltimes, and brings
// c.act up to what it recorded.
func (c *Controller) reconcile(ctx context.Context, res *Result) {
	c.endedElsewhere(res)
	c.notInInventory(res)
	sc := &c.scratch
	hosts, byHost := sc.onHosts(&c.act, func(j *job.Job) bool { return c.elsewhere(j) || !c.inInventory(j.Placement.Host) })
	// Hosts with strays and no job to poll are reached all the same: the
	// attempts given up there must be killed when they answer.
	now := c.now()
	hosts, byHost = c.leaveOutSteady(hosts, byHost, now)
	if c.contacted == nil {
		c.contacted = map[string]bool{}
	}
	clear(c.contacted)
	for _, h := range hosts {
		c.contacted[h] = true
	}
	var strayOnly []string
	for name, h := range c.health {
		if len(h.Strays) > 0 && !c.contacted[name] && c.inInventory(name) {
			strayOnly = append(strayOnly, name)
		}
	}
	slices.Sort(strayOnly)
	for _, name := range strayOnly {
		c.contacted[name] = true
	}
	polled := slices.Grow(sc.polled[:0], len(hosts))[:len(hosts)]
	errs := slices.Grow(sc.errs[:0], len(hosts))[:len(hosts)]
	sc.polled, sc.errs = polled, errs
	c.onEach(hosts, func(i int, host string) { polled[i], errs[i] = c.workers.Poll(ctx, host, byHost[i]) })
	changed := &sc.changed
	for i, host := range hosts {
		if errs[i] != nil {
			if errors.Is(errs[i], job.ErrNoContact) {
				changed.noteAll(c.noAnswer(ctx, host, errs[i], byHost[i], now, res))
			} else {
				res.Errors = append(res.Errors, errs[i]) // a host that cannot be polled keeps its jobs as they are
			}
			continue
		}
		c.observe(host, "", now, res)
		c.reached[host] = true
		if c.polls != nil {
			c.polls.Polled(host, now)
		}
		changed.noteAll(c.killStrays(ctx, host, false, res))
	}
	for _, host := range strayOnly {
		changed.noteAll(c.killStrays(ctx, host, true, res))
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
			if !ok {
				continue
			}
			if u := changed.of(j.ID); u != nil && (u.State.Terminal() || u.Attempt != j.Attempt) {
				continue // ended by an earlier attempt's result
			}
			if u, ok := c.apply(ctx, *j, st, now, res); ok {
				changed.note(&u)
			}
		}
	}
	clear(polled) // the maps are the workers'
	clear(errs)
	// A queued job may have changed too: one whose earlier attempt's
	// result was recovered. The jobs changed but not active are left out.
	for i := range *changed {
		if u := &(*changed)[i]; c.act.has(u.ID) {
			c.act.set(u)
		}
	}
	clear(*changed)
	*changed = (*changed)[:0]
}

// leaveOutSteady drops from hosts (and byHost, in step) those whose jobs
// need no poll in this pass (Options.Polls, Options.PollEvery): polled
// less than pollEvery before now, every job running undisturbed (within
// its walltime too), and no stray attempt to kill there.
func (c *Controller) leaveOutSteady(hosts []string, byHost [][]*job.Job, now time.Time) ([]string, [][]*job.Job) {
	if c.polls == nil || c.pollEvery <= 0 {
		return hosts, byHost
	}
	steady := func(i int) bool {
		if last := c.polls.LastPolled(hosts[i]); last.IsZero() || now.Sub(last) >= c.pollEvery || len(c.health[hosts[i]].Strays) > 0 {
			return false
		}
		for _, j := range byHost[i] {
			if j.State != job.Running || j.CancelRequested != nil || j.Preempt != nil || c.pastWalltime(*j, now) {
				return false
			}
		}
		return true
	}
	n := 0
	for i := range hosts {
		if !steady(i) {
			hosts[n], byHost[n] = hosts[i], byHost[i]
			n++
		}
	}
	return hosts[:n], byHost[:n]
}

// changes are the records a pass's reconcile changed, the last of each
// job (a few: a linear search finds one).
type changes []job.Job

// note records u, in place of an earlier record of its job.
func (cs *changes) note(u *job.Job) {
	if p := cs.of(u.ID); p != nil {
		*p = *u
		return
	}
	*cs = append(*cs, *u)
}

// noteAll records each of m.
func (cs *changes) noteAll(m map[job.ID]job.Job) {
	for _, u := range m {
		cs.note(&u)
	}
}

// of is the record of job id, nil when it did not change.
func (cs changes) of(id job.ID) *job.Job {
	for i := range cs {
		if cs[i].ID == id {
			return &cs[i]
		}
	}
	return nil
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
