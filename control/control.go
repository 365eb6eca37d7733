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
	"slices"
	"time"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
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
	// Keep is how long housekeeping keeps ended jobs' records and
	// directories (the policy's keep_jobs and keep_job_dirs; the zero
	// value: the defaults).
	Keep Keep
	// LogLimit caps, in bytes, the log of a job launched without its own
	// cap (the policy's log_limit, for Spec.LogLimit; 0: none).
	LogLimit uint64
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
	// The policy's settings other than the planner's (Options.Keep, Options.LogLimit):
	keep            Keep
	defaultLogLimit uint64
	// Per pass (Pass is not run concurrently on one Controller):
	health    map[string]health.Host // the host records, as this pass knows them
	contacted map[string]bool        // the hosts this pass polled (or reached for strays)
	reached   map[string]bool        // the hosts that answered this pass's polls or probe
}

// New returns a controller, or an error naming a missing seam or a policy
// knob the planner does not know (or a Keep age below 0).
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
	if err := opt.Keep.Check(); err != nil {
		return nil, err
	}
	c := &Controller{store: opt.Store, snaps: opt.Snapshots, workers: opt.Workers, events: opt.Events, owners: opt.Sessions, self: opt.Self,
		now: opt.Now, policy: opt.Policy.WithDefaults(), cluster: opt.Cluster, grace: cmp.Or(opt.Grace, DefaultGrace), orphan: cmp.Or(opt.OrphanGrace, DefaultOrphanGrace), terse: opt.Terse, serial: opt.PollSerially, rebal: opt.Rebalance,
		ledger: opt.Ledger, rules: opt.Rules.WithDefaults(), keep: opt.Keep.WithDefaults(), defaultLogLimit: opt.LogLimit, known: opt.Known, drains: opt.Drains}
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

type noEvents struct{}

func (noEvents) Emit(Event) {}

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

func (c *Controller) emit(k EventKind, j job.Job) {
	c.events.Emit(Event{Time: c.now(), Kind: k, Job: j})
}
