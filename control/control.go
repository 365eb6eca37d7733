// Package control runs one scheduling pass: reconcile the jobs on the
// workers (exit files, vanished pids, walltime), then place queued jobs on
// GPUs (sched) and launch them (launch). A pass holds an exclusive file
// lock, so a cron pass, a submit-triggered pass and the daemon never
// double-book a GPU. Store writes are short and never span SSH I/O.
package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
)

// Store is what a pass needs of the job queue (*state.Bolt is one).
type Store interface {
	ClusterID() (string, error)
	Active() ([]job.Job, error)
	Update(id job.ID, fn func(*job.Job) error) (job.Job, error)
}

// Controller runs passes over one fleet and one store.
type Controller struct {
	Store Store
	Fleet *fleet.Fleet
	Now   func() time.Time
	// ProbeTimeout bounds each host's probe (0 = fleet.DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when a job runs past
	// its walltime (0 = launch.DefaultGrace).
	Grace time.Duration
}

// ErrPassBusy means another pass holds the pass lock.
var ErrPassBusy = errors.New("another scheduling pass is running")

// LockPass takes the pass lock at path, waiting up to wait. It returns the
// release function, or ErrPassBusy.
func LockPass(ctx context.Context, path string, wait time.Duration) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("pass lock: %w", err)
	}
	l := flock.New(path, flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ok, err := l.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("pass lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w (lock %s held for more than %s)", ErrPassBusy, path, wait)
	}
	return func() { l.Unlock() }, nil
}

// Result says what a pass did.
type Result struct {
	Started  []job.Job // launched in this pass
	Finished []job.Job // reached an end state in this pass
	Pending  []job.Job // still queued, with their reasons
	Errors   []error   // per host or per job problems that did not stop the pass
}

// Pass runs one pass. Reports, when not nil, are fresh probes of every host
// (submit has them already); otherwise the pass probes the hosts itself
// when some job is queued. The caller holds the pass lock.
func (c *Controller) Pass(ctx context.Context, reports []fleet.Report) (Result, error) {
	var res Result
	cluster, err := c.Store.ClusterID()
	if err != nil {
		return res, err
	}
	active, err := c.Store.Active()
	if err != nil {
		return res, err
	}
	active = c.reconcile(ctx, cluster, active, &res)

	var queued []job.Job
	for _, j := range active {
		if j.State == job.Queued {
			queued = append(queued, j)
		}
	}
	if len(queued) == 0 {
		return res, nil
	}
	// Priority 0 goes first, then submit order (ids sort by submit time).
	slices.SortStableFunc(queued, func(a, b job.Job) int {
		return cmp.Or(cmp.Compare(a.Spec.Priority, b.Spec.Priority), cmp.Compare(a.ID, b.ID))
	})
	if reports == nil {
		reports = c.Fleet.Probe(ctx, c.Fleet.Inv.Hosts, fleet.ProbeOptions{Timeout: c.ProbeTimeout})
	}
	nodes := Nodes(c.Fleet.Inv, reports, active)
	for _, j := range queued {
		if ctx.Err() != nil {
			break
		}
		d := sched.Place(nodes, Request(j.Spec))
		if !d.OK {
			if j.Reason == d.Reason {
				res.Pending = append(res.Pending, j) // nothing new to write
				continue
			}
			updated, err := c.Store.Update(j.ID, func(x *job.Job) error {
				if x.State != job.Queued {
					return errSkip
				}
				x.Reason = d.Reason
				return nil
			})
			if err == nil {
				res.Pending = append(res.Pending, updated)
			}
			continue
		}
		started, err := c.start(ctx, cluster, j, d.Placement)
		if err != nil {
			res.Errors = append(res.Errors, err)
			if started.ID != 0 {
				res.Pending = append(res.Pending, started) // back in the queue, with the reason
			}
			continue
		}
		for i := range nodes {
			if nodes[i].Name == d.Placement.Host {
				nodes[i].Book(d.Placement, j.Spec.MemPerGPU)
			}
		}
		res.Started = append(res.Started, started)
	}
	return res, nil
}

// orphanGrace is the time orphans of a lost job get between SIGTERM and SIGKILL.
const orphanGrace = 2 * time.Second

// errSkip aborts a store update that no longer applies.
var errSkip = errors.New("skip")

// start claims j (launching, with its placement), launches it and records
// where it runs. A failed launch puts the job back in the queue with the
// reason; it is never left in launching by this function.
func (c *Controller) start(ctx context.Context, cluster string, j job.Job, p job.Placement) (job.Job, error) {
	claimed, err := c.Store.Update(j.ID, func(x *job.Job) error {
		if x.State != job.Queued {
			return errSkip
		}
		x.State, x.Placement, x.Reason = job.Launching, p, "launching on "+p.Host
		return nil
	})
	if err != nil {
		return job.Job{}, fmt.Errorf("job %d: claim: %w", j.ID, err)
	}
	h, _ := c.Fleet.Inv.Lookup(p.Host)
	remote, lerr := launch.Start(ctx, c.Fleet.Runner(h), p.Host, cluster, claimed)
	now := c.Now()
	updated, err := c.Store.Update(j.ID, func(x *job.Job) error {
		if lerr != nil {
			x.State, x.Placement = job.Queued, job.Placement{}
			x.Reason = "launch failed: " + lerr.Error() + "; the job stays queued"
			return nil
		}
		x.State, x.Remote, x.StartedAt, x.Reason = job.Running, remote, now, ""
		return nil
	})
	if err != nil {
		return job.Job{}, fmt.Errorf("job %d: record launch: %w", j.ID, err)
	}
	if lerr != nil {
		return updated, fmt.Errorf("job %d: %w", j.ID, lerr)
	}
	return updated, nil
}

// reconcile polls every host with launching or running jobs (one session
// per host, hosts in parallel), records ends, enforces walltimes, and
// returns the active jobs as they are now.
func (c *Controller) reconcile(ctx context.Context, cluster string, active []job.Job, res *Result) []job.Job {
	byHost := map[string][]job.Job{}
	for _, j := range active {
		if j.State.Active() && j.Placement.Host != "" {
			byHost[j.Placement.Host] = append(byHost[j.Placement.Host], j)
		}
	}
	type polled struct {
		host string
		st   map[job.ID]launch.Status
		err  error
	}
	results := make(chan polled, len(byHost))
	var wg sync.WaitGroup
	for host, jobs := range byHost {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, ok := c.Fleet.Inv.Lookup(host)
			if !ok {
				results <- polled{host, nil, fmt.Errorf("host %s is no longer in the inventory", host)}
				return
			}
			st, err := launch.Poll(ctx, c.Fleet.Runner(h), host, cluster, jobs)
			results <- polled{host, st, err}
		}()
	}
	wg.Wait()
	close(results)
	now := c.Now()
	changed := map[job.ID]job.Job{}
	for p := range results {
		if p.err != nil {
			res.Errors = append(res.Errors, p.err) // a host that cannot be polled keeps its jobs as they are
			continue
		}
		for _, j := range byHost[p.host] {
			st, ok := p.st[j.ID]
			if !ok {
				continue
			}
			if u, ok := c.apply(ctx, cluster, j, st, now, res); ok {
				changed[j.ID] = u
			}
		}
	}
	out := active[:0:0]
	for _, j := range active {
		if u, ok := changed[j.ID]; ok {
			j = u
		}
		if !j.State.Terminal() {
			out = append(out, j)
		}
	}
	return out
}

// apply records what Poll found for j.
func (c *Controller) apply(ctx context.Context, cluster string, j job.Job, st launch.Status, now time.Time, res *Result) (job.Job, bool) {
	update := func(fn func(*job.Job)) (job.Job, bool) {
		u, err := c.Store.Update(j.ID, func(x *job.Job) error {
			if x.State.Terminal() {
				return errSkip // ended meanwhile (cancel)
			}
			fn(x)
			return nil
		})
		if err != nil {
			if !errors.Is(err, errSkip) {
				res.Errors = append(res.Errors, err)
			}
			return j, false
		}
		if u.State.Terminal() {
			res.Finished = append(res.Finished, u)
		}
		return u, true
	}
	switch {
	case st.State == job.Running && j.Spec.Timeout > 0 && !j.StartedAt.IsZero() && now.Sub(j.StartedAt) > j.Spec.Timeout:
		h, _ := c.Fleet.Inv.Lookup(j.Placement.Host)
		grace := cmp.Or(c.Grace, launch.DefaultGrace)
		if _, err := launch.Cancel(ctx, c.Fleet.Runner(h), j.Placement.Host, cluster, j, grace); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %d: walltime: %w", j.ID, err))
			return j, false
		}
		return update(func(x *job.Job) {
			x.State, x.EndedAt = job.Timeout, now
			x.Reason = fmt.Sprintf("ran past its walltime of %s: stopped", j.Spec.Timeout)
		})
	case st.State == job.Running && j.State == job.Launching:
		return update(func(x *job.Job) {
			x.State, x.Reason = job.Running, ""
			if x.StartedAt.IsZero() {
				x.StartedAt = now
			}
		})
	case st.Missing && j.State == job.Launching:
		// Claimed, but the launch never made it to the worker: queue again.
		return update(func(x *job.Job) {
			x.State, x.Placement = job.Queued, job.Placement{}
			x.Reason = "the launch did not reach " + j.Placement.Host + "; queued again"
		})
	case st.Orphans > 0:
		// The job's leader died without an exit status but some of its
		// processes still hold the GPUs: reap them before freeing the GPUs.
		h, _ := c.Fleet.Inv.Lookup(j.Placement.Host)
		n, err := launch.Cancel(ctx, c.Fleet.Runner(h), j.Placement.Host, cluster, j, orphanGrace)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %d: reap orphans: %w", j.ID, err))
			return j, false
		}
		return update(func(x *job.Job) {
			x.State, x.EndedAt = job.Lost, now
			x.Reason = fmt.Sprintf("%s; its %d leftover processes were killed", st.Reason, n)
		})
	case st.State.Terminal():
		ended := now
		if !st.EndedAt.IsZero() && st.EndedAt.Before(now) {
			// When the exit file was written; its mtime has whole seconds,
			// so a job shorter than a second may seem to end before it began.
			ended = st.EndedAt
			if ended.Before(j.StartedAt) {
				ended = j.StartedAt
			}
		}
		return update(func(x *job.Job) {
			x.State, x.EndedAt, x.Reason = st.State, ended, st.Reason
			x.ExitCode, x.Signal = st.ExitCode, st.Signal
		})
	}
	return j, false
}

// Request is the placement request of a job spec.
func Request(s job.Spec) sched.Request {
	return sched.Request{Host: s.Host, Labels: s.Labels, GPUs: s.GPUs, MemPerGPU: s.MemPerGPU}
}

// Nodes builds the scheduler's view: each inventory host with its last
// probe and what active jobs hold there.
func Nodes(inv *inventory.Inventory, reports []fleet.Report, active []job.Job) []sched.Node {
	booked := sched.Bookings(active)
	byName := map[string]fleet.Report{}
	for _, r := range reports {
		byName[r.Host.Name] = r
	}
	nodes := make([]sched.Node, 0, len(inv.Hosts))
	for _, h := range inv.Hosts {
		n := sched.Node{Name: h.Name, Labels: h.Labels, ReservePct: h.ReservePct, Drain: h.Drain, Booked: booked[h.Name]}
		if r, ok := byName[h.Name]; ok {
			n.Snapshot = r.Snapshot
		}
		nodes = append(nodes, n)
	}
	return nodes
}
