// Package reap tells, for each GPU process a probe found, whose it is:
// a running gssh job's, an orphan (of a job gssh considers ended, or of
// an attempt that is not the job's current one), another gssh queue's,
// someone else's (foreign), or nobody can tell (unattributed); and which
// GPU memory is held by a process no probe can see. It decides which of
// them to kill; killing is the worker's (launch.Reap), carried out by a
// pass (control) or gssh reap.
//
// It is pure: the host's snapshot, the jobs and the time in, findings
// out. A process is attributed from what the helper read in /proc
// (gpuinfo.Proc): its GSSH_CLUSTER_ID, GSSH_JOB_ID and GSSH_ATTEMPT, else
// its session id, never from a guess: a process whose environment could
// not be read (another user's, one in another PID namespace, and every
// process seen through nvidia-smi, which shows no environment) is
// unattributed, and never killed.
package reap

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// Kind is whose a GPU process is.
type Kind string

// Kinds.
const (
	// KindJob: a gssh job's current attempt (the job is launching,
	// running, preempting...): gssh's own.
	KindJob Kind = "job"
	// KindOrphan: of a job of this queue gssh considers ended (an end
	// state), or of an attempt that is not the job's current one (it was
	// requeued, or runs a later attempt): killed.
	KindOrphan Kind = "orphan"
	// KindOtherQueue: a job of another gssh queue (another state file):
	// that queue's to reap.
	KindOtherQueue Kind = "other_queue"
	// KindForeign: its environment carries no gssh job: someone ran it
	// by hand. Killed only where the inventory says reap_foreign: kill.
	KindForeign Kind = "foreign"
	// KindUnattributed: whose it is cannot be told (Finding.Why says
	// why): never killed.
	KindUnattributed Kind = "unattributed"
)

// SessionWindow is how long after its end a job's session id still
// attributes a process whose environment carries no GSSH_* marks (a job
// that cleared its environment) to the job. Later, the id may have been
// given to another session since: such a process is unattributed.
const SessionWindow = time.Hour

// Finding is one GPU process and whose it is.
type Finding struct {
	GPU   int    // the GPU's index
	GPUID string // the process's GPU or MIG device: its UUID (gpuinfo.Proc.GPUUUID), else the GPU's UUID or index
	Proc  gpuinfo.Proc
	Kind  Kind
	// Job, Attempt and State: the gssh job the process is of (KindJob,
	// KindOrphan; for KindOtherQueue its id in that queue, Queue naming
	// the queue), the attempt the process is of, the job's state now.
	Job     job.ID
	Array   *job.ArrayTask // the array task Job is (its Spec.Array); nil for a job of its own or another queue's
	Attempt int
	State   job.State
	Queue   string
	// BySession: attributed by its session id, not its environment.
	BySession bool
	// Why says it in words: "job 5 succeeded 2h ago", "attempt 1 of job
	// 5, which runs attempt 2 now", "its environment cannot be read
	// (owned by bob)".
	Why string
}

// Invisible is GPU memory held by a process no probe can see.
type Invisible struct {
	GPU   int    // index
	GPUID string // UUID (or index)
	Bytes uint64 // in use and accounted for by no listed process (gpuinfo.GPU.Invisible)
}

// Host is what Classify found on one host.
type Host struct {
	Name      string
	Procs     []Finding // by GPU index, then pid
	Invisible []Invisible
}

// Input is what the classification needs besides a snapshot.
type Input struct {
	Cluster string // this queue's cluster id (state.Store.ClusterID)
	// Jobs are the jobs processes may be of: every active one (queued,
	// launching, running...), the ended ones the processes' GSSH_JOB_IDs
	// name (Wanted), and the recently ended ones (for session ids).
	// Others are simply not known (a process naming one is unattributed).
	Jobs []job.Job
	Now  time.Time
}

// Wanted is the job ids of this queue (cluster) that the processes of
// snap name in their environment: the jobs Input.Jobs must hold for
// them to be attributed.
func Wanted(cluster string, snap gpuinfo.Snapshot) []job.ID {
	var out []job.ID
	for _, g := range snap.GPUs {
		for _, p := range g.Procs {
			if p.JobID == "" || cluster == "" || p.ClusterID != cluster {
				continue
			}
			if id, err := strconv.ParseUint(p.JobID, 10, 64); err == nil && id > 0 && !slices.Contains(out, job.ID(id)) {
				out = append(out, job.ID(id))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Classify tells whose each GPU process of snap is, and finds the memory
// held by invisible processes. Only a host whose GPUs were read has any
// (snap.State ok or degraded); a GPU whose process list could not be read
// has no findings.
func Classify(in Input, snap gpuinfo.Snapshot) Host {
	out := Host{Name: snap.Host}
	if snap.State != gpuinfo.HostOK && snap.State != gpuinfo.HostDegraded {
		return out
	}
	// The helper read /proc for its processes, unless NVML's records were
	// bogus and nvidia-smi listed them (probe.Fallback).
	helper := snap.Source == gpuinfo.SourceNVML && !snap.ProcsBogus
	c := classifier{Input: in, host: snap.Host, helper: helper, byID: map[job.ID]*job.Job{}}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if prev, ok := c.byID[j.ID]; !ok || prev.State.Terminal() && !j.State.Terminal() {
			c.byID[j.ID] = j
		}
	}
	gpus := slices.Clone(snap.GPUs)
	slices.SortStableFunc(gpus, func(a, b gpuinfo.GPU) int { return cmp.Compare(a.Index, b.Index) })
	for _, g := range gpus {
		gid := cmp.Or(g.UUID, strconv.Itoa(g.Index))
		if n := g.Invisible(); n > 0 {
			out.Invisible = append(out.Invisible, Invisible{GPU: g.Index, GPUID: gid, Bytes: n})
		}
		if !g.ProcsKnown {
			continue
		}
		procs := slices.Clone(g.Procs)
		slices.SortStableFunc(procs, func(a, b gpuinfo.Proc) int { return cmp.Compare(a.PID, b.PID) })
		for _, p := range procs {
			f := c.classify(p)
			f.GPU, f.GPUID, f.Proc = g.Index, cmp.Or(p.GPUUUID, gid), p
			out.Procs = append(out.Procs, f)
		}
	}
	return out
}

type classifier struct {
	Input
	host   string
	helper bool // the snapshot is the helper's (NVML and /proc), not nvidia-smi's
	byID   map[job.ID]*job.Job
}

// live reports whether j's current attempt may be running: it has not
// ended and is not back in the queue (a requeued job's last attempt is
// over).
func live(j *job.Job) bool { return !j.State.Terminal() && j.State != job.Queued }

func (c classifier) classify(p gpuinfo.Proc) Finding {
	if p.JobID != "" {
		return c.byEnv(p)
	}
	if f, ok := c.bySession(p); ok {
		return f
	}
	if p.EnvRead {
		return Finding{Kind: KindForeign, Why: "its environment names no gssh job"}
	}
	return Finding{Kind: KindUnattributed, Why: c.unreadable(p)}
}

// byEnv attributes p by the GSSH_* marks in its environment.
func (c classifier) byEnv(p gpuinfo.Proc) Finding {
	switch {
	case p.ClusterID == "":
		return Finding{Kind: KindUnattributed, Why: "it carries GSSH_JOB_ID=" + p.JobID + " but no GSSH_CLUSTER_ID, so no queue can be told"}
	case p.ClusterID != c.Cluster:
		f := Finding{Kind: KindOtherQueue, Queue: p.ClusterID, Why: "a job of another gssh queue (cluster " + short(p.ClusterID) + ", job " + p.JobID + ")"}
		if id, err := strconv.ParseUint(p.JobID, 10, 64); err == nil {
			f.Job = job.ID(id)
		}
		return f
	}
	id, err := strconv.ParseUint(p.JobID, 10, 64)
	attempt, aerr := 0, error(nil) // no GSSH_ATTEMPT: launched before attempts were counted (attempt 0)
	if p.Attempt != "" {
		attempt, aerr = strconv.Atoi(p.Attempt)
	}
	if err != nil || aerr != nil || attempt < 0 {
		return Finding{Kind: KindUnattributed, Why: fmt.Sprintf("its GSSH_JOB_ID %q or GSSH_ATTEMPT %q is not a number", p.JobID, p.Attempt)}
	}
	j, ok := c.byID[job.ID(id)]
	if !ok {
		return Finding{Kind: KindUnattributed, Job: job.ID(id), Attempt: attempt, Why: fmt.Sprintf("it carries job %d of this queue, which the state file does not hold (or could not read)", id)}
	}
	f := Finding{Job: j.ID, Array: j.Spec.Array, Attempt: attempt, State: j.State}
	switch {
	case live(j) && attempt == j.Attempt:
		f.Kind, f.Why = KindJob, fmt.Sprintf("job %s (%s)", j.Ref(), j.State)
	case j.State.Terminal():
		f.Kind, f.Why = KindOrphan, fmt.Sprintf("job %s %s%s", j.Ref(), j.State, c.ago(j.EndedAt))
		if attempt != j.Attempt {
			f.Why = fmt.Sprintf("attempt %d of job %s, which %s%s after attempt %d", attempt, j.Ref(), j.State, c.ago(j.EndedAt), j.Attempt)
		}
	case j.State == job.Queued:
		f.Kind, f.Why = KindOrphan, fmt.Sprintf("attempt %d of job %s, which is queued again", attempt, j.Ref())
	default:
		f.Kind, f.Why = KindOrphan, fmt.Sprintf("attempt %d of job %s, which is at attempt %d now (%s)", attempt, j.Ref(), j.Attempt, j.State)
	}
	return f
}

// bySession attributes p, whose environment names no job, by its session
// id: the session of a job on this host (its session leader's pid,
// job.Remote.PID). A live job's session makes it the job's. An ended
// job's makes it an orphan only when p's environment could be read (the
// job cleared it) and the job ended within SessionWindow; otherwise it is
// unattributed, since the id may belong to another session by now.
func (c classifier) bySession(p gpuinfo.Proc) (Finding, bool) {
	if p.SessionID == nil || *p.SessionID <= 0 {
		return Finding{}, false
	}
	var ended *job.Job
	for i := range c.Jobs {
		j := &c.Jobs[i]
		if j.Placement.Host != c.host || j.Remote.PID != *p.SessionID {
			continue
		}
		if live(j) {
			return Finding{Kind: KindJob, Job: j.ID, Array: j.Spec.Array, Attempt: j.Attempt, State: j.State, BySession: true,
				Why: fmt.Sprintf("job %s (%s), by its session", j.Ref(), j.State)}, true
		}
		if j.State.Terminal() && (ended == nil || j.EndedAt.After(ended.EndedAt)) {
			ended = j
		}
	}
	if ended == nil {
		return Finding{}, false
	}
	f := Finding{Job: ended.ID, Array: ended.Spec.Array, Attempt: ended.Attempt, State: ended.State, BySession: true}
	switch {
	case !p.EnvRead:
		f.Kind, f.Why = KindUnattributed, fmt.Sprintf("in the session of job %s (%s), but %s", ended.Ref(), ended.State, c.unreadable(p))
	case ended.EndedAt.IsZero() || c.Now.Sub(ended.EndedAt) > SessionWindow:
		f.Kind, f.Why = KindUnattributed, fmt.Sprintf("in the session of job %s, which %s%s, without its GSSH_JOB_ID: that session id may be another's by now", ended.Ref(), ended.State, c.ago(ended.EndedAt))
	default:
		f.Kind, f.Why = KindOrphan, fmt.Sprintf("job %s %s%s (by its session: the process cleared its environment)", ended.Ref(), ended.State, c.ago(ended.EndedAt))
	}
	return f, true
}

// unreadable says why p's environment is unknown.
func (c classifier) unreadable(p gpuinfo.Proc) string {
	switch {
	case !c.helper:
		return "nvidia-smi shows no process environment (the helper reads it: see gssh hosts for why it was not used)"
	case p.UID == nil && p.SessionID == nil:
		return "the pid is not visible in /proc (another PID namespace, such as a container, or it exited)"
	case p.User != "":
		return "its environment cannot be read (owned by " + p.User + ")"
	case p.UID != nil:
		return "its environment cannot be read (owned by uid " + strconv.Itoa(*p.UID) + ")"
	}
	return "its environment cannot be read"
}

// ago is " 2h ago" (" just now", "" when t is unknown).
func (c classifier) ago(t time.Time) string {
	if t.IsZero() || c.Now.IsZero() {
		return ""
	}
	d := c.Now.Sub(t)
	switch {
	case d < time.Minute:
		return " just now"
	case d < time.Hour:
		return fmt.Sprintf(" %dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf(" %dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf(" %dd ago", int(d/(24*time.Hour)))
}

func short(id string) string {
	if len(id) > 4 {
		return id[:4]
	}
	return id
}

// Target is one process to kill and what the worker checks before it
// does (launch.Reap): the process is still the one the probe saw (same
// pid and start time, so a reused pid is never killed) and still carries
// what made it a target: the job's GSSH_CLUSTER_ID, GSSH_JOB_ID and
// GSSH_ATTEMPT (so killing a stale attempt never kills the job's next
// one), or its session (whose leader must be gone or still the job's), or,
// for a foreign process, no GSSH_JOB_ID at all.
type Target struct {
	PID        int
	StartTicks int64 // /proc/PID/stat starttime, as the helper read it
	Kind       Kind  // KindOrphan or KindForeign
	// By environment: the job and attempt it must carry.
	Cluster string
	Job     job.ID
	Attempt int
	// By session (Session > 0): the job's session id and its leader's
	// start time (job.Remote).
	Session     int
	LeaderTicks int64
	// User is the owner of the job (job.Job.User) where Input.Jobs has
	// it: a run_as: sudo host reaps the job's processes as them.
	User string
}

// Targets are the processes of h to kill: its orphans, and its foreign
// processes when killForeign (the inventory's reap_foreign: kill). A
// process whose start time the probe could not read is never a target:
// the worker could not tell it from a process given its pid since. The
// jobs are Input.Jobs (for a session's leader).
func Targets(in Input, h Host, killForeign bool) []Target {
	var out []Target
	for _, f := range h.Procs {
		p := f.Proc
		if p.StartTime == nil || p.PID <= 0 || slices.ContainsFunc(out, func(t Target) bool { return t.PID == p.PID }) {
			continue // a process on several GPUs is killed once
		}
		t := Target{PID: p.PID, StartTicks: *p.StartTime, Kind: f.Kind}
		switch {
		case f.Kind == KindOrphan && !f.BySession:
			t.Cluster, t.Job, t.Attempt = in.Cluster, f.Job, f.Attempt
			if i := slices.IndexFunc(in.Jobs, func(j job.Job) bool { return j.ID == f.Job }); i >= 0 {
				t.User = in.Jobs[i].User
			}
		case f.Kind == KindOrphan:
			i := slices.IndexFunc(in.Jobs, func(j job.Job) bool { return j.ID == f.Job })
			if i < 0 || p.SessionID == nil {
				continue
			}
			t.Session, t.LeaderTicks, t.User = *p.SessionID, in.Jobs[i].Remote.StartTicks, in.Jobs[i].User
		case f.Kind == KindForeign && killForeign:
		default:
			continue
		}
		out = append(out, t)
	}
	return out
}

// Outcome is what became of one target on the worker.
type Outcome string

// Outcomes.
const (
	Terminated Outcome = "terminated" // it ended after SIGTERM, within the grace
	Killed     Outcome = "killed"     // it ended after SIGKILL
	Gone       Outcome = "gone"       // not the process the probe saw any more (it exited, or no longer carries the marks): nothing sent
	Denied     Outcome = "denied"     // the login may not signal it (another user's process)
	Survived   Outcome = "survived"   // still there after SIGKILL (uninterruptible sleep: a stuck driver call)
)

// Ended reports whether the target is gone, by gssh's hand or its own.
func (o Outcome) Ended() bool { return o == Terminated || o == Killed || o == Gone }
