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
	for i := range running {
		if j := &running[i]; j.State == job.Running && j.Placement.Host != "" && !slices.Contains(names, j.Placement.Host) && !c.elsewhere(j) {
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
	c.reapOrphans(ctx, hosts, res, running) // nothing is queued: running is every active job
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
		at := cmp.Or(h.ProbedAt, now) // a stream's frame counts once, whichever passes read it
		if next, changed := rec.Probed(readings, at); changed {
			u, err := c.ledger.UpdateHost(h.Name, func(x *health.Host) error { *x, _ = x.Probed(readings, at); return nil })
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
		for i := range running {
			j := &running[i]
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
				c.markGPUFailed(*j, fmt.Sprintf("GPU %d (%s) on %s read %s at %s while the job ran", idx, id, h.Name, why, clock(now)), res)
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
