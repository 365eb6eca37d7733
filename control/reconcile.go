package control

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/gssh/gssh/job"
)

// scratch is what a pass fills anew each time, kept in the controller
// for its room: a simulator's thousands of passes allocate it once.
type scratch struct {
	at     map[string]int // host → its place in hosts
	count  []int
	hosts  []string
	all    []*job.Job
	byHost [][]*job.Job
	polled []map[job.ID]job.Status
	errs   []error
	uses   []job.Use // fair-share: the ended jobs' and the running ones'
	held   []job.Job // the jobs holding GPUs, when others are among c.act.running
}

// onHosts groups the jobs of running (the active jobs not queued) placed
// on a host by host, hosts in name order, jobs in their order, as
// pointers into running (a pass over a lab of hundreds of running jobs
// copies none of them). The slices are sc's, filled anew by the next
// call.
func (sc *scratch) onHosts(running []job.Job, skip func(*job.Job) bool) (hosts []string, byHost [][]*job.Job) {
	if sc.at == nil {
		sc.at = map[string]int{}
	}
	clear(sc.at)
	hosts, count := sc.hosts[:0], sc.count[:0]
	placed := 0
	for i := range running {
		if j := &running[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k, ok := sc.at[j.Placement.Host]
			if !ok {
				k = len(hosts)
				sc.at[j.Placement.Host] = k
				hosts, count = append(hosts, j.Placement.Host), append(count, 0)
			}
			count[k]++
			placed++
		}
	}
	slices.Sort(hosts)
	all := slices.Grow(sc.all[:0], placed)[:placed]
	byHost = slices.Grow(sc.byHost[:0], len(hosts))[:len(hosts)]
	off := 0
	for k, h := range hosts {
		n := count[sc.at[h]]
		byHost[k] = all[off : off : off+n]
		sc.at[h] = k
		off += n
	}
	for i := range running {
		if j := &running[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k := sc.at[j.Placement.Host]
			byHost[k] = append(byHost[k], j)
		}
	}
	sc.hosts, sc.count, sc.all, sc.byHost = hosts, count, all, byHost
	return hosts, byHost
}

// reconcile polls every host with launching or running jobs (one call per
// host, hosts in parallel), records ends, enforces walltimes, and brings
// c.act up to what it recorded.
func (c *Controller) reconcile(ctx context.Context, res *Result) {
	c.endedElsewhere(res)
	c.notInInventory(res)
	sc := &c.scratch
	hosts, byHost := sc.onHosts(c.act.running, func(j *job.Job) bool { return c.elsewhere(j) || !c.inInventory(j.Placement.Host) })
	// Hosts with strays and no job to poll are reached all the same: the
	// attempts given up there must be killed when they answer.
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
	now := c.now()
	var changed map[job.ID]job.Job // most passes change nothing: no map
	note := func(m map[job.ID]job.Job) {
		if len(m) > 0 && changed == nil {
			changed = map[job.ID]job.Job{}
		}
		maps.Copy(changed, m)
	}
	for i, host := range hosts {
		if errs[i] != nil {
			if errors.Is(errs[i], job.ErrNoContact) {
				note(c.noAnswer(ctx, host, errs[i], byHost[i], now, res))
			} else {
				res.Errors = append(res.Errors, errs[i]) // a host that cannot be polled keeps its jobs as they are
			}
			continue
		}
		c.observe(host, "", now, res)
		c.reached[host] = true
		note(c.killStrays(ctx, host, false, res))
	}
	for _, host := range strayOnly {
		note(c.killStrays(ctx, host, true, res))
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
			if u, settled := changed[j.ID]; settled && (u.State.Terminal() || u.Attempt != j.Attempt) {
				continue // ended by an earlier attempt's result
			}
			if u, ok := c.apply(ctx, *j, st, now, res); ok {
				if changed == nil {
					changed = map[job.ID]job.Job{}
				}
				changed[j.ID] = u
			}
		}
	}
	clear(polled) // the maps are the workers'
	clear(errs)
	// A queued job may have changed too: one whose earlier attempt's
	// result was recovered. The jobs changed but not active are left out.
	for id, u := range changed {
		if c.act.has(id) {
			c.act.set(&u)
		}
	}
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
