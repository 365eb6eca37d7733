package control

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// DrainBook keeps the hosts administrators drained with gssh drain
// (*state.Bolt and *state.Mem are ones). Drains may return the drains it
// could read with an error wrapping state.ErrBadRecord for the others
// (which it gives as drains in force).
type DrainBook interface {
	Drains() (map[string]sched.Drain, error)
}

// hosts is every host as Snapshots gives it, each with its drain from the
// drain book (sched.Host.Drained). A book read only in part comes with an
// error wrapping state.ErrBadRecord, the hosts complete: the caller plans
// and reports it. A book that cannot be read is an error and no hosts: a
// plan without the drains could place jobs on a host drained for
// maintenance.
func (c *Controller) hosts(ctx context.Context) ([]sched.Host, error) {
	hosts, err := c.snaps.Hosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("host snapshots: %w", err)
	}
	if c.drains == nil {
		return hosts, nil
	}
	ds, err := c.drains.Drains()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return nil, fmt.Errorf("host drains: %w", err)
	}
	if len(ds) > 0 {
		hosts = slices.Clone(hosts) // the source's hosts are its own (a simulator's lab gives the same ones each time)
	}
	for i := range hosts {
		if d, ok := ds[hosts[i].Name]; ok {
			hosts[i].Drained = &d
		}
	}
	if err != nil {
		return hosts, fmt.Errorf("host drains: %w", err)
	}
	return hosts, nil
}
