// Package job holds the job record shared by the queue (state), the
// scheduler (sched) and the launcher: what was asked, where it runs, how it
// ended. It has no behaviour beyond small helpers: no I/O.
package job

import (
	"errors"
	"slices"
	"time"
)

// ID is a job id: the state store's sequence, so ids sort in submit order.
type ID uint64

// State is where a job is in its life:
//
//	queued -> launching -> running -> succeeded | failed | cancelled | timeout | lost
//	                        running -> preempting -> queued (same id, the attempt counted)
//	                        running -> unknown (host down) -> running | lost | queued (--requeue)
//
// `launching` is written before the remote launch, so a crash between the
// claim and the launch is found and resolved by the next pass; a launch
// whose outcome is unknown stays `launching` until a pass has asked the
// worker.
type State string

// Job states.
const (
	Queued    State = "queued"
	Launching State = "launching"
	Running   State = "running"
	Succeeded State = "succeeded" // exit status 0
	Failed    State = "failed"    // non-zero exit status, killed by a signal, or could not start (workdir missing)
	Cancelled State = "cancelled" // gssh cancel
	Timeout   State = "timeout"   // ran past Spec.Timeout (walltime)
	Lost      State = "lost"      // pid gone with no exit file: reboot, OOM killer, kill -9
	// Preempting: a preemptible job signalled (SIGTERM) to make room for
	// a job that ranks ahead of it; its GPUs stay booked until a later
	// pass sees it gone (or kills it after its SignalGrace) and puts it
	// back in the queue.
	Preempting State = "preempting"
	// Unknown: the job's host stopped answering (down: failed contacts
	// spanning the policy's down_after) while the job ran. It may still
	// run, so its GPUs stay booked and its use counts; the pass that
	// reaches the host again finds out how it is (running again, or
	// ended), and after the policy's lost_after it is recorded lost (or
	// requeued, with Spec.Requeue).
	Unknown State = "unknown"
)

// DefaultSignalGrace is the time a preempted job gets between SIGTERM and
// SIGKILL when it was submitted without --signal-grace.
const DefaultSignalGrace = 60 * time.Second

// Terminal reports whether s is an end state.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Cancelled, Timeout, Lost:
		return true
	}
	return false
}

// Active reports whether s holds or may soon hold GPUs.
func (s State) Active() bool {
	return s == Launching || s == Running || s == Preempting || s == Unknown
}

// Spec is what the user asked for at submit time. It never changes.
type Spec struct {
	// Argv is the command. With Shell set it has one element, the user's own
	// shell command line, run by `sh -c` on the worker (as `ssh host 'cmd'`
	// would); otherwise each word reaches the job literally.
	Argv  []string `json:"argv"`
	Shell bool     `json:"shell,omitempty"`
	Name  string   `json:"name,omitempty"`
	// Host is an inventory host name, or "auto" (any host).
	Host   string   `json:"host"`
	Labels []string `json:"labels,omitempty"` // the host must carry all of them
	GPUs   int      `json:"gpus"`             // >= 1
	// MemPerGPU is GPU memory per GPU in bytes (--mem, rounded up to whole
	// MiB); 0 means the GPUs are taken exclusively. With MemAuto it was
	// chosen at submit from the same command's past peaks.
	MemPerGPU uint64   `json:"mem_per_gpu_bytes,omitempty"`
	MemAuto   *MemAuto `json:"mem_auto,omitempty"` // --mem auto: how MemPerGPU was chosen
	Workdir   string   `json:"workdir"`            // "~" means the worker's home
	Env       []EnvVar `json:"env,omitempty"`

	// CPUs is how many of the host's CPUs the job books (--cpus, Slurm's
	// --cpus-per-task); 0: none booked, and the job is not pinned.
	CPUs int `json:"cpus,omitempty"`
	// HostMem is the host memory (RAM) in bytes the job books (--host-mem,
	// Slurm's --mem; rounded up to whole MiB); 0: none booked.
	HostMem uint64 `json:"host_mem_bytes,omitempty"`

	// Login runs the command under a login shell on the worker (bash -lc,
	// --login), so that what ~/.profile and ~/.bash_profile set up (conda,
	// a venv, module loads) is there.
	Login    bool          `json:"login,omitempty"`
	Timeout  time.Duration `json:"-"`        // walltime; 0 = none (JSON: timeout_s, see MarshalJSON)
	Priority int           `json:"priority"` // 0 (highest) to 10; default 5
	// After are the jobs this one waits for, each to end as its kind
	// says (--after, --after-any, --after-notok): all of them, as Slurm's
	// --dependency=afterok:1,afterany:2 does. They are older jobs, so no
	// cycle can form.
	After []Dependency `json:"after,omitempty"`
	// Array is the job's place in a job array (--array); nil for a job
	// of its own.
	Array *ArrayTask `json:"array,omitempty"`
	// Begin is the earliest time the job may start (--begin); zero: now.
	Begin time.Time `json:"begin,omitzero"`
	// Interactive is set for a job of gssh run: no pass launches it. A
	// pass places it and leaves it launching; the gssh run process that
	// owns it (Session) then runs it in the foreground over its own SSH
	// session. A pass ends it when that process is gone.
	Interactive *Interactive `json:"interactive,omitempty"`
	// Preemptible lets a rebalancing pass preempt the job (--preemptible):
	// SIGTERM, then SIGKILL after SignalGrace, and back to the queue
	// under its id. Never set on an interactive job.
	Preemptible bool `json:"preemptible,omitempty"`
	// SignalGrace is the time between a preemption's SIGTERM and its
	// SIGKILL (--signal-grace); 0 means DefaultSignalGrace. JSON:
	// signal_grace_s (see MarshalJSON).
	SignalGrace time.Duration `json:"-"`
	// Requeue puts the job back in the queue, under its id with the
	// attempt counted, when its host fails under it (recorded lost after
	// the host was down for lost_after, or its process vanished with no
	// exit status): Slurm's --requeue. Its next attempt gets
	// GSSH_RESTART_COUNT raised; the copy left on the failed host is
	// killed when that host answers again.
	Requeue bool `json:"requeue,omitempty"`
	// LogLimit caps the job's output in its log, in bytes (--log-limit,
	// rounded up to whole MiB; the policy's log_limit when 0 at launch):
	// past it the log ends with a line saying it was truncated, and the
	// rest of the output is read and thrown away (the command never
	// blocks on it). 0: no cap.
	LogLimit uint64            `json:"log_limit_bytes,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"` // for later fields without a schema bump
}

// Grace is the time s's job gets between a preemption's SIGTERM and its
// SIGKILL: SignalGrace, or DefaultSignalGrace when unset.
func (s Spec) Grace() time.Duration {
	if s.SignalGrace > 0 {
		return s.SignalGrace
	}
	return DefaultSignalGrace
}

// Preemption is what a job being preempted records (state preempting):
// for whom, since when, and why.
type Preemption struct {
	For ID `json:"for"` // the waiting job it makes room for
	// At is when the pass sent SIGTERM (the controller's clock): a pass
	// at or after At + Spec.Grace() sends SIGKILL to what is left.
	At time.Time `json:"at"`
	// Reason says why, in words: "preempted for job 12 of alice
	// (priority 4 ranks ahead of 6)".
	Reason string `json:"reason"`
}

// Interactive is what a job of gssh run carries.
type Interactive struct {
	// Session names the gssh run process that owns the job: a random
	// token whose lock file that process holds (flock) for as long as it
	// lives, so a pass can tell it went away (killed, terminal closed)
	// without any clock.
	Session string `json:"session"`
	// PTY: the command runs on a pseudo-terminal (gssh run --pty).
	PTY bool `json:"pty,omitempty"`
	// PID and StartTicks are the gssh run process on the controller
	// (/proc/PID/stat starttime): its lock file removed from under it
	// (a tmp cleaner), it is still taken for alive while it runs.
	PID        int   `json:"pid,omitempty"`
	StartTicks int64 `json:"start_ticks,omitempty"`
}

// DepKind is how a dependency must end, in Slurm's words.
type DepKind string

// Dependency kinds.
const (
	AfterOK    DepKind = "afterok"    // --after: it succeeded (exit status 0)
	AfterAny   DepKind = "afterany"   // --after-any: it ended, however
	AfterNotOK DepKind = "afternotok" // --after-notok: it failed, timed out or was lost
)

// Dependency is one job another waits for, or a whole job array: with
// Tasks > 0, every task of the array Job (ids Job … Job+Tasks−1) must
// end as Kind says (one entry, however large the array).
type Dependency struct {
	Kind  DepKind `json:"kind"`
	Job   ID      `json:"job"`
	Tasks int     `json:"tasks,omitempty"`
}

// Flatten lists each job after names: a whole array's tasks one by one
// (after itself when it names no array).
func Flatten(after []Dependency) []Dependency {
	whole := false
	for _, d := range after {
		whole = whole || d.Tasks > 0
	}
	if !whole {
		return after
	}
	var out []Dependency
	for _, d := range after {
		if d.Tasks == 0 {
			out = append(out, d)
			continue
		}
		for k := range d.Tasks {
			out = append(out, Dependency{Kind: d.Kind, Job: d.Job + ID(k)})
		}
	}
	return out
}

// Met says where a dependency on a job in state s stands: met (the
// dependent may start), or never (it never will be: s is an end state
// other than the kind needs). Neither: the job has not ended yet.
func (d Dependency) Met(s State) (met, never bool) {
	if !s.Terminal() {
		return false, false
	}
	switch d.Kind {
	case AfterOK:
		return s == Succeeded, s != Succeeded
	case AfterNotOK:
		ok := s == Failed || s == Timeout || s == Lost
		return ok, !ok
	}
	return true, false // AfterAny
}

// ArrayTask is one task of a job array (gssh submit --array), as in
// Slurm: the array's id is its first task's job id, and its tasks have
// the consecutive ids Job … Job+Tasks−1, in the order of their indexes.
type ArrayTask struct {
	Job   ID  `json:"job"`             // the array's id (GSSH_ARRAY_JOB_ID)
	Task  int `json:"task"`            // this task's index (GSSH_ARRAY_TASK_ID)
	Tasks int `json:"tasks"`           // how many tasks the array has
	Limit int `json:"limit,omitempty"` // at most this many of them running at once (%N); 0: no limit
}

// Hold is a hold on a queued job (gssh submit --hold, gssh hold): it is
// never placed until released.
type Hold struct {
	By string    `json:"by"` // the user who held it
	At time.Time `json:"at"`
}

// CancelRequest is a cancel recorded for the next pass (shared-lab mode:
// a member's gssh cancel of an active job, which only the pass account
// can stop on its worker).
type CancelRequest struct {
	By    string        `json:"by"` // the user who asked
	At    time.Time     `json:"at"`
	Grace time.Duration `json:"-"` // between SIGTERM and SIGKILL (JSON: grace_s, see MarshalJSON)
}

// EnvVar is one --env K=V, in the order given.
type EnvVar struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Placement is where a job was put.
type Placement struct {
	Host string `json:"host"`
	// GPUs are the GPU (or MIG device) UUIDs given in CUDA_VISIBLE_DEVICES;
	// Indexes the matching nvidia-smi indices, for display (and for GPUs
	// without a UUID, with CUDA_DEVICE_ORDER=PCI_BUS_ID).
	GPUs    []string `json:"gpus"`
	Indexes []int    `json:"indexes"`
	// MIG, for a job on a MIG device, is each unit's MIG device index
	// within its GPU (as gssh gpus shows 0/mig2), -1 for a whole GPU;
	// empty when no unit is a MIG device.
	MIG []int `json:"mig_devices,omitempty"`
	// Share is how many whole GPUs the job counts for in fair-share
	// usage: 1 per GPU taken exclusively (a MIG device: its part of the
	// GPU's memory), the booked fraction of a GPU's memory for a --mem job
	// (8 GiB on an 80 GiB GPU: 0.1). 0 for placements made before shares
	// were recorded (then the planner counts one per GPU).
	Share float64 `json:"gpu_share,omitempty"`
	// CPUs are the ids of the host CPUs the job is pinned to (taskset -c),
	// ascending: as many as Spec.CPUs, none held by another gssh job
	// there. Empty for a job without --cpus, or on a host whose CPU ids
	// are not known (it then runs unpinned).
	CPUs []int `json:"cpus,omitempty"`
	// PortBase and PortCount are the job's own block of TCP ports on its
	// host (GSSH_PORT_BASE, GSSH_PORT_COUNT): no other gssh job running
	// there holds a port of it. 0: none (no port range in the policy).
	PortBase  int `json:"port_base,omitempty"`
	PortCount int `json:"port_count,omitempty"`
}

// Ports is a range of TCP ports handed out per job in blocks: Count
// ports from Lo, then Lo+Count, ..., up to Hi (inclusive). The zero
// value hands out none.
type Ports struct {
	Lo, Hi, Count int
}

// DefaultPorts is the policy's port range when it names none: 1000
// blocks of 10, below Linux's ephemeral ports (32768 and up).
var DefaultPorts = Ports{Lo: 20000, Hi: 29999, Count: 10}

// Blocks is how many blocks p hands out.
func (p Ports) Blocks() int {
	if p.Count <= 0 || p.Hi < p.Lo {
		return 0
	}
	return (p.Hi - p.Lo + 1) / p.Count
}

// ErrOutcomeUnknown marks a launch whose outcome is unknown: the session
// died, timed out or was interrupted after the launch command was sent,
// so the job may be running. Such a job stays launching and is resolved
// from the worker by the next pass; it is never launched again blindly.
var ErrOutcomeUnknown = errors.New("launch outcome unknown")

// ErrDirExists marks a launch that found its attempt's directory
// (~/.gssh/jobs/<cluster>-<id>.<attempt>) on the worker already: made by
// a job the state no longer knows (the state file was put back from an
// older copy, so its ids were handed out again) or by this very attempt
// run after that copy was taken. Nothing was started; launching the job
// again under a new attempt might run it twice, so it is failed instead.
var ErrDirExists = errors.New("its job directory exists already on the worker")

// ErrNoContact marks a worker call that failed because the host could not
// be reached or stopped answering (connect, handshake, timeout, the
// connection lost mid-command, refused credentials): what counts toward
// calling the host down. A command that ran and failed is not one.
var ErrNoContact = errors.New("host did not answer")

// Remote is what the launcher learnt on the worker.
type Remote struct {
	Dir        string `json:"dir"`                   // ~/.gssh/jobs/<cluster-id>-<job-id>.<attempt>, as an absolute path
	PID        int    `json:"pid,omitempty"`         // session leader of the job
	StartTicks int64  `json:"start_ticks,omitempty"` // /proc/PID/stat starttime: tells a reused pid apart
	// By is the OS user whose gssh launched the attempt with its own SSH
	// identity when that is not the account that runs the passes (gssh
	// run of a shared lab's member): its job directory is under that
	// login on the worker, which the passes cannot reach. "": the passes'.
	By string `json:"by,omitempty"`
}

// Job is one job record.
type Job struct {
	ID    ID     `json:"id"`
	User  string `json:"user"` // the OS user who ran gssh submit
	Spec  Spec   `json:"spec"`
	State State  `json:"state"`
	// Reason says why the job is queued (pending reason), or why it ended
	// as it did ("exit status 3", "killed by signal KILL", "workdir /x does
	// not exist on gpu01").
	Reason string `json:"reason,omitempty"`
	// ReasonCode is the short, stable code of a queued job's Reason
	// (sched.Code: "no_free_gpu", "mem", "drained", ...; "launch_failed"),
	// for scripts and metrics; "" when the reason has none.
	ReasonCode string    `json:"reason_code,omitempty"`
	Placement  Placement `json:"placement,omitzero"`
	Remote     Remote    `json:"remote,omitzero"`
	// Attempt counts the job's launch attempts, failed ones included: each
	// gets its own directory on the worker (GSSH_ATTEMPT). 0 is a job never
	// launched, or one launched before attempts were counted (its
	// directory has no .<attempt> suffix). A job whose result was
	// recovered from an earlier attempt (its host answered again after
	// the job was requeued) is that attempt's: the later ones are in
	// Attempts.
	Attempt  int    `json:"attempt,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"` // e.g. "KILL", when killed by one
	// Hold is set while the queued job is held (never placed).
	Hold *Hold `json:"hold,omitempty"`
	// CancelRequested is set on an active job whose cancel the next pass
	// carries out (shared-lab mode).
	CancelRequested *CancelRequest `json:"cancel_requested,omitempty"`
	// Runs are the job's earlier runs, each ended by a requeue (gssh
	// requeue, a preemption): they count in fair-share like any use.
	Runs []Use `json:"runs,omitempty"`
	// Restarts counts the requeues of the job after it had started (a
	// preemption, gssh requeue of a running job), as Slurm's
	// SLURM_RESTART_COUNT does: its next attempt gets
	// GSSH_RESTART_COUNT=Restarts.
	Restarts int `json:"restarts,omitempty"`
	// Preempt is set while the job is preempting: signalled, its GPUs
	// still booked until a pass sees it gone.
	Preempt *Preemption `json:"preempt,omitempty"`

	// Attempts are the job's earlier launch attempts, in order, each as
	// it ended before the job went on to its next one (a requeue, a
	// preemption, a host or GPU that failed under it, a launch that
	// failed or was abandoned) or, once an earlier attempt's result was
	// recovered from a host that answered again, the later attempt that
	// result superseded. The job's own fields (Attempt, Placement, Remote,
	// StartedAt, EndedAt, State) are its current or last attempt:
	// AllAttempts lists both. Empty for a job of a gssh before attempts
	// were recorded (Runs still holds its earlier runs).
	Attempts []Attempt `json:"attempts,omitempty"`
	// AttemptHosts is the host each launch attempt was placed on, in
	// order: attempt k's is AttemptHosts[k-1] ("" where a gssh before
	// they were recorded launched it). Housekeeping finds the job's
	// directories of every attempt by it (see Housekept).
	AttemptHosts []string `json:"attempt_hosts,omitempty"`
	// Housekept is what housekeeping did with the ended job's directories
	// on its workers (its log with them), keep_job_dirs after it ended;
	// nil until then.
	Housekept *Housekept `json:"housekept,omitempty"`

	// GPUUse is what gssh serve saw the job use of its GPUs while it ran
	// (its samples every 10 s of the GPU streams); nil when it was never
	// sampled (no gssh serve, or a job too short for a sample).
	GPUUse *GPUUse `json:"gpu_use,omitempty"`

	SubmittedAt time.Time `json:"submitted_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
}

// MemAuto is how --mem auto chose a job's MemPerGPU: the highest peak of
// the same user's recent ended runs of the same command, and a margin.
type MemAuto struct {
	From []ID   `json:"from,omitempty"` // the jobs whose peaks it read (none: no history, whole GPUs)
	Peak uint64 `json:"peak_bytes,omitempty"`
}

// MemAutoMargin is what --mem auto adds to the highest past peak.
const MemAutoMargin = 0.15

// GPUUse is a job's use of its GPUs over its runs, as sampled.
type GPUUse struct {
	// PeakBytes is the most GPU memory its processes used on one of its
	// GPUs (or MIG devices) in a sample: what --mem books (the
	// processes' used_gpu_memory).
	PeakBytes uint64 `json:"peak_memory_bytes"`
	// UtilPct is its GPUs' mean utilization.gpu over the samples that
	// read one, 0-100; UtilSamples how many did (0: none could, as on
	// MIG devices, which report none: UtilPct is then 0 and unknown).
	UtilPct     float64 `json:"utilization_pct"`
	UtilSamples int     `json:"utilization_samples"`
	Samples     int     `json:"samples"` // memory samples taken
	// IdleSince is when its GPUs began reading 0 % utilization in every
	// sample since (zero: busy in the last one); Idle that this has
	// lasted the policy's idle_after (the job holds GPUs it does not use).
	IdleSince time.Time `json:"idle_since,omitzero"`
	Idle      bool      `json:"idle,omitempty"`
}

// Housekept is what a pass's housekeeping did with an ended job's
// directories on its workers (~/.gssh/jobs/<cluster>-<id>.<attempt>, one
// per attempt): removed, log included, or left there and why.
type Housekept struct {
	At time.Time `json:"at"` // when (the controller's clock)
	// Removed counts the directories removed; Bytes is what they held
	// (du -sk on the worker, in bytes; 0 when none was there).
	Removed int    `json:"removed"`
	Bytes   uint64 `json:"bytes,omitempty"`
	// Kept says why some directories were left where they are ("" when
	// none was): "its host gpu03 is no longer in the inventory", ...
	Kept string `json:"kept,omitempty"`
}

// WorkerDir names the directory of one launch attempt of a job on a
// worker, for its removal (control.DirRemover): Dir is the absolute path
// recorded at launch (Remote.Dir), "" when none was (the attempt's
// default, launch.DirName under the login's home).
type WorkerDir struct {
	Job     ID
	Attempt int
	Dir     string
	User    string // the job's owner (Job.User): a run_as: sudo host removes it as them
}

// DirRemoval is what removing one job directory on a worker found
// (control.DirRemover).
type DirRemoval struct {
	// Gone: there was no such directory (removed by hand, or never made:
	// an attempt that did not reach its worker).
	Gone bool
	// Bytes is what it held (du -sk, in bytes) before it was removed.
	Bytes uint64
	// Err says why it could not be removed ("" when it was, or was gone).
	Err string
}

// Status is what a worker reports of one job at one look (launch.Poll
// reads it from the job's directory; a simulated worker makes it up).
type Status struct {
	// State is Running, Launching (the directory exists but the job has not
	// recorded its pid yet), Succeeded, Failed, Cancelled or Lost.
	State    State
	ExitCode *int
	Signal   string // when the exit status was 128+N: signal N's name ("TERM")
	Reason   string
	// Missing: the job directory does not exist on the worker (a job
	// claimed but never launched, or a directory someone removed).
	Missing bool
	// Orphans counts the job's processes still running although its
	// session leader is gone without an exit status (kill -9 of run.sh),
	// or although it ended (children it left behind): they must be reaped
	// before the job's GPUs are given to another.
	Orphans int
	// Abandoned: the attempt was abandoned before its command started (a
	// pass found its launch unfinished); it never runs.
	Abandoned bool
	// PID and StartTicks of a running job's session leader, as its pid
	// file says, and its directory (absolute): for a job whose launch
	// outcome was unknown.
	PID        int
	StartTicks int64
	Dir        string
	// EndedAt is when the job ended by the worker's clock (the exit file's
	// mtime, whole seconds), when known.
	EndedAt time.Time
	// Runtime is how long the command ran, end − start on the worker's own
	// clock (run.sh reads /proc/uptime before and after it; 10 ms
	// resolution), when the exit file records it (0: not known, such as
	// an exit file of a gssh before runtimes were recorded). The controller
	// stores the job's end as its own start time + Runtime, so durations
	// never mix two hosts' clocks.
	Runtime time.Duration
}

// Stopped is what a stop of a job (control.Workers.Stop) found and did
// on its worker.
type Stopped struct {
	// Signalled counts the processes it sent a signal to.
	Signalled int
	// Ended is set when the job had already ended when the stop came: its
	// command exited first (it won the job directory's end gate, see
	// launch), or the worker's own walltime stop did. It says how, as a
	// poll would (an exit status with its run time, or Timeout); the stop
	// then marked nothing and only ended what the job left running
	// (counted in Signalled). nil: the stop is what ended the job.
	Ended *Status
}

// Use is what one job used of the GPUs, for fair-share usage: who, from
// when to when (the controller's clock), and how many whole GPUs' worth.
type Use struct {
	User    string    `json:"user"`
	Started time.Time `json:"started"`
	// Ended is when it ended; zero while it runs (then it counts up to the
	// time usage is computed for).
	Ended time.Time `json:"ended,omitzero"`
	// Share is the whole GPUs it counts for: Placement.Share, or one per
	// GPU of its placement when no share was recorded.
	Share float64 `json:"share"`
}

// Use is j's GPU use; ok is false for a job that never started (it used
// nothing), and for one whose run is among its Runs already (a result
// recovered from an attempt that was requeued when its host stopped
// answering: that run, booked until then, is counted there). A job not
// ended yet has a zero Ended.
func (j Job) Use() (u Use, ok bool) {
	if j.StartedAt.IsZero() || slices.ContainsFunc(j.Runs, func(r Use) bool { return r.Started.Equal(j.StartedAt) && r.Ended.After(r.Started) }) {
		return Use{}, false
	}
	u = Use{User: j.User, Started: j.StartedAt, Share: j.Placement.Share}
	if j.State.Terminal() {
		u.Ended = j.EndedAt
		if u.Ended.IsZero() { // not recorded: count nothing rather than forever
			u.Ended = u.Started
		}
	}
	if u.Share <= 0 {
		u.Share = float64(len(j.Placement.GPUs))
	}
	return u, true
}
