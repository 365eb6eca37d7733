package service

import (
	"context"
	"sync"
	"time"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
)

// otherQueues is the pass's view of the hosts: the fleet's snapshots, and
// on each host that answered, the live jobs of other gssh queues there
// (launch.OtherQueues: the worker's GPU claims, every login's), so two
// queues never place jobs on the same GPU. A host whose list cannot be read keeps its snapshot (its
// other queues' jobs are then seen through their GPU processes only).
//
// Where the hosts are streamed (Snapshots.MaxAge set: gssh serve), a
// host's list is read at most once per MaxAge and kept in cache: other
// queues start jobs seldom, and a pass on every submit would otherwise
// pay a round trip per host for it. (A list is as old as a probe's
// snapshot may be; a launch of another queue in between is seen as its
// GPU processes at the next frame, as it is between any read and
// launch.)
type otherQueues struct {
	fleet.Snapshots
	fleet   *fleet.Fleet
	cluster string
	timeout time.Duration
	cache   *othersCache // nil: read every time
	now     func() time.Time
}

// othersCache is the last list of other queues' jobs of each host, and
// when it was read.
type othersCache struct {
	mu sync.Mutex
	m  map[string]cachedOthers
}

type cachedOthers struct {
	at   time.Time
	jobs []sched.OtherJob
}

// get is host's list read at most maxAge before now.
func (c *othersCache) get(host string, now time.Time, maxAge time.Duration) ([]sched.OtherJob, bool) {
	if c == nil || maxAge <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[host]
	if !ok || now.Sub(got.at) > maxAge {
		return nil, false
	}
	return got.jobs, true
}

func (c *othersCache) put(host string, at time.Time, jobs []sched.OtherJob) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedOthers{}
	}
	c.m[host] = cachedOthers{at, jobs}
}

func (o otherQueues) Hosts(ctx context.Context) ([]sched.Host, error) {
	hosts, err := o.Snapshots.Hosts(ctx)
	if err != nil {
		return hosts, err
	}
	var wg sync.WaitGroup
	for i := range hosts {
		h := &hosts[i]
		if h.Snapshot.State != gpuinfo.HostOK || len(h.Snapshot.GPUs) == 0 {
			continue
		}
		if jobs, ok := o.cache.get(h.Name, o.now(), o.MaxAge); ok {
			h.Others = append(h.Others, jobs...)
			continue
		}
		sh, err := o.fleet.Shell(h.Name)
		if err != nil {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			others, err := launch.OtherQueues(cctx, sh, h.Name, o.cluster)
			if err != nil {
				return
			}
			var jobs []sched.OtherJob
			for _, x := range others {
				jobs = append(jobs, sched.OtherJob{Queue: x.Queue, Job: x.Job})
			}
			o.cache.put(h.Name, o.now(), jobs)
			h.Others = append(h.Others, jobs...)
		})
	}
	wg.Wait()
	return hosts, nil
}
