// Package control runs one scheduling pass: reconcile the jobs on the
// workers (exit files, vanished pids, orphans, walltimes, claims whose
// launch never arrived), ask the planner (sched.Plan) what to start where,
// and carry the plan out: claim, launch, record, and write the pending
// reason of every job left queued.
//
// A pass talks to its surroundings only through the small interfaces of
// Options (Store, Snapshots, Workers, Events, a clock, and the optional
// capabilities, each a field of its own: nil when absent), so the same
// code runs from the CLI over SSH, and from a test or a simulator with an
// in-memory store, simulated workers and a virtual clock. The caller
// holds the pass lock (LockPass), so a cron pass, a submit-triggered pass
// and the daemon never double-book a GPU. Store writes are one short
// transaction each and never span a worker call.
//
// The files, by concern: the seams (seams.go) and the controller
// (control.go); the pass (pass.go) and its steps: gather the planner's
// input (gather.go), reconcile the jobs with their workers (reconcile.go,
// polled.go), plan (sched.Plan) and carry the plan out (carryout.go,
// launch.go, preempt.go); the job operations (jobops.go); dry runs and
// explanations (dryrun.go); the pass lock (lock.go). Around them: host
// health (hosts.go, strays.go, recover.go), the inventory (inventory.go),
// GPU health (gpus.go), drains (drains.go), interactive and other users'
// jobs (elsewhere.go), orphan reaping (reap.go), housekeeping
// (housekeep.go), and the record changes they share (record.go).
package control

import (
	"cmp"
	"errors"
	"sync"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// Options are what New needs. Store, Snapshots and Workers are required;
// every other seam is optional, nil when the controller has none (each
// field says what is done without it), and only the field gives it: New
// never looks for one in another (a Store that is also a Keeper does no
// housekeeping unless it is Options.Keeper too).
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
	Keep job.Keep
	// LogLimit caps, in bytes, the log of a job launched without its own
	// cap (the policy's log_limit, for Spec.LogLimit; 0: none).
	LogLimit uint64
	// Ports is the range each job launched gets its block of ports from
	// (the policy's ports and ports_per_job); the zero value: none.
	Ports job.Ports
	// Known tells whether a host is in the inventory; nil: every host is.
	// The jobs of a host that is not are neither polled nor an error of
	// each pass: their reason says so, and gssh cancel --force ends them.
	Known func(host string) bool
	// Launches is how many of a pass's launches run at once (0 or 1: one
	// after the other, as a simulation needs them: its clock and events
	// in plan order). Each host's connection caps its own sessions
	// (sshexec's MaxSessions); the outcomes are recorded in plan order.
	Launches int
	// Drains are the hosts drained with gssh drain, which every plan
	// reads with the hosts (sched.Host.Drained); nil: none is.
	Drains DrainBook
	// HostsOf probes only the hosts named: a pass with running jobs and
	// nothing queued reads the health of their GPUs through it; nil: such
	// a pass probes nothing. fleet.Snapshots is one.
	HostsOf HostsOf
	// Changes says which job records the store wrote since a pass read
	// them (the simulator's store, *state.Mem): the controller keeps the
	// active jobs from one pass to the next and reads only those again;
	// nil: every pass reads Store.Active whole.
	Changes ChangeFeed
	// Usage works the fair-share usage of the ended jobs out itself (the
	// simulator's store); nil: sched.Usage over Store.Uses.
	Usage UsageStore
	// Reaper kills orphans (and foreign processes where the inventory
	// says so) on the hosts a pass probes, and for Reap; nil: none are
	// killed (Reap only says whose each process is). launch.Workers is
	// one.
	Reaper Reaper
	// Jobs lists the store's jobs, ended ones included: a reap reads the
	// newest for the sessions of jobs that ended (reap.SessionWindow);
	// nil: only the ended jobs a pass has in hand are weighed.
	// *state.Bolt and *state.Mem are ones.
	Jobs JobLister
	// Keeper trims the store at the end of each pass (housekeeping: the
	// records of jobs that ended keep_jobs ago, the usage ledger, the job
	// directories Remover removes); nil: no housekeeping. *state.Bolt and
	// *state.Mem are ones.
	Keeper Keeper
	// Remover removes ended jobs' directories on the hosts a pass
	// reaches (housekeeping: the policy's keep_job_dirs; with a Keeper
	// only); nil: none are removed. launch.Workers is one.
	Remover DirRemover
	// Polls and PollEvery: with both set, a pass leaves out of its poll
	// the hosts polled less than PollEvery ago whose jobs all run
	// undisturbed (running within their walltime, no cancel asked, not
	// preempting, no stray attempt to kill): gssh serve's passes between those of its timer
	// (a submit's) then reach only what they change, and every job's end
	// is still noticed within PollEvery of the pass after it. A host left
	// out is neither reached nor its jobs changed by the pass.
	Polls     PollBook
	PollEvery time.Duration
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
	drains  DrainBook
	hostsOf HostsOf
	feed    ChangeFeed
	usage   UsageStore
	reaper  Reaper
	jobs    JobLister
	keeper  Keeper
	remover DirRemover
	// The policy's settings other than the planner's (Options.Keep, Options.LogLimit):
	keep            job.Keep
	defaultLogLimit uint64
	ports           job.Ports
	portsMu         sync.Mutex // held from a port block's choice to its claim
	launches        int        // Options.Launches
	polls           PollBook
	pollEvery       time.Duration
	// Per pass (Pass is not run concurrently on one Controller):
	health    map[string]health.Host // the host records, as this pass knows them
	contacted map[string]bool        // the hosts this pass polled (or reached for strays)
	reached   map[string]bool        // the hosts that answered this pass's polls or probe
	// From one pass to the next: the active jobs (readActive), and what
	// a pass fills anew each time, kept for their room.
	act     active
	scratch scratch
	planner sched.Planner // the passes' plans, its buffers kept from one to the next
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
		ledger: opt.Ledger, rules: opt.Rules.WithDefaults(), keep: opt.Keep.WithDefaults(), defaultLogLimit: opt.LogLimit, ports: opt.Ports, known: opt.Known, launches: opt.Launches, drains: opt.Drains,
		hostsOf: opt.HostsOf, feed: opt.Changes, usage: opt.Usage, reaper: opt.Reaper, jobs: opt.Jobs, keeper: opt.Keeper, remover: opt.Remover,
		polls: opt.Polls, pollEvery: opt.PollEvery}
	if c.now == nil {
		c.now = time.Now
	}
	if c.events == nil {
		c.events = noEvents{}
	}
	return c, nil
}

type noEvents struct{}

func (noEvents) Emit(Event) {}

// Policy is the policy the controller plans under, defaults filled in.
func (c *Controller) Policy() sched.Policy { return c.policy }

// emit reports event k of j, as recorded after the change, at now.
func (c *Controller) emit(k eventlog.Kind, j job.Job) {
	c.events.Emit(Event{Time: c.now(), Kind: k, Job: j})
}
