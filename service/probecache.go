package service

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
)

// submitProbeAge is how old a probe of the hosts may be for a submit
// gssh serve answers to check the job against (sched.Validate: could it
// ever fit?): the facts it checks (GPUs, their memory) hardly change, and
// the pass that places the job probes anew. It is what lets a burst of
// submits cost a probe or two, not one each.
const submitProbeAge = 2 * time.Second

// probeCache is the last probe of every host of a fleet that
// recentProbe made, and the one running.
type probeCache struct {
	mu      sync.Mutex
	fleet   *fleet.Fleet // the fleet probed (a SIGHUP makes another)
	at      time.Time    // when it ended
	reports []fleet.Report
	flight  singleflight.Group
}

// recentProbe is a probe of every host of f's inventory that ended at
// most maxAge ago: the last one, or one made now for every caller that
// comes while it runs. Each caller gets a copy it may keep.
func (l *Local) recentProbe(ctx context.Context, f *fleet.Fleet, hosts []inventory.Host, maxAge time.Duration) []fleet.Report {
	c := &l.probes
	c.mu.Lock()
	if c.fleet == f && l.opt.Now().Sub(c.at) <= maxAge && len(c.reports) == len(hosts) {
		out := append([]fleet.Report(nil), c.reports...)
		c.mu.Unlock()
		return out
	}
	c.mu.Unlock()
	ch := c.flight.DoChan("all", func() (any, error) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opt.ProbeTimeout+time.Minute)
		defer cancel()
		reports := f.Probe(pctx, hosts, fleet.ProbeOptions{Timeout: l.opt.ProbeTimeout, MaxAge: l.StreamAge()})
		c.mu.Lock()
		c.fleet, c.at, c.reports = f, l.opt.Now(), reports
		c.mu.Unlock()
		return reports, nil
	})
	select {
	case r := <-ch:
		return append([]fleet.Report(nil), r.Val.([]fleet.Report)...)
	case <-ctx.Done():
		return nil
	}
}
