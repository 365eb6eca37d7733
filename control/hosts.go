package control

import (
	"context"
	"errors"
	"fmt"
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
	if c.health == nil {
		c.health = map[string]health.Host{}
	}
	clear(c.health)
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

// clock is t as the pass reasons write it: local time, to the second.
func clock(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
