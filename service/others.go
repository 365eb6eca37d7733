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
type otherQueues struct {
	fleet.Snapshots
	fleet   *fleet.Fleet
	cluster string
	timeout time.Duration
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
			for _, x := range others {
				h.Others = append(h.Others, sched.OtherJob{Queue: x.Queue, Job: x.Job})
			}
		})
	}
	wg.Wait()
	return hosts, nil
}
