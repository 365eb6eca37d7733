// Package control runs one scheduling pass: reconcile the jobs on the
// workers (exit files, vanished pids, orphans, walltimes, claims whose
// launch never arrived), ask the planner (sched.Plan) what to start where,
// and carry the plan out: claim, launch, record, and write the pending
// reason of every job left queued.
//
// A pass talks to its surroundings only through the small interfaces below
// (Store, Snapshots, Workers, Events and a clock), so the same code runs
// from the CLI over SSH, and from a test or a simulator with an in-memory
// store, simulated workers and a virtual clock. The caller holds the pass
// lock (LockPass), so a cron pass, a submit-triggered pass and the daemon
// never double-book a GPU. Store writes are one short transaction each and
// never span a worker call.
package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Store is what a pass needs of the job queue (*state.Bolt and *state.Mem
// are ones). Active may return the jobs it could read together with an
// error wrapping state.ErrBadRecord for those it could not: the pass goes
// on with the others and reports the bad ones.
type Store interface {
	Get(id job.ID) (job.Job, error)
	Active() ([]job.Job, error)
	Update(id job.ID, fn func(*job.Job) error) (job.Job, error)
	// Uses returns the GPU uses of the jobs that ended at or after since
	// (fair-share usage); like Active, it may return what it could read
	// with an error wrapping state.ErrBadRecord.
	Uses(since time.Time) ([]job.Use, error)
}

// Snapshots gives every host of the inventory with its facts (labels,
// reserve, drain) and its latest snapshot: a fresh probe of the fleet, a
// report already taken, or a simulated lab.
type Snapshots interface {
	Hosts(ctx context.Context) ([]sched.Host, error)
}

// Workers is the worker side of jobs (launch.Workers over SSH is the real
// one). Start, Abandon and Cancel act on the host the job is placed on.
type Workers interface {
	// Start launches attempt j.Attempt of j and returns what the worker
	// recorded. j.Spec.Timeout is the walltime the attempt runs under (the
	// controller fills in the policy's default_timeout): the worker
	// enforces it too (launch: run.sh's own walltime stop). An error
	// wrapping job.ErrOutcomeUnknown means the job may be running; any
	// other error, that it did not start.
	Start(ctx context.Context, j job.Job) (job.Remote, error)
	// Abandon makes sure attempt j.Attempt never starts unless it has: true
	// when it is abandoned (nothing ran or will), false when its command
	// started.
	Abandon(ctx context.Context, j job.Job) (bool, error)
	// Poll reports the jobs placed on host, by id; a job it says nothing
	// of is left as it is. The jobs are the caller's: Poll only reads
	// them, and keeps none past its return.
	Poll(ctx context.Context, host string, jobs []*job.Job) (map[job.ID]job.Status, error)
	// Stop ends j (SIGTERM, grace, SIGKILL: its session and what carries
	// its GSSH_JOB_ID and GSSH_ATTEMPT) and says how many processes it signalled. why is
	// what the worker should say of the job from then on: job.Cancelled,
	// job.Timeout, job.Preempting, or "" for the leftovers of a job that
	// ended. A job that had ended on its own before the stop (or been
	// stopped by the worker's walltime) is reported in Stopped.Ended: the
	// caller records that end, never the stop.
	Stop(ctx context.Context, j job.Job, grace time.Duration, why job.State) (job.Stopped, error)
}

// Sessions tells whether the gssh run process that owns an interactive
// job (job.Spec.Interactive) is still there; the real one asks the lock
// file that process holds.
type Sessions interface {
	Alive(s job.Interactive) bool
}

// EventKind names what happened to a job.
type EventKind string

// Event kinds.
const (
	JobStarted  EventKind = "job_start"   // launched: running on its GPUs
	JobEnded    EventKind = "job_end"     // reached an end state (Job.State says which)
	JobRequeued EventKind = "job_requeue" // back in the queue: a failed launch, a claim that never arrived
	JobCancel   EventKind = "job_cancel"  // cancelled (Job.Reason says by whom)
	JobPreempt  EventKind = "job_preempt" // signalled for a preemption: preempting (Job.Preempt says for whom)
)

// Event is one change a pass made to a job (or a host).
type Event struct {
	Time time.Time
	Kind EventKind
	Job  job.Job // as recorded after the change; a stray's attempt for StrayKilled; zero for host events
	Host string  // the host, for host events, StrayKilled and the reaper's
	// Reaped is the process of OrphanReaped and ForeignKilled (see
	// reap.go); nil for the others.
	Reaped *Reaped
	// Record is the host's record after HostDown and HostUp (its last
	// error, since when it failed); nil for the others.
	Record *health.Host
	// GPU is the GPU of GPUFailed (its record: index, health, since) and
	// of GPUHealthy (the record that went); nil for the others.
	GPU *health.GPU
}

// Events receives every change a pass makes (service writes them to the
// event log: package eventlog).
type Events interface {
	Emit(Event)
}

// Options are what New needs. Store, Snapshots and Workers are required.
type Options struct {
	Store     Store
	Snapshots Snapshots
	Workers   Workers
	Events    Events // nil: changes are not reported
	// Sessions tells which gssh run processes are still there; nil: all
	// are (no interactive job is ever ended for its owner's absence).
	Sessions Sessions
	// Self is the OS user this controller's passes run as: jobs another
	// user's gssh launched (Remote.By, a lab member's gssh run) are not
	// polled nor stopped over SSH, which reaches this user's logins only:
	// their owner's gssh records them, and a pass ends one, without SSH,
	// when its owner's gssh run is gone (its keeper stops its processes).
	Self   string
	Now    func() time.Time // nil: time.Now
	Policy sched.Policy     // the zero value is sched.DefaultPolicy
	// Cluster is the state's cluster id: GPU processes carrying it (and a
	// job's GSSH_JOB_ID) count against that job's booking.
	Cluster string
	// Grace is the time between SIGTERM and SIGKILL when a job runs past
	// its walltime (0 = DefaultGrace).
	Grace time.Duration
	// OrphanGrace is the time between SIGTERM and SIGKILL for what a job
	// left running when it ended or was lost (0 = DefaultOrphanGrace).
	OrphanGrace time.Duration
	// Terse records pending reasons as codes without words
	// (sched.Input.Terse): for a simulator's thousands of passes.
	Terse bool
	// PollSerially polls the hosts one after another rather than in
	// parallel: for simulated workers, whose poll costs less than a
	// goroutine.
	PollSerially bool
	// Rebalance has every pass plan preemptions even when the policy's
	// rebalance is off (gssh schedule --rebalance: sched.Input.Rebalance).
	Rebalance bool
	// Ledger keeps each host's record of failed contacts and strays; nil:
	// no host is ever called down (a simulator's workers always answer).
	Ledger HostLedger
	// Rules say when a host is down and its jobs lost (the policy's
	// down_after and lost_after; the zero value: health's defaults).
	Rules health.Rules
	// Known tells whether a host is in the inventory; nil: every host is.
	// The jobs of a host that is not are neither polled nor an error of
	// each pass: their reason says so, and gssh cancel --force ends them.
	Known func(host string) bool
	// Reaper kills orphans (and foreign processes where the inventory
	// says so) on the hosts a pass probes; nil: Workers, when it is a
	// Reaper too (launch.Workers is), else none are killed.
	Reaper Reaper
	// Drains are the hosts drained with gssh drain, which every plan
	// reads with the hosts (sched.Host.Drained); nil: none is.
	Drains DrainBook
	// Remover removes ended jobs' directories on the hosts a pass
	// reaches (housekeeping: the policy's keep_job_dirs); nil: Workers,
	// when it is a DirRemover too (launch.Workers is), else none are
	// removed. The store's records are trimmed when it is a
	// state.Keeper (keep_jobs), whatever Remover is.
	Remover DirRemover
}

// Grace periods.
const (
	// DefaultGrace is the walltime grace between SIGTERM and SIGKILL
	// (launch.DefaultGrace, as gssh cancel's).
	DefaultGrace = 10 * time.Second
	// DefaultOrphanGrace is what the processes a job left running when it
	// ended (or was lost) get between SIGTERM and SIGKILL.
	DefaultOrphanGrace = 2 * time.Second
)

// Controller runs passes over one store, one set of hosts and workers.
type Controller struct {
	store   Store
	snaps   Snapshots
	workers Workers
	events  Events
	owners  Sessions
	self    string
	now     func() time.Time
	policy  sched.Policy
	cluster string
	grace   time.Duration
	orphan  time.Duration
	terse   bool
	serial  bool
	rebal   bool
	ledger  HostLedger
	rules   health.Rules
	known   func(string) bool
	reaper  Reaper
	drains  DrainBook
	remover DirRemover
	// Per pass (Pass is not run concurrently on one Controller):
	health    map[string]health.Host // the host records, as this pass knows them
	contacted map[string]bool        // the hosts this pass polled (or reached for strays)
	reached   map[string]bool        // the hosts that answered this pass's polls or probe
}

// New returns a controller, or an error naming a missing seam or a policy
// knob the planner does not know.
func New(opt Options) (*Controller, error) {
	switch {
	case opt.Store == nil:
		return nil, errors.New("control: no store")
	case opt.Snapshots == nil:
		return nil, errors.New("control: no snapshot source")
	case opt.Workers == nil:
		return nil, errors.New("control: no workers")
	}
	if err := opt.Policy.Check(); err != nil {
		return nil, err
	}
	c := &Controller{store: opt.Store, snaps: opt.Snapshots, workers: opt.Workers, events: opt.Events, owners: opt.Sessions, self: opt.Self,
		now: opt.Now, policy: opt.Policy.WithDefaults(), cluster: opt.Cluster, grace: cmp.Or(opt.Grace, DefaultGrace), orphan: cmp.Or(opt.OrphanGrace, DefaultOrphanGrace), terse: opt.Terse, serial: opt.PollSerially, rebal: opt.Rebalance,
		ledger: opt.Ledger, rules: opt.Rules.WithDefaults(), known: opt.Known, drains: opt.Drains}
	if c.now == nil {
		c.now = time.Now
	}
	if c.reaper = opt.Reaper; c.reaper == nil {
		c.reaper, _ = opt.Workers.(Reaper)
	}
	if c.remover = opt.Remover; c.remover == nil {
		c.remover, _ = opt.Workers.(DirRemover)
	}
	if c.events == nil {
		c.events = noEvents{}
	}
	return c, nil
}

// ownerGone reports whether j is interactive and the gssh run process
// that owns it is gone.
func (c *Controller) ownerGone(j *job.Job) bool {
	return j.Spec.Interactive != nil && c.owners != nil && !c.owners.Alive(*j.Spec.Interactive)
}

// elsewhere reports whether j was launched by another user's gssh, with
// its own SSH identity (Remote.By): its worker side is out of reach.
func (c *Controller) elsewhere(j *job.Job) bool {
	return j.Remote.By != "" && j.Remote.By != c.self
}

// endedElsewhere ends, without SSH, the active jobs launched elsewhere
// whose gssh run is gone (its keeper on the worker stopped the job's
// processes when its connection went), and returns the others.
func (c *Controller) endedElsewhere(active []job.Job, res *Result) []job.Job {
	out := active[:0]
	for i := range active {
		if !c.elsewhere(&active[i]) || !c.ownerGone(&active[i]) {
			out = append(out, active[i]) // in place: len(out) <= i
			continue
		}
		j := active[i]
		now := c.now()
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State.Terminal() || x.Remote.By != j.Remote.By || x.Attempt != j.Attempt {
				return errSkip
			}
			x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
			x.Reason = "its gssh run (of " + j.Remote.By + ") went away; its keeper on the worker stopped its processes"
			return nil
		})
		switch {
		case err == nil:
			res.Finished = append(res.Finished, u)
			c.emit(JobEnded, u)
			continue
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
		}
		out = append(out, j)
	}
	return out
}

// ownerGoneReason is the end of an interactive job whose gssh run went
// away before the job started.
const ownerGoneReason = "its gssh run went away before the job started"

type noEvents struct{}

func (noEvents) Emit(Event) {}

// ErrPassBusy means another pass holds the pass lock.
var ErrPassBusy = errors.New("another scheduling pass is running")

// LockPass takes the pass lock at path, waiting up to wait (at least one
// try). It returns the release function, or an error wrapping ErrPassBusy.
func LockPass(ctx context.Context, path string, wait time.Duration) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("pass lock: %w", err)
	}
	return lockPass(ctx, path, wait, 0o600)
}

// LockPassShared is LockPass in shared-lab mode, for the lab's
// directory lab: the lock is the pass account's file there, opened and
// checked as labfile.Dir.OpenFix does (no path a member controls is
// followed; an entry that is not gssh's is replaced, as the pass account
// or root, and report is told), and locked through that descriptor.
func LockPassShared(lab labfile.Dir, report func(labfile.Replaced)) func(context.Context, string, time.Duration) (func(), error) {
	return func(ctx context.Context, path string, wait time.Duration) (func(), error) {
		f, err := lab.OpenLock(path, report)
		if err != nil {
			return nil, fmt.Errorf("pass lock: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		switch err := labfile.Lock(wctx, f, syscall.LOCK_EX, 50*time.Millisecond); {
		case err == nil:
			return func() { f.Close() }, nil
		case errors.Is(err, labfile.ErrLocked) && ctx.Err() == nil:
			f.Close()
			if wait <= 0 {
				return nil, fmt.Errorf("%w (lock %s held)", ErrPassBusy, path)
			}
			return nil, fmt.Errorf("%w (lock %s held for more than %s)", ErrPassBusy, path, wait)
		default:
			f.Close()
			return nil, fmt.Errorf("pass lock %s: %w", path, cmp.Or(ctx.Err(), err))
		}
	}
}

func lockPass(ctx context.Context, path string, wait time.Duration, perm os.FileMode) (func(), error) {
	l := flock.New(path, flock.SetPermissions(perm))
	ok, err := l.TryLock()
	if err == nil && !ok && wait > 0 {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		ok, err = l.TryLockContext(ctx, 50*time.Millisecond)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("pass lock %s: %w", path, err)
	}
	if !ok && wait == 0 {
		return nil, fmt.Errorf("%w (lock %s held)", ErrPassBusy, path)
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
	// Pending are the queued jobs whose pending reason this pass wrote
	// (new, or changed: a cron log prints only those) and those a failed
	// launch put back in the queue, with their reasons.
	Pending []job.Job
	Queued  int     // how many jobs the pass left queued
	Errors  []error // per host or per job problems that did not stop the pass
	// Preempted are the jobs this pass signalled for a preemption (now
	// preempting; Job.Preempt says for whom and why). The pass that
	// finds one gone puts it back in the queue (Requeued).
	Preempted []job.Job
	// Requeued are the preempted jobs this pass found gone (or killed
	// after their grace) and put back in the queue, and the --requeue
	// jobs whose host failed under them, as recorded then (Job.Reason
	// says why); the plan may start them again at once.
	Requeued []job.Job
	// Hosts are the hosts this pass called down, found still down, or
	// found answering again after they were down.
	Hosts []HostNote
	// GPUFailed are the running jobs whose GPU this pass found unhealthy
	// (Job.Reason says which and how).
	GPUFailed []job.Job
	// Unknown are the jobs this pass found on a host called down: they
	// may still run (unknown), their GPUs still booked.
	Unknown []job.Job
	// Strays are the attempts given up on a failed host that this pass
	// found running there when it answered again, and killed.
	Strays []health.Stray
	// Reaped are the GPU processes this pass meant to kill (orphans of
	// gssh jobs; foreign ones where reap_foreign: kill) and what became
	// of each (reap.go).
	Reaped []Reaped
	// Housekeeping is what the pass trimmed (housekeep.go): job records
	// moved to the history, ledger entries pruned, job directories
	// removed on the workers.
	Housekeeping Housekeeping
}

// Pass runs one pass. It probes (asks Snapshots) only when some job is
// queued. The error is one that stopped the pass: the store could not be
// read, or ctx ended (then nothing is planned on a half-done probe); the
// rest are in Result.Errors. A pass that was not stopped ends with its
// housekeeping (housekeep), on the hosts it reached.
func (c *Controller) Pass(ctx context.Context) (Result, error) {
	c.reached = map[string]bool{}
	res, err := c.pass(ctx)
	if err == nil && ctx.Err() == nil {
		c.housekeep(ctx, &res)
	}
	return res, err
}

// pass is Pass but its housekeeping.
func (c *Controller) pass(ctx context.Context) (Result, error) {
	var res Result
	active, err := c.store.Active()
	if err != nil {
		if !errors.Is(err, state.ErrBadRecord) {
			return res, err
		}
		res.Errors = append(res.Errors, err) // the others still get their pass
	}
	c.loadHealth(&res)
	active = c.cancelRequested(ctx, active, &res)
	active = c.reconcile(ctx, active, &res)
	active = c.dropOrphanedRuns(active, &res)

	in := c.input(active)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(in.Queue) == 0 {
		c.watchGPUs(ctx, in.Running, &res)
		return res, nil
	}
	if in.Usage, err = c.Usage(in.Running, in.Now); err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("fair-share usage: %w", err)) // planned on what could be read
	}
	if in.Hosts, err = c.hosts(ctx); err != nil {
		res.Errors = append(res.Errors, err)
		if !errors.Is(err, state.ErrBadRecord) {
			return res, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err // cut short: what was half probed is not planned on
	}
	c.probed(in.Hosts, c.contacted, c.now(), &res)
	c.gpuHealth(in.Hosts, in.Running, c.now(), &res)
	c.reapOrphans(ctx, in.Hosts, active, &res) // in.Queue and in.Running: active, reordered
	if err := c.deps(&in); err != nil {
		res.Errors = append(res.Errors, err)
	}
	c.carryOut(ctx, sched.Plan(in), in.Queue, in.Running, &res)
	return res, nil
}

// dropOrphanedRuns ends the queued interactive jobs whose gssh run is
// gone (nobody is there to attach them: placing one would hold GPUs for
// no one) and returns the active jobs without them.
func (c *Controller) dropOrphanedRuns(active []job.Job, res *Result) []job.Job {
	out := active[:0]
	for _, j := range active {
		if j.State != job.Queued || !c.ownerGone(&j) {
			out = append(out, j)
			continue
		}
		now := c.now()
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Queued {
				return errSkip
			}
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, ownerGoneReason, ""
			return nil
		})
		switch {
		case err == nil:
			res.Finished = append(res.Finished, u)
			c.emit(JobCancel, u)
			continue
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record it cancelled (%s): %w", j.Ref(), ownerGoneReason, err))
		}
		out = append(out, j)
	}
	return out
}

// deps fills in.Deps with the ended jobs in.Queue depends on, read from
// the store. A dependency the store does not hold is left out (the plan
// cancels its dependents); one it cannot read is given as "unreadable"
// (not ended: its dependents wait) and reported.
func (c *Controller) deps(in *sched.Input) error {
	// Every job some queued one waits for, once: a whole array named by
	// many dependents is listed once, its tasks not materialized per
	// dependent.
	var need []job.ID
	of := map[job.ID]job.ID{} // dependency → a job waiting for it (for errors)
	arrays := map[job.Dependency]bool{}
	add := func(dep, waiter job.ID) {
		if _, ok := of[dep]; !ok {
			of[dep] = waiter
			need = append(need, dep)
		}
	}
	for _, j := range in.Queue {
		for _, d := range j.Spec.After {
			if d.Tasks == 0 {
				add(d.Job, j.ID)
				continue
			}
			if key := (job.Dependency{Job: d.Job, Tasks: d.Tasks}); !arrays[key] {
				arrays[key] = true
				for k := range d.Tasks {
					add(d.Job+job.ID(k), j.ID)
				}
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	known := make(map[job.ID]bool, len(in.Queue)+len(in.Running)) // queued or running: in the plan already
	for _, q := range in.Queue {
		known[q.ID] = true
	}
	for _, r := range in.Running {
		known[r.ID] = true
	}
	var errs []error
	for _, id := range need {
		if _, ok := in.Deps[id]; ok || known[id] {
			continue
		}
		dep, err := c.store.Get(id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("job %d: its dependency, job %d: %w", of[id], id, err))
			dep = job.Job{ID: id, State: "unreadable"}
		}
		if in.Deps == nil {
			in.Deps = map[job.ID]job.Job{}
		}
		in.Deps[id] = dep
	}
	return errors.Join(errs...)
}

// Usage is each user's fair-share usage at now (sched.Usage under the
// policy's FairShare), from the uses of the jobs that ended within
// sched.Horizon (the store's ledger) and of the active ones (running up to
// now). With an error wrapping state.ErrBadRecord it is the usage of what
// could be read.
func (c *Controller) Usage(active []job.Job, now time.Time) (map[string]float64, error) {
	if u, ok := c.store.(UsageStore); ok {
		usage, err := u.UsageAt(now, c.policy.FairShare)
		if err != nil && !errors.Is(err, state.ErrBadRecord) {
			return nil, err
		}
		for user, v := range sched.Usage(sched.Uses(active), now, c.policy.FairShare) {
			usage[user] += v
		}
		return usage, err
	}
	ended, err := c.ended(now)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return nil, err
	}
	return sched.Usage(append(slices.Clip(ended), sched.Uses(active)...), now, c.policy.FairShare), err
}

// UsageStore is a Store that works the fair-share usage of its ended jobs
// out itself, as sched.Usage would from Uses (the simulator's keeps it up
// to date as jobs end, so that a simulated week of passes does not read
// its whole ledger every pass). The map returned is the caller's.
type UsageStore interface {
	Store
	UsageAt(now time.Time, fs sched.FairShare) (map[string]float64, error)
}

// ended are the uses of the jobs that ended within the policy's horizon
// of now, from the store's ledger.
func (c *Controller) ended(now time.Time) ([]job.Use, error) {
	return c.store.Uses(now.Add(-sched.Horizon(c.policy.FairShare)))
}

// Policy is the policy the controller plans under, defaults filled in.
func (c *Controller) Policy() sched.Policy { return c.policy }

// input is the planner's input for active (the hosts aside): the queued
// jobs, the ones holding GPUs, the policy and now. Pass and DryRun plan
// alike through it. The queued jobs are moved to the front of active, in
// their order (the store's: by id), and in.Queue is that part of it: a
// queue of thousands is not copied again; active is the caller's no
// more.
func (c *Controller) input(active []job.Job) sched.Input {
	in := sched.Input{Now: c.now(), Policy: c.policy, Cluster: c.cluster, Terse: c.terse, Rebalance: c.rebal}
	queued := partition(active, func(j *job.Job) bool { return j.State == job.Queued })
	running := queued + partition(active[queued:], func(j *job.Job) bool { return j.State.Active() })
	in.Queue, in.Running = active[:queued:queued], active[queued:running:running]
	return in
}

// partition moves the jobs keep accepts to the front of js, in their
// order, and returns how many there are; the others are left after them,
// in no order. Each kept job is written at or before where it was read,
// so nothing is copied but by swaps.
func partition(js []job.Job, keep func(*job.Job) bool) int {
	n := 0
	for i := range js {
		if keep(&js[i]) {
			if i != n {
				js[n], js[i] = js[i], js[n]
			}
			n++
		}
	}
	return n
}

// Trial is what a plan made now says of one job: gssh submit --dry-run's
// and gssh show's answer.
type Trial struct {
	Start     bool          // it would start now
	Placement job.Placement // where, when Start
	// Rejected are the hosts turned down for it, and why (when Start: why
	// not elsewhere).
	Rejected []sched.Rejection
	// Pending says why it would wait, its place in the queue and its
	// reservation, when not Start.
	Pending sched.Pending
	// Forecast is when it is expected to start, when not Start.
	Forecast sched.Forecast
}

// DryRun plans the queue as a pass would now, with j (which is not
// stored; give it an id after every real one) queued behind the jobs of
// its priority, and says what would become of j. It changes nothing: no
// worker is polled and nothing is written.
func (c *Controller) DryRun(ctx context.Context, j job.Job) (Trial, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	j.State, j.SubmittedAt = job.Queued, c.now()
	return c.trial(ctx, append(active, j), j.ID)
}

// Explain plans the queue as a pass would now and says what it makes of
// queued job id: why it waits, where it stands, when it is expected to
// start. Like DryRun, it polls no worker (the jobs are as the last pass
// recorded them) and writes nothing. A job not queued is an error.
func (c *Controller) Explain(ctx context.Context, id job.ID) (Trial, error) {
	active, err := c.store.Active()
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	if !slices.ContainsFunc(active, func(j job.Job) bool { return j.ID == id && j.State == job.Queued }) {
		return Trial{}, fmt.Errorf("job %d is not queued", id)
	}
	return c.trial(ctx, active, id)
}

// trial plans active (with the hosts as Snapshots gives them) and says
// what becomes of job id.
func (c *Controller) trial(ctx context.Context, active []job.Job, id job.ID) (Trial, error) {
	in := c.input(active)
	in.Explain = id
	if err := c.deps(&in); err != nil {
		return Trial{}, err
	}
	ended, err := c.ended(in.Now)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, fmt.Errorf("fair-share usage: %w", err)
	}
	if ended == nil {
		ended = []job.Use{} // the forecast works usage out again as it goes
	}
	in.Usage = sched.Usage(append(slices.Clip(ended), sched.Uses(in.Running)...), in.Now, c.policy.FairShare)
	if in.Hosts, err = c.hosts(ctx); err != nil && !errors.Is(err, state.ErrBadRecord) {
		return Trial{}, err
	}
	plan := sched.Plan(in)
	for _, s := range plan.Starts {
		if s.Job == id {
			return Trial{Start: true, Placement: s.Placement, Rejected: s.Rejected}, nil
		}
	}
	for _, p := range plan.Pending {
		if p.Job == id {
			return Trial{Pending: p, Rejected: p.Rejected, Forecast: sched.ForecastStart(in, id, ended)}, nil
		}
	}
	for _, cn := range plan.Cancels {
		if cn.Job == id { // the next pass cancels it
			return Trial{Pending: sched.Pending{Job: id, Reason: cn.Reason}, Forecast: sched.Forecast{Why: "it never starts: " + cn.Reason.Text}}, nil
		}
	}
	return Trial{}, fmt.Errorf("job %d is not in the plan", id)
}

// ErrNotQueued means a job asked to be held is not queued (launching,
// running or ended).
var ErrNotQueued = errors.New("is not queued")

// ErrNotHeld means a job asked to be released is not held.
var ErrNotHeld = errors.New("is not held")

// Hold keeps queued job id from being placed until Release, recording
// who held it and when. A job held already keeps its first hold. A job
// that is not queued is an error wrapping ErrNotQueued (what to do
// instead is in its words); a missing one, the store's not-found error.
func (c *Controller) Hold(id job.ID, who string) (job.Job, error) {
	now := c.now()
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotQueued, x.State)
		case x.State != job.Queued:
			return fmt.Errorf("job %s %w: it is %s (a hold keeps a queued job from starting; gssh cancel stops a running one)", x.Ref(), ErrNotQueued, x.State)
		case x.Hold == nil:
			x.Hold = &job.Hold{By: who, At: now}
			r := sched.HeldReason(x) // at once, not at the next pass
			x.Reason, x.ReasonCode = r.Text, string(r.Code)
		}
		return nil
	})
}

// Release takes the hold off queued job id; its dependencies and --begin
// still apply. A job not held is an error wrapping ErrNotHeld.
func (c *Controller) Release(id job.ID) (job.Job, error) {
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotHeld, x.State)
		case x.Hold == nil && x.State == job.Queued:
			return fmt.Errorf("job %s %w (gssh hold %s holds it)", x.Ref(), ErrNotHeld, x.Ref())
		case x.Hold == nil:
			return fmt.Errorf("job %s %w (it is %s)", x.Ref(), ErrNotHeld, x.State)
		}
		x.Hold = nil
		x.Reason, x.ReasonCode = "released; waiting for the next scheduling pass", ""
		return nil
	})
}

// Update changes queued job id's spec with fn (scontrol update): its
// priority, walltime, GPU memory, name. fn's error leaves the job as it
// was; a job not queued is an error wrapping ErrNotQueued.
func (c *Controller) Update(id job.ID, fn func(*job.Spec) error) (job.Job, error) {
	return c.store.Update(id, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w: it has ended (%s)", x.Ref(), ErrNotQueued, x.State)
		case x.State != job.Queued:
			return fmt.Errorf("job %s %w: it is %s (update changes queued jobs only)", x.Ref(), ErrNotQueued, x.State)
		}
		return fn(&x.Spec)
	})
}

// ErrNotRunning means a job asked to be requeued is neither launching
// nor running.
var ErrNotRunning = errors.New("is not running")

// Requeue stops job id on its worker (as Cancel does: SIGTERM, grace,
// SIGKILL) and puts it back in the queue under its id, its place in the
// queue kept (ids order it), recording the run it ended in Runs so that
// fair-share counts it; the next start is a new attempt. A launching job
// whose launch is abandoned never ran: it is queued again with no run. A
// job neither launching nor running is an error wrapping ErrNotRunning;
// one that ended meanwhile keeps how it ended.
func (c *Controller) Requeue(ctx context.Context, id job.ID, grace time.Duration, who string) (job.Job, error) {
	for range 10 {
		j, err := c.store.Get(id)
		if err != nil {
			return job.Job{}, err
		}
		if !j.State.Active() {
			return j, fmt.Errorf("job %s %w (it is %s; requeue takes launching and running jobs)", j.Ref(), ErrNotRunning, j.State)
		}
		if j.Spec.Interactive != nil {
			return j, fmt.Errorf("job %s is interactive (gssh run): it cannot go back to the queue; gssh cancel %s ends it", j.Ref(), j.Ref())
		}
		stop, stopped, err := c.stopOnWorker(ctx, j, grace)
		if err != nil {
			return j, err
		}
		now := c.now()
		var ended, moved bool
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			switch {
			case x.State.Terminal():
				ended = true
				return errSkip // ended meanwhile: keep how
			case x.State != j.State || x.Attempt != j.Attempt:
				moved = true
				return errSkip
			case stopped.Ended != nil:
				// It had ended on its worker before the requeue: that
				// outcome stands, and nothing runs it again.
				ended = true
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
				return nil
			}
			requeue(x, now, stop, fmt.Sprintf("requeued by %s (it ran on %s)", who, placementText(x.Placement)), "requeued", job.Status{State: job.Cancelled}, job.AttemptRequeued)
			return nil
		})
		switch {
		case moved:
			continue
		case ended && err == nil:
			c.emit(JobEnded, u)
			return u, fmt.Errorf("job %s %w before the requeue (%s: %s): it is not queued again", u.Ref(), ErrEnded, u.State, u.Reason)
		case ended:
			got, err := c.store.Get(id)
			if err != nil {
				return j, err
			}
			return got, fmt.Errorf("job %s %w (it %s meanwhile)", got.Ref(), ErrEnded, got.State)
		case err == nil:
			c.emit(JobRequeued, u)
		}
		return u, err
	}
	return job.Job{}, fmt.Errorf("job %d: it changed state ten times while being requeued; try again", id)
}

// stopOnWorker ends what j runs on its worker (SIGTERM, grace, SIGKILL),
// for Cancel and Requeue: a launching job's launch is resolved first
// (abandoned, it never runs; started, it is stopped like a running one).
// ran reports whether something ran (and was stopped, or had ended on
// its own: then s.Ended says how).
func (c *Controller) stopOnWorker(ctx context.Context, j job.Job, grace time.Duration) (ran bool, s job.Stopped, err error) {
	if c.elsewhere(&j) {
		// Out of this controller's reach: its owner's gssh run sees the
		// record end and stops it (its keeper does when that gssh run is
		// gone).
		return j.State == job.Running, s, nil
	}
	if j.State != job.Queued && j.Placement.Host != "" && !c.inInventory(j.Placement.Host) {
		return false, s, fmt.Errorf("job %s runs on %s, which is not in the inventory any more: gssh cannot reach it; add the host back, or `gssh cancel --force %s` records the job cancelled (its processes may still run there)", j.Ref(), j.Placement.Host, j.Ref())
	}
	stop := j.State == job.Running || j.State == job.Preempting || j.State == job.Unknown
	if j.State == job.Launching {
		abandoned, err := c.workers.Abandon(ctx, j)
		if err != nil {
			return false, s, unreached(j, err)
		}
		stop = !abandoned
	}
	if stop {
		if s, err = c.workers.Stop(ctx, j, grace, job.Cancelled); err != nil {
			return false, s, unreached(j, err)
		}
	}
	return stop, s, nil
}

// unreached is err of a worker call for j, with what to do when its host
// did not answer.
func unreached(j job.Job, err error) error {
	if errors.Is(err, job.ErrNoContact) {
		return fmt.Errorf("job %s: %w; `gssh cancel --force %s` records it cancelled without reaching the host (its processes there are killed when a pass reaches it again)", j.Ref(), err, j.Ref())
	}
	return fmt.Errorf("job %s: %w", j.Ref(), err)
}

// placementText is "host:0,1".
func placementText(p job.Placement) string {
	idx := make([]string, len(p.Indexes))
	for i, n := range p.Indexes {
		idx[i] = strconv.Itoa(n)
	}
	return p.Host + ":" + strings.Join(idx, ",")
}

// ErrEnded means a job asked to be cancelled has ended already.
var ErrEnded = errors.New("has already ended")

// Cancel stops job id and records it cancelled by who: a queued job at
// once; an active one after its processes got SIGTERM on its worker and,
// after grace, SIGKILL. A job that ended meanwhile keeps how it ended,
// and so does one whose command had ended on its worker before the
// cancel could mark it (no pass had recorded it yet) or that the
// worker's walltime stop had ended: Cancel records that end (its exit
// status, timeout), never a cancel that did not happen; the job returned
// then is not cancelled. An ended job is an error wrapping ErrEnded; a
// missing one, the store's not-found error.
//
// Cancel does not hold the pass lock, so a pass may act on the job
// meanwhile (start an attempt, requeue one). Its record is written only
// if the job is still in the state and attempt Cancel acted on; otherwise
// Cancel looks again and acts on what the job is now. A job cancelled
// while a pass launches it is stopped by that pass (see start).
func (c *Controller) Cancel(ctx context.Context, id job.ID, grace time.Duration, who string) (job.Job, error) {
	for range 10 {
		j, err := c.store.Get(id)
		if err != nil {
			return job.Job{}, err
		}
		if j.State.Terminal() {
			return j, fmt.Errorf("job %s %w (%s)", j.Ref(), ErrEnded, j.State)
		}
		_, stopped, err := c.stopOnWorker(ctx, j, grace)
		if err != nil {
			return j, err
		}
		now := c.now()
		var ended, moved bool
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			switch {
			case x.State.Terminal():
				ended = true // ended meanwhile: keep how
			case x.State != j.State || x.Attempt != j.Attempt:
				moved = true // a pass acted on it meanwhile: look again
				return errSkip
			case stopped.Ended != nil:
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now) // it had ended before the cancel
			default:
				x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, "cancelled by "+who, ""
			}
			return nil
		})
		switch {
		case moved:
			continue
		case err == nil && !ended && stopped.Ended != nil:
			c.emit(JobEnded, u)
		case err == nil && !ended:
			c.emit(JobCancel, u)
		}
		return u, err
	}
	return job.Job{}, fmt.Errorf("job %d: it kept changing while being cancelled; try again", id)
}

// RequestCancel is Cancel without SSH (shared-lab mode, a member's gssh
// cancel): a queued job is cancelled at once; an active one gets a
// recorded request (job.Job.CancelRequested) that the next pass carries
// out, and recorded is true. One transaction either way. An ended job is
// an error wrapping ErrEnded.
func (c *Controller) RequestCancel(id job.ID, grace time.Duration, who string) (j job.Job, recorded bool, err error) {
	now := c.now()
	u, err := c.store.Update(id, func(x *job.Job) error {
		recorded = false
		switch {
		case x.State.Terminal():
			return fmt.Errorf("job %s %w (%s)", x.Ref(), ErrEnded, x.State)
		case x.State == job.Queued:
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, "cancelled by "+who, ""
		case x.CancelRequested == nil:
			x.CancelRequested = &job.CancelRequest{By: who, At: now, Grace: grace}
			recorded = true
		default:
			recorded = true // asked already: the first request stands
		}
		return nil
	})
	if err != nil {
		if got, gerr := c.store.Get(id); gerr == nil {
			u = got
		}
		return u, false, err
	}
	if !recorded {
		c.emit(JobCancel, u)
	}
	return u, recorded, nil
}

// carryOut launches the plan's starts in order, then records the pending
// reasons that changed. queued is sorted by id (input keeps the store's
// order).
func (c *Controller) carryOut(ctx context.Context, plan sched.Decisions, queued, running []job.Job, res *Result) {
	byID := func(id job.ID) job.Job {
		lo, hi := 0, len(queued) // by index: a job is too big to pass around by value
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); queued[m].ID < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return queued[lo]
	}
	res.Queued = len(plan.Pending)
	for _, cn := range plan.Cancels {
		now := c.now()
		u, err := c.store.Update(cn.Job, func(x *job.Job) error {
			if x.State != job.Queued {
				return errSkip // placed or cancelled meanwhile
			}
			x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, cn.Reason.Text, string(cn.Reason.Code)
			return nil
		})
		switch {
		case err == nil:
			res.Finished = append(res.Finished, u)
			c.emit(JobCancel, u)
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %d: record it cancelled (%s): %w", cn.Job, cn.Reason.Text, err))
		}
	}
	c.preempt(ctx, plan.Preempts, running, res)
	for _, s := range plan.Starts {
		j := byID(s.Job)
		if ctx.Err() != nil {
			res.Queued++ // the next pass starts it
			continue
		}
		started, err := c.start(ctx, j, s.Placement)
		switch {
		case err == nil && started.ID == 0: // cancelled meanwhile
		case err != nil && started.State.Terminal(): // failed: job.ErrDirExists
			res.Errors = append(res.Errors, err)
			res.Finished = append(res.Finished, started)
		case err != nil && started.ID != 0:
			res.Errors = append(res.Errors, err)
			res.Pending = append(res.Pending, started) // back in the queue, with the reason
			res.Queued++
		case err != nil:
			res.Errors = append(res.Errors, err)
		default:
			res.Started = append(res.Started, started)
		}
	}
	for _, p := range plan.Pending {
		j := byID(p.Job)
		if j.Reason == p.Reason.Text && j.ReasonCode == string(p.Reason.Code) {
			continue // nothing new to write
		}
		updated, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Queued {
				return errSkip
			}
			x.Reason, x.ReasonCode = p.Reason.Text, string(p.Reason.Code)
			return nil
		})
		switch {
		case err == nil:
			res.Pending = append(res.Pending, updated)
		case !errors.Is(err, errSkip):
			res.Errors = append(res.Errors, fmt.Errorf("job %s: record the pending reason: %w", j.Ref(), err))
		}
	}
}

// errSkip aborts a store update that no longer applies.
var errSkip = errors.New("skip")

// start claims j (launching, with its placement), launches it and records
// where it runs. A failed launch puts the job back in the queue with the
// reason; it is never left in launching by this function. A job cancelled
// while it launched is stopped on its worker at once: nothing runs that
// the queue does not track.
func (c *Controller) start(ctx context.Context, j job.Job, p job.Placement) (job.Job, error) {
	claimed, err := c.store.Update(j.ID, func(x *job.Job) error {
		if x.State != job.Queued {
			return errSkip
		}
		x.State, x.Placement, x.Reason, x.ReasonCode = job.Launching, p, "launching on "+p.Host, ""
		x.Attempt++ // each attempt has a directory of its own on the worker
		x.Remote = job.Remote{}
		for len(x.AttemptHosts) < x.Attempt-1 { // earlier attempts of a gssh that did not record them
			x.AttemptHosts = append(x.AttemptHosts, "")
		}
		x.AttemptHosts = append(x.AttemptHosts[:x.Attempt-1], p.Host) // where housekeeping finds its directory
		return nil
	})
	if errors.Is(err, errSkip) {
		return job.Job{}, nil // cancelled meanwhile
	}
	if err != nil {
		return job.Job{}, fmt.Errorf("job %s: claim: %w", j.Ref(), err)
	}
	if claimed.Spec.Interactive != nil {
		// Its gssh run launches it in the foreground (launch.Attach): the
		// claim books the GPUs; run records it running.
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State != job.Launching || x.Attempt != claimed.Attempt {
				return errSkip
			}
			x.Reason = "placed on " + placementText(p) + ": waiting for its gssh run to start it"
			return nil
		})
		if err != nil {
			return claimed, nil // cancelled meanwhile, or the reason unwritten: the claim stands
		}
		return u, nil
	}
	launched := claimed
	launched.Spec.Timeout = c.walltime(claimed)                               // the worker enforces it too
	launched.Spec.LogLimit = cmp.Or(claimed.Spec.LogLimit, c.policy.LogLimit) // run.sh caps the log
	remote, lerr := c.workers.Start(ctx, launched)
	now := c.now()
	unknown := errors.Is(lerr, job.ErrOutcomeUnknown)
	var cancelled bool
	updated, err := c.store.Update(j.ID, func(x *job.Job) error {
		switch {
		case x.State.Terminal():
			cancelled = true // while it launched
			if lerr == nil {
				x.Remote = remote
			}
		case unknown:
			// It may run: the next pass asks the worker, never launches it
			// again blindly.
			x.Reason, x.ReasonCode = "launch outcome unknown ("+lerr.Error()+"); the next pass asks "+p.Host, "launch_unknown"
		case errors.Is(lerr, job.ErrDirExists):
			// Another attempt would run it twice, if this one is the job's
			// own (see job.ErrDirExists).
			x.State, x.EndedAt = job.Failed, now
			x.Reason, x.ReasonCode = dirExistsReason(x.ID, lerr), codeDirExists
		case lerr != nil:
			x.Reason, x.ReasonCode = "launch failed: "+lerr.Error()+"; the job stays queued", "launch_failed"
			x.EndAttempt(now, job.Status{}, job.AttemptLaunchFailed, x.Reason)
			x.State, x.Placement = job.Queued, job.Placement{}
		default:
			x.State, x.Remote, x.StartedAt, x.Reason = job.Running, remote, now, ""
		}
		return nil
	})
	if err != nil {
		return job.Job{}, fmt.Errorf("job %s: record the launch: %w", j.Ref(), err)
	}
	if cancelled {
		if lerr == nil || unknown {
			// Recorded cancelled while it launched: it may have run for an
			// instant, never longer.
			if _, err := c.workers.Stop(ctx, updated, c.grace, job.Cancelled); err != nil {
				return job.Job{}, fmt.Errorf("job %s was cancelled while it launched; stopping it: %w", j.Ref(), err)
			}
		}
		return job.Job{}, nil
	}
	if unknown {
		return job.Job{}, fmt.Errorf("job %s: %w", j.Ref(), lerr) // neither started nor queued: launching
	}
	if lerr != nil && updated.State.Terminal() {
		c.emit(JobEnded, updated)
		return updated, fmt.Errorf("job %s: %w", j.Ref(), lerr)
	}
	if lerr != nil {
		c.emit(JobRequeued, updated)
		return updated, fmt.Errorf("job %s: %w", j.Ref(), lerr)
	}
	c.emit(JobStarted, updated)
	return updated, nil
}

// codeDirExists is the reason code of a job failed for job.ErrDirExists.
const codeDirExists = "dir_exists"

// dirExistsReason is why job id failed for job.ErrDirExists (lerr).
func dirExistsReason(id job.ID, lerr error) string {
	return fmt.Sprintf("not started: %s: job id %d was handed out before, by a state file this one was copied from (put back from a backup by hand?), or this attempt ran after the copy was taken; "+
		"it is not run again. Resubmit it; gssh state restore puts a backup back with new ids past the workers' directories", lerr, id)
}

func (c *Controller) emit(k EventKind, j job.Job) {
	c.events.Emit(Event{Time: c.now(), Kind: k, Job: j})
}

// onHosts groups the active jobs placed on a host by host, hosts in name
// order, jobs in their order, as pointers into active (a pass over a lab
// of hundreds of running jobs copies none of them).
func onHosts(active []job.Job, skip func(*job.Job) bool) (hosts []string, byHost [][]*job.Job) {
	at := map[string]int{} // host → its place in hosts
	var count []int
	placed := 0
	for i := range active {
		if j := &active[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k, ok := at[j.Placement.Host]
			if !ok {
				k = len(hosts)
				at[j.Placement.Host] = k
				hosts, count = append(hosts, j.Placement.Host), append(count, 0)
			}
			count[k]++
			placed++
		}
	}
	slices.Sort(hosts)
	all := make([]*job.Job, placed)
	byHost = make([][]*job.Job, len(hosts))
	off := 0
	for k, h := range hosts {
		n := count[at[h]]
		byHost[k] = all[off : off : off+n]
		at[h] = k
		off += n
	}
	for i := range active {
		if j := &active[i]; j.State.Active() && j.Placement.Host != "" && !skip(j) {
			k := at[j.Placement.Host]
			byHost[k] = append(byHost[k], j)
		}
	}
	return hosts, byHost
}

// reconcile polls every host with launching or running jobs (one call per
// host, hosts in parallel), records ends, enforces walltimes, and returns
// the active jobs as they are now.
func (c *Controller) reconcile(ctx context.Context, active []job.Job, res *Result) []job.Job {
	active = c.endedElsewhere(active, res)
	active = c.notInInventory(active, res)
	hosts, byHost := onHosts(active, func(j *job.Job) bool { return c.elsewhere(j) || !c.inInventory(j.Placement.Host) })
	// Hosts with strays and no job to poll are reached all the same: the
	// attempts given up there must be killed when they answer.
	c.contacted = map[string]bool{}
	for _, h := range hosts {
		c.contacted[h] = true
	}
	var strayOnly []string
	for _, name := range slices.Sorted(maps.Keys(c.health)) {
		if len(c.health[name].Strays) > 0 && !c.contacted[name] && c.inInventory(name) {
			strayOnly = append(strayOnly, name)
			c.contacted[name] = true
		}
	}
	polled := make([]map[job.ID]job.Status, len(hosts))
	errs := make([]error, len(hosts))
	c.onEach(hosts, func(i int, host string) { polled[i], errs[i] = c.workers.Poll(ctx, host, byHost[i]) })
	now := c.now()
	changed := map[job.ID]job.Job{}
	for i, host := range hosts {
		if errs[i] != nil {
			if errors.Is(errs[i], job.ErrNoContact) {
				maps.Copy(changed, c.noAnswer(ctx, host, errs[i], byHost[i], now, res))
			} else {
				res.Errors = append(res.Errors, errs[i]) // a host that cannot be polled keeps its jobs as they are
			}
			continue
		}
		c.observe(host, "", now, res)
		c.reached[host] = true
		maps.Copy(changed, c.killStrays(ctx, host, false, res))
	}
	for _, host := range strayOnly {
		maps.Copy(changed, c.killStrays(ctx, host, true, res))
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
			if u, settled := changed[j.ID]; !ok || settled && (u.State.Terminal() || u.Attempt != j.Attempt) {
				continue // ended by an earlier attempt's result
			}
			if u, ok := c.apply(ctx, *j, st, now, res); ok {
				changed[j.ID] = u
			}
		}
	}
	if len(changed) == 0 {
		return active
	}
	out := active[:0] // in place: each job is written at or before where it was read
	for i := range active {
		if u, ok := changed[active[i].ID]; ok && !active[i].State.Terminal() {
			active[i] = u // a queued job too: one whose earlier attempt's result was recovered
		}
		if !active[i].State.Terminal() {
			out = append(out, active[i])
		}
	}
	return out
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

// endedAt is when j ended on the controller's clock: its start plus the
// run time the worker measured on its own clock (job.Status.Runtime), so
// two hosts' clocks never mix; for an exit file without a run time, what
// the worker reported (the exit file's mtime, whole seconds, by the
// worker's clock), else now. Never before the start nor after now.
func endedAt(j job.Job, st job.Status, now time.Time) time.Time {
	switch {
	case st.Runtime > 0 && !j.StartedAt.IsZero():
		if e := j.StartedAt.Add(st.Runtime); e.Before(now) {
			return e
		}
		return now
	case st.EndedAt.IsZero() || !st.EndedAt.Before(now):
		return now
	case st.EndedAt.Before(j.StartedAt):
		return j.StartedAt
	}
	return st.EndedAt
}

// walltime is what j may run: its --timeout, else the policy's
// default_timeout (0: no limit).
func (c *Controller) walltime(j job.Job) time.Duration {
	return cmp.Or(j.Spec.Timeout, c.policy.DefaultTimeout)
}

// pastWalltime reports whether j, running, has run longer than its
// walltime by now.
func (c *Controller) pastWalltime(j job.Job, now time.Time) bool {
	w := c.walltime(j)
	return w > 0 && !j.StartedAt.IsZero() && now.Sub(j.StartedAt) > w
}

// apply records what the worker reported of j.
func (c *Controller) apply(ctx context.Context, j job.Job, st job.Status, now time.Time, res *Result) (job.Job, bool) {
	update := func(fn func(*job.Job)) (job.Job, bool) {
		u, err := c.store.Update(j.ID, func(x *job.Job) error {
			if x.State.Terminal() {
				return errSkip // ended meanwhile (cancel)
			}
			fn(x)
			return nil
		})
		if err != nil {
			if !errors.Is(err, errSkip) {
				res.Errors = append(res.Errors, fmt.Errorf("job %s: %w", j.Ref(), err))
			}
			return j, false
		}
		switch {
		case u.State.Terminal():
			res.Finished = append(res.Finished, u)
			c.emit(JobEnded, u)
		case u.State == job.Queued:
			c.emit(JobRequeued, u)
		}
		return u, true
	}
	switch {
	case j.State == job.Preempting:
		return c.preempted(ctx, j, st, now, res)
	case st.State == job.Running && c.pastWalltime(j, now):
		stopped, err := c.workers.Stop(ctx, j, c.grace, job.Timeout)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: walltime: %w", j.Ref(), err))
			return j, false
		}
		return update(func(x *job.Job) {
			if stopped.Ended != nil { // it ended on its own just before
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
				return
			}
			x.State, x.EndedAt, x.Reason = job.Timeout, now, c.timeoutReason(j)
		})
	case st.State == job.Running && c.ownerGone(&j):
		// Its gssh run is gone (killed, its terminal closed) and the
		// keeper did not stop it (the connection is still up, or the
		// keeper was killed too): nobody is at it any more.
		stopped, err := c.workers.Stop(ctx, j, c.grace, job.Cancelled)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: its gssh run is gone: %w", j.Ref(), err))
			return j, false
		}
		return update(func(x *job.Job) {
			if stopped.Ended != nil {
				c.recordEnd(x, j, *stopped.Ended, stopped.Signalled, now)
				return
			}
			x.State, x.EndedAt, x.ReasonCode = job.Cancelled, now, ""
			x.Reason = "its gssh run went away; its processes were stopped"
		})
	case j.Spec.Interactive != nil && j.State == job.Launching && (st.Missing || st.State == job.Launching) && !c.ownerGone(&j):
		// Its gssh run is attaching it: leave it be.
		return j, false
	case st.State == job.Running && j.State == job.Unknown:
		// Its host answers again and the job still runs: adopted, as it
		// was (its GPUs stayed booked).
		u, ok := update(func(x *job.Job) { x.State, x.Reason, x.ReasonCode = job.Running, "", "" })
		if ok {
			c.emit(JobAdopted, u)
		}
		return u, ok
	case st.State == job.Running && j.State == job.Launching:
		// A launch whose outcome was unknown: it did start.
		return update(func(x *job.Job) {
			x.State, x.Reason, x.ReasonCode = job.Running, "", ""
			if x.StartedAt.IsZero() {
				x.StartedAt = now
			}
			if x.Remote.PID == 0 {
				x.Remote.PID, x.Remote.StartTicks = st.PID, st.StartTicks
			}
			if x.Remote.Dir == "" {
				x.Remote.Dir = st.Dir
			}
		})
	case j.State == job.Launching && (st.Missing || st.State == job.Launching || st.Abandoned):
		// The launch did not finish (it never reached the worker, or run.sh
		// has not recorded its pid): abandon the attempt, atomically against
		// run.sh's own start, so that a launch merely slow can never start
		// after the job is queued again.
		abandoned, err := st.Abandoned, error(nil)
		if !abandoned {
			abandoned, err = c.workers.Abandon(ctx, j)
		}
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: abandon an unfinished launch: %w", j.Ref(), err))
			return j, false
		}
		if !abandoned {
			return j, false // run.sh started: the next poll sees its pid
		}
		why := fmt.Sprintf("attempt %d did not start on %s and was abandoned", j.Attempt, j.Placement.Host)
		if st.Abandoned && st.Reason != "" {
			why = fmt.Sprintf("attempt %d on %s: %s", j.Attempt, j.Placement.Host, st.Reason)
		}
		if c.ownerGone(&j) {
			// Nobody waits for it to start again.
			return update(func(x *job.Job) {
				x.State, x.EndedAt, x.Reason, x.ReasonCode = job.Cancelled, now, ownerGoneReason+" ("+why+")", ""
			})
		}
		return update(func(x *job.Job) {
			x.EndAttempt(now, job.Status{}, job.AttemptAbandoned, why)
			x.State, x.Placement, x.Remote = job.Queued, job.Placement{}, job.Remote{}
			x.Reason, x.ReasonCode = why+"; queued again", "requeued"
		})
	case st.Orphans > 0:
		// The job ended (or its leader died without an exit status) but
		// some of its processes still run, with its GPUs: end them before
		// the GPUs are offered again, as Slurm does when a batch script
		// ends.
		stopped, err := c.workers.Stop(ctx, j, c.orphan, "")
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("job %s: end its leftover processes: %w", j.Ref(), err))
			return j, false
		}
		n := stopped.Signalled
		if (st.State == job.Lost || !st.State.Terminal()) && j.Spec.Requeue {
			return update(func(x *job.Job) {
				requeue(x, endedAt(j, st, now), true, fmt.Sprintf("%s; its %d leftover processes were killed; requeued (--requeue)", st.Reason, n), "requeued", st, job.AttemptLost)
			})
		}
		return update(func(x *job.Job) { c.recordEnd(x, j, st, n, now) })
	case st.State == job.Lost && j.Spec.Requeue:
		return update(func(x *job.Job) {
			requeue(x, endedAt(j, st, now), true, st.Reason+"; requeued (--requeue)", "requeued", st, job.AttemptLost)
		})
	case j.ReasonCode == codeGPUFailed && (st.State == job.Failed || st.State == job.Lost):
		// Its GPU failed under it: the reason says so, and with --requeue
		// it goes back to the queue (its processes are gone: this is
		// their end).
		why := st.Reason + "; " + j.Reason
		if j.Spec.Requeue {
			return update(func(x *job.Job) {
				requeue(x, endedAt(j, st, now), true, why+"; requeued (--requeue)", "requeued", st, job.AttemptGPUFailed)
			})
		}
		return update(func(x *job.Job) {
			x.State, x.EndedAt, x.Reason, x.ReasonCode = st.State, endedAt(j, st, now), why, codeGPUFailed
			x.ExitCode, x.Signal = st.ExitCode, st.Signal
		})
	case st.State.Terminal():
		return update(func(x *job.Job) { c.recordEnd(x, j, st, 0, now) })
	}
	return j, false
}

// recordEnd records in x how the worker says j ended (st), by now: its
// state (Lost for a job whose leader died without an exit status), its
// end on the controller's clock (endedAt), the reason (a walltime stop's
// in the controller's words; with the leftover processes killed, when
// leftovers > 0), its exit code and signal. A job found ended with no
// start recorded (a launch whose outcome was unknown) gets the start its
// run time gives.
func (c *Controller) recordEnd(x *job.Job, j job.Job, st job.Status, leftovers int, now time.Time) {
	state, reason := st.State, st.Reason
	if !state.Terminal() {
		state = job.Lost
	}
	if state == job.Timeout {
		reason = c.timeoutReason(j)
	}
	if leftovers > 0 {
		reason = fmt.Sprintf("%s; its %d leftover processes were killed", reason, leftovers)
	}
	x.State, x.EndedAt, x.Reason, x.ReasonCode = state, endedAt(j, st, now), reason, ""
	x.ExitCode, x.Signal = st.ExitCode, st.Signal
	if x.StartedAt.IsZero() { // a launch whose outcome was unknown, found ended
		x.StartedAt = x.EndedAt.Add(-st.Runtime)
	}
}

// timeoutReason is the reason of a job stopped past its walltime (by a
// pass, or by its worker: run.sh's own walltime stop).
func (c *Controller) timeoutReason(j job.Job) string {
	switch {
	case c.walltime(j) == 0: // the policy's default_timeout is gone since
		return "stopped: past its walltime"
	case j.Spec.Timeout == 0:
		return fmt.Sprintf("ran past the default walltime of %s (policy default_timeout): stopped", c.walltime(j))
	}
	return fmt.Sprintf("ran past its walltime of %s: stopped", c.walltime(j))
}

// cancelRequested carries out the cancels recorded for the pass
// (shared-lab mode: job.Job.CancelRequested) and returns the active jobs
// without those it ended. A job it could not stop keeps its request for
// the next pass.
func (c *Controller) cancelRequested(ctx context.Context, active []job.Job, res *Result) []job.Job {
	out := active[:0]
	for _, j := range active {
		r := j.CancelRequested
		if r == nil {
			out = append(out, j)
			continue
		}
		u, err := c.Cancel(ctx, j.ID, r.Grace, r.By)
		switch {
		case err == nil && u.State.Terminal():
			res.Finished = append(res.Finished, u)
			continue
		case errors.Is(err, ErrEnded):
			continue
		case err != nil:
			res.Errors = append(res.Errors, fmt.Errorf("job %s: the cancel %s asked for: %w", j.Ref(), r.By, err))
		}
		out = append(out, j)
	}
	return out
}
