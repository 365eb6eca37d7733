package control

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

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
