package control

import (
	"context"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// The seams every controller has (Options.Store, Snapshots, Workers;
// Events and Sessions may be absent). The optional ones are defined where
// they are used: HostLedger (hosts.go), DrainBook (drains.go), HostsOf
// (gpus.go), UsageStore (gather.go), Reaper and JobLister (reap.go),
// Keeper and DirRemover (housekeep.go).

// Store is what a pass needs of the job queue (*state.Bolt and *state.Mem
// are ones). Active may return the jobs it could read together with an
// error wrapping state.ErrBadRecord for those it could not: the pass goes
// on with the others and reports the bad ones.
type Store interface {
	Get(id job.ID) (job.Job, error)
	Active() ([]job.Job, error)
	Update(id job.ID, fn func(*job.Job) error) (job.Job, error)
	// UpdateEach is Update of each job of ids (fn given its index) in one
	// transaction: each job's result and error at its index, err the
	// transaction's own (nothing written then). A pass writes its pending
	// reasons through it, one commit for many.
	UpdateEach(ids []job.ID, fn func(i int, x *job.Job) error) (out []job.Job, errs []error, err error)
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

// Event is one change a pass (or a job operation: Cancel, Requeue) made
// to a job or a host. Its kind is one of the event log's
// (eventlog.Kinds), and says which fields are set:
//
//	job_start, job_end, job_requeue, job_preempt, job_unknown,
//	job_adopted, job_gpu_failed
//	                      Job (a job recorded cancelled is a job_end of
//	                      state cancelled, Job.Reason saying by whom)
//	job_result_recovered  Job (its attempt is the one whose result was
//	                      found on Host; a job_end follows)
//	stray_result_ignored  Job: the stray attempt, with how it ended
//	                      (state, exit code); Host its host
//	stray_killed          Job: the stray attempt; Host
//	orphan_reaped         Reaped, Host; Job: the job the process was of
//	foreign_killed        Reaped, Host
//	host_down, host_up    Host, Record
//	gpu_failed            Host, GPU (its record: index, health, since)
//	gpu_healthy           Host, GPU (the record that went)
type Event struct {
	Time time.Time
	Kind eventlog.Kind
	Job  job.Job // as recorded after the change (see above); zero for host events
	Host string
	// Reaped is the process of orphan_reaped and foreign_killed (see
	// reap.go); nil for the others.
	Reaped *Reaped
	// Record is the host's record after host_down and host_up (its last
	// error, since when it failed); nil for the others.
	Record *health.Host
	// GPU is the GPU of gpu_failed and gpu_healthy; nil for the others.
	GPU *health.GPU
}

// Events receives every change a pass makes (service writes them to the
// event log: package eventlog).
type Events interface {
	Emit(Event)
}

// PollBook remembers, across passes, when each host's jobs were last
// polled with an answer (gssh serve's passes share one; a pass of its
// own, as cron's, has none). It is called from one pass at a time.
type PollBook interface {
	LastPolled(host string) time.Time
	Polled(host string, at time.Time)
}
