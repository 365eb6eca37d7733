// Package eventlog is gssh's event log: one JSON line per change of the
// queue's state (a job submitted, started, ended, requeued, preempted; a
// process reaped; a host down or up, a GPU failed or healthy, a host
// drained or resumed; the state file restored from a backup), written
// with log/slog's JSON handler to events.log beside the state file
// (Path), and read back, rotated files included, by gssh events (Read).
//
// A line is an object with these fields (stable names; a field without a
// value is left out):
//
//	time               RFC 3339 UTC with milliseconds: "2026-11-30T14:02:05.123Z"
//	event              the kind (Kind): job_submit, job_start, job_end, ...
//	job                the job id
//	user               the job's owner (the OS user who submitted it)
//	host               the job's host, or the host of a host or GPU event
//	gpus               GPU indexes: the job's placement, or the GPU of a GPU event
//	state              the job's state after the change (job_end: how it ended:
//	                   succeeded, failed, cancelled, timeout, lost)
//	reason             why, in words (the job's reason; a host's last error)
//	attempt            the job's launch attempt
//	exit               the exit status, when the job exited
//
// and, by kind:
//
//	reason_code        the short code of the job's reason (no_free_gpu, requeued, ...)
//	array, task        an array task's array (its first task's id) and its index:
//	                   the task is named ARRAY_TASK (16_2) as gssh ps shows it
//	name, priority, gpu_count, mem_per_gpu_bytes, timeout_s
//	                   what the job asks for (job_submit, job_update)
//	by                 who acted (job_hold, job_release, job_update, job_cancel,
//	                   host_drain, host_resume, state_restore)
//	signal             the signal that ended it ("KILL"; job_end)
//	runtime_s          how long its last run took, in seconds (job_end)
//	gpu_hours          the GPU-hours of all its runs (job_end): whole GPUs, or the
//	                   booked part of a GPU's memory for a --mem job, times hours
//	restarts           how often it was requeued after it started (job_end)
//	for                the waiting job a preemption makes room for (job_preempt)
//	since              when a host began failing (host_down), a GPU failed (gpu_failed)
//	from               when a drain's maintenance window begins (host_drain)
//	pid, process, process_user, memory_bytes, outcome
//	                   the GPU process killed (orphan_reaped, foreign_killed)
//	backup, kept, job_seq
//	                   the backup put in place, where the file it replaced
//	                   was kept, the last job id handed out (state_restore)
//	path, found        a lab's file that was not gssh's and what was there
//	                   (lab_file_replaced)
//
// Several gssh processes write at once (a pass, submits, cancels), and the
// rotation (gopkg.in/natefinch/lumberjack.v2) is not safe across processes,
// so each write, with the rotation it may cause, holds an exclusive flock
// on events.log.lock (see Log). Writing the log never fails a state
// change: an event that cannot be written is a warning.
package eventlog

import (
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
)

// Kind names what happened. These are gssh's only event kinds: the
// controller's events (control.Event) carry them too, and each is written
// as its line here under the same name.
type Kind string

// Job events.
const (
	JobSubmit    Kind = "job_submit"     // queued by gssh submit or gssh run (one per array task)
	JobStart     Kind = "job_start"      // launched: running on its GPUs
	JobEnd       Kind = "job_end"        // reached its end state (state: succeeded, failed, cancelled, timeout, lost)
	JobCancel    Kind = "job_cancel"     // a cancel recorded for the next pass (a lab member's gssh cancel of an active job); the end is a job_end
	JobRequeue   Kind = "job_requeue"    // back in the queue under its id (gssh requeue, a preemption, a failed launch, a failed host)
	JobPreempt   Kind = "job_preempt"    // signalled for a preemption: preempting (for: the job it makes room for)
	JobUnknown   Kind = "job_unknown"    // its host is down: it may still run
	JobAdopted   Kind = "job_adopted"    // unknown, then found running when its host answered again
	JobGPUFailed Kind = "job_gpu_failed" // a GPU it runs on read unhealthy
	JobHold      Kind = "job_hold"       // held by gssh hold
	JobRelease   Kind = "job_release"    // released by gssh release
	JobUpdate    Kind = "job_update"     // changed by gssh update (the fields are the job's request after it)
)

// Events of a host that answers again after its jobs were given up.
const (
	JobRecovered Kind = "job_result_recovered" // an attempt given up there had finished: its result is the job's (a job_end follows)
	StrayIgnored Kind = "stray_result_ignored" // an attempt given up there had ended (state, exit), but its job's own end stands
)

// Process, host and GPU events.
const (
	StrayKilled   Kind = "stray_killed"   // an attempt given up on a failed host, found running there and killed
	OrphanReaped  Kind = "orphan_reaped"  // a GPU process of an ended job (or a stale attempt) killed
	ForeignKilled Kind = "foreign_killed" // a GPU process of no gssh job killed (reap_foreign: kill)
	HostDown      Kind = "host_down"      // a host was called down
	HostUp        Kind = "host_up"        // a down host answered again
	GPUFailed     Kind = "gpu_failed"     // a GPU read unhealthy (lost, requires reset, error): no job is placed on it
	GPUHealthy    Kind = "gpu_healthy"    // a failed GPU read healthy in enough probes in a row: jobs are placed on it again
	HostDrain     Kind = "host_drain"     // gssh drain: no new placements there (from: a maintenance window's start)
	HostResume    Kind = "host_resume"    // gssh resume: placements there again
	StateRestore  Kind = "state_restore"  // gssh state restore: a backup put in place of the state file
	// LabFileReplaced: a file in a lab's state directory that was not
	// gssh's (a member's symbolic link, another type or owner, more than
	// one link) was replaced by a fresh one of the pass account, or
	// removed (path, found: what was there).
	LabFileReplaced Kind = "lab_file_replaced"
)

// Kinds are every kind, in the order the package documents them.
var Kinds = []Kind{JobSubmit, JobStart, JobEnd, JobCancel, JobRequeue, JobPreempt, JobUnknown, JobAdopted, JobGPUFailed,
	JobHold, JobRelease, JobUpdate, JobRecovered, StrayKilled, StrayIgnored, OrphanReaped, ForeignKilled, HostDown, HostUp, GPUFailed, GPUHealthy,
	HostDrain, HostResume, StateRestore, LabFileReplaced}

// Known reports whether k is one of Kinds.
func Known(k Kind) bool { return slices.Contains(Kinds, k) }

// Event is one line of the log. The fields are the common ones of the
// package doc; Extra are the kind's own, in order.
type Event struct {
	Time    time.Time // zero: when it is written
	Kind    Kind
	Job     job.ID
	User    string
	Host    string
	GPUs    []int
	State   job.State
	Reason  string
	Attempt int
	Exit    *int
	Extra   []slog.Attr
}

// OfJob is the event k of j, as recorded after the change, at t: the
// common fields from the record, and for JobEnd how it ended (signal,
// runtime_s, gpu_hours, restarts), for JobSubmit and JobUpdate what it
// asks for.
func OfJob(t time.Time, k Kind, j job.Job) Event {
	e := Event{Time: t, Kind: k, Job: j.ID, User: j.User, Host: j.Placement.Host, GPUs: j.Placement.Indexes,
		State: j.State, Reason: j.Reason, Attempt: j.Attempt, Exit: j.ExitCode}
	if j.ReasonCode != "" {
		e.Extra = append(e.Extra, slog.String("reason_code", j.ReasonCode))
	}
	if a := j.Spec.Array; a != nil {
		e.Extra = append(e.Extra, slog.Uint64("array", uint64(a.Job)), slog.Int("task", a.Task))
	}
	switch k {
	case JobSubmit, JobUpdate:
		e.Extra = append(e.Extra, request(j.Spec)...)
	case JobEnd:
		e.Extra = append(e.Extra, slog.String("name", j.Spec.Name))
		if j.Signal != "" {
			e.Extra = append(e.Extra, slog.String("signal", j.Signal))
		}
		if !j.StartedAt.IsZero() && !j.EndedAt.IsZero() {
			e.Extra = append(e.Extra, slog.Float64("runtime_s", job.SecondsTo(j.EndedAt.Sub(j.StartedAt), time.Millisecond)))
		}
		if !j.StartedAt.IsZero() || len(j.Runs) > 0 {
			e.Extra = append(e.Extra, slog.Float64("gpu_hours", round(GPUHours(j), 4)))
		}
		if j.Restarts > 0 {
			e.Extra = append(e.Extra, slog.Int("restarts", j.Restarts))
		}
	case JobPreempt:
		if j.Preempt != nil {
			e.Extra = append(e.Extra, slog.Uint64("for", uint64(j.Preempt.For)))
		}
	}
	return e
}

// request is what spec asks for, as job_submit and job_update give it.
func request(s job.Spec) []slog.Attr {
	out := []slog.Attr{slog.String("name", s.Name), slog.Int("priority", s.Priority), slog.Int("gpu_count", s.GPUs)}
	if s.MemPerGPU > 0 {
		out = append(out, slog.Uint64("mem_per_gpu_bytes", s.MemPerGPU))
	}
	if s.Timeout > 0 {
		out = append(out, slog.Float64("timeout_s", s.Timeout.Seconds()))
	}
	return out
}

// GPUHours is what j used of the GPUs over all its runs, in GPU-hours
// (job.Use's share times hours): its earlier runs (ended by requeues)
// and its last one, up to its end (nothing counts for a run without an
// end).
func GPUHours(j job.Job) float64 {
	h := 0.0
	uses := slices.Clone(j.Runs)
	if u, ok := j.Use(); ok {
		uses = append(uses, u)
	}
	for _, u := range uses {
		if !u.Ended.IsZero() && u.Ended.After(u.Started) {
			h += u.Share * u.Ended.Sub(u.Started).Hours()
		}
	}
	return h
}

// round is x to n decimals.
func round(x float64, n int) float64 {
	p := math.Pow10(n)
	return math.Round(x*p) / p
}

// By is e with who acted (the by field).
func (e Event) By(who string) Event {
	if who != "" {
		e.Extra = append(slices.Clip(e.Extra), slog.String("by", who))
	}
	return e
}

// Drain is the host_drain event of gssh drain: host drained by who at
// t, for reason, from from (a maintenance window's start; zero: at once).
func Drain(t time.Time, host, who, reason string, from time.Time) Event {
	e := Event{Time: t, Kind: HostDrain, Host: host, Reason: reason}.By(who)
	if !from.IsZero() {
		e.Extra = append(e.Extra, slog.String("from", Stamp(from)))
	}
	return e
}

// Resume is the host_resume event of gssh resume: host resumed by who at t.
func Resume(t time.Time, host, who string) Event {
	return Event{Time: t, Kind: HostResume, Host: host}.By(who)
}

// Restore is the state_restore event of gssh state restore: backup put
// in place by who at t, the file it replaced kept as kept ("": there was
// none), job ids handed out up to jobSeq from then on.
func Restore(t time.Time, who, backup, kept string, jobSeq uint64) Event {
	e := Event{Time: t, Kind: StateRestore}.By(who)
	e.Extra = append(e.Extra, slog.String("backup", backup), slog.Uint64("job_seq", jobSeq))
	if kept != "" {
		e.Extra = append(e.Extra, slog.String("kept", kept))
	}
	return e
}

// Stamp is t as the log writes times: RFC 3339, UTC, milliseconds.
func Stamp(t time.Time) string { return t.UTC().Format(stampLayout) }

const stampLayout = "2006-01-02T15:04:05.000Z07:00"
