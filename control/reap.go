package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Reaper kills GPU processes on a host: the orphans of gssh jobs, and
// foreign processes where the inventory says reap_foreign: kill
// (launch.Workers is one: see launch.Reap for what the worker checks
// before it signals a process). It returns each target's outcome by pid.
type Reaper interface {
	Reap(ctx context.Context, host string, targets []reap.Target, grace time.Duration) (map[int]reap.Outcome, error)
}

// JobLister lists the store's jobs, ended ones included, newest first
// (Options.Jobs; *state.Bolt and *state.Mem are ones): a reap reads the
// newest (state.Filter.Limit) for the sessions of jobs that ended. Like
// Store.Active, it may return what it could read with an error wrapping
// state.ErrBadRecord.
type JobLister interface {
	List(f state.Filter) ([]job.Job, error)
}

// Reaped is one GPU process the reaper meant to kill, and what became of
// it.
type Reaped struct {
	Host    string
	Finding reap.Finding
	// Outcome is what the worker did; "" in a dry run (it would be
	// killed) or when the reap on the host failed (HostReap.Err).
	Outcome reap.Outcome
}

// HostReap is what a reap found and did on one host.
type HostReap struct {
	Host  sched.Host // as probed
	Found reap.Host  // whose each GPU process is, and the invisible memory
	// Reaped are the processes it meant to kill (orphans; foreign ones
	// where Host.ReapForeign), in Found's order.
	Reaped []Reaped
	// Err: the reap on the worker failed (the host could not be reached
	// after its probe); the processes of Reaped are then as they were.
	Err error
}

// reapSlack is what a host's reap may take beyond the orphan grace: a
// session, the checks, the SIGKILL round.
const reapSlack = 30 * time.Second

// recentJobs is how many of the newest jobs a reap reads for the
// sessions of jobs that ended (reap.SessionWindow): a bounded read, and
// the jobs that ended within the window are among them unless the queue
// took that many jobs since.
const recentJobs = 200

// Reap is gssh reap: it tells whose each GPU process of hosts is (their
// snapshots, probed just now by the caller) from the store's jobs, read
// after the probe so that every process seen was launched by an attempt
// the store knows, and, unless dryRun, kills the orphans of gssh jobs and,
// on hosts with reap_foreign: kill, the foreign processes (SIGTERM, the
// orphan grace, SIGKILL), one session per host, hosts in parallel. A host
// that was not probed is left out of the work and returned as it is.
// The error is the store's; with one wrapping state.ErrBadRecord the
// answer is complete but for the processes of the jobs it could not read
// (they are unattributed).
func (c *Controller) Reap(ctx context.Context, hosts []sched.Host, dryRun bool) ([]HostReap, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return nil, err
	}
	out, rerr := c.reapHosts(ctx, hosts, [][]job.Job{active}, nil, dryRun)
	return out, errors.Join(err, rerr)
}

// reapOrphans is the pass's safety net under the leftovers killed when a
// job ends: on the hosts the pass probed, it kills what reap finds to
// kill (see Reap), before the plan, which still counts what those
// processes hold on their GPUs (the snapshot lists them: the plan places
// nothing on that memory, and the next pass sees it free). Each process
// ended is an event; a host whose reap failed is a pass error. active are
// the active jobs, in parts (the queued ones, the others).
func (c *Controller) reapOrphans(ctx context.Context, hosts []sched.Host, res *Result, active ...[]job.Job) {
	if c.reaper == nil {
		return
	}
	done, err := c.reapHosts(ctx, hosts, active, res.Finished, false)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("reap: %w", err))
	}
	for _, h := range done {
		if h.Err != nil {
			res.Errors = append(res.Errors, h.Err)
		}
		res.Reaped = append(res.Reaped, h.Reaped...)
	}
}

// reapHosts classifies and reaps hosts against active (the active jobs,
// in parts) and ended (jobs that ended already in hand).
func (c *Controller) reapHosts(ctx context.Context, hosts []sched.Host, active [][]job.Job, ended []job.Job, dryRun bool) ([]HostReap, error) {
	jobs, err := c.reapJobs(hosts, active, ended)
	now := c.now()
	out := make([]HostReap, len(hosts))
	var wg sync.WaitGroup
	for i := range hosts {
		h := &hosts[i]
		in := reap.Input{Cluster: c.cluster, Jobs: jobs[h.Name], Now: now}
		r := &out[i]
		r.Host, r.Found = *h, reap.Classify(in, h.Snapshot)
		targets := reap.Targets(in, r.Found, h.ReapForeign)
		if len(targets) == 0 {
			continue
		}
		for _, f := range r.Found.Procs {
			if slices.ContainsFunc(targets, func(t reap.Target) bool { return t.PID == f.Proc.PID }) &&
				!slices.ContainsFunc(r.Reaped, func(x Reaped) bool { return x.Finding.Proc.PID == f.Proc.PID }) {
				r.Reaped = append(r.Reaped, Reaped{Host: h.Name, Finding: f})
			}
		}
		if dryRun || c.reaper == nil {
			continue
		}
		kill := func() {
			hctx, cancel := context.WithTimeout(ctx, c.orphan+reapSlack)
			defer cancel()
			got, err := c.reaper.Reap(hctx, h.Name, targets, c.orphan)
			if err != nil {
				r.Err = err
				return
			}
			for k := range r.Reaped {
				r.Reaped[k].Outcome = got[r.Reaped[k].Finding.Proc.PID]
			}
		}
		if c.serial {
			kill()
		} else {
			wg.Go(kill)
		}
	}
	wg.Wait()
	if !dryRun {
		c.emitReaped(out, jobs)
	}
	return out, err
}

// emitReaped reports each process the reap ended.
func (c *Controller) emitReaped(hosts []HostReap, jobs map[string][]job.Job) {
	for _, h := range hosts {
		for k := range h.Reaped {
			x := &h.Reaped[k]
			if x.Outcome != reap.Terminated && x.Outcome != reap.Killed {
				continue
			}
			ev := Event{Time: c.now(), Kind: eventlog.ForeignKilled, Host: h.Host.Name, Reaped: x}
			if x.Finding.Kind == reap.KindOrphan {
				ev.Kind = eventlog.OrphanReaped
				if i := slices.IndexFunc(jobs[h.Host.Name], func(j job.Job) bool { return j.ID == x.Finding.Job }); i >= 0 {
					ev.Job = jobs[h.Host.Name][i]
				}
			}
			c.events.Emit(ev)
		}
	}
}

// reapJobs is, by host, the jobs its processes may be of: the active
// jobs placed there (their sessions), the jobs its processes' GSSH_JOB_IDs
// name (read from the store when not active), and the ended ones in hand
// or among the newest jobs (their sessions, for reap.SessionWindow),
// read only when some process could need them.
func (c *Controller) reapJobs(hosts []sched.Host, active [][]job.Job, ended []job.Job) (map[string][]job.Job, error) {
	want := map[job.ID][]string{} // job id → the hosts whose processes name it
	sessions := false             // some process may be an ended job's by its session
	for _, h := range hosts {
		for _, id := range reap.Wanted(c.cluster, h.Snapshot) {
			want[id] = append(want[id], h.Name)
		}
		sessions = sessions || cleanSessions(h.Snapshot)
	}
	out := map[string][]job.Job{}
	placed := func(j job.Job) {
		if j.Placement.Host != "" && j.Remote.PID > 0 {
			out[j.Placement.Host] = append(out[j.Placement.Host], j)
		}
	}
	found := map[job.ID]bool{}
	for _, part := range active {
		for _, j := range part {
			placed(j)
			for _, h := range want[j.ID] {
				if h != j.Placement.Host || j.Remote.PID <= 0 {
					out[h] = append(out[h], j)
				}
				found[j.ID] = true
			}
		}
	}
	var errs []error
	ids := make([]job.ID, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if found[id] {
			continue
		}
		j, err := c.store.Get(id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			continue // not this queue's job (any more): its processes are unattributed
		case err != nil:
			errs = append(errs, fmt.Errorf("job %d (its processes are unattributed): %w", id, err))
			continue
		}
		for _, h := range want[id] {
			out[h] = append(out[h], j)
		}
	}
	if sessions {
		if c.jobs != nil {
			recent, err := c.jobs.List(state.Filter{Limit: recentJobs})
			if err != nil && !errors.Is(err, state.ErrBadRecord) {
				errs = append(errs, fmt.Errorf("the newest jobs (for the sessions of ended ones): %w", err))
			}
			for _, j := range recent {
				if j.State.Terminal() {
					ended = append(ended, j)
				}
			}
		}
		for _, j := range ended {
			placed(j)
		}
	}
	return out, errors.Join(errs...)
}

// cleanSessions reports whether snap has a process whose environment was
// read and names no job but whose session is known: one an ended job's
// session id may attribute.
func cleanSessions(snap gpuinfo.Snapshot) bool {
	for _, g := range snap.GPUs {
		for _, p := range g.Procs {
			if p.EnvRead && p.JobID == "" && p.SessionID != nil {
				return true
			}
		}
	}
	return false
}
