package control

import (
	"errors"
	"fmt"

	"github.com/gssh/gssh/job"
)

// inInventory reports whether host is in the inventory (Options.Known).
func (c *Controller) inInventory(host string) bool { return c.known == nil || c.known(host) }

// notInInventory gives the active jobs placed on a host the inventory no
// longer has a reason that says so (once), in c.act too: they are not
// polled, nor an error of every pass; gssh cancel --force ends them.
func (c *Controller) notInInventory(res *Result) {
	if c.known == nil {
		return // every host is
	}
	for i := range c.act.running {
		j := &c.act.running[i]
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
			c.act.set(&u) // still active: in its place
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
	}
}

// codeNotInInventory is the reason code of an active job whose host the
// inventory no longer has.
const codeNotInInventory = "not_in_inventory"
