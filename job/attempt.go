package job

import (
	"slices"
	"time"
)

// Attempt is one launch attempt of a job that the job went on from (see
// Job.Attempts): where it ran, from when to when, and how it ended.
// Instants are the controller's clock.
type Attempt struct {
	// N is its number (GSSH_ATTEMPT): its directory on Host is
	// ~/.gssh/jobs/<cluster>-<id>.<N>.
	N    int    `json:"attempt"`
	Host string `json:"host"`
	// GPUs are the nvidia-smi indexes it was placed on (Placement.Indexes).
	GPUs []int `json:"gpus,omitempty"`
	// Dir is its job directory on Host, as an absolute path (its log is
	// Dir/log); "" when its launch did not report one (it never started).
	Dir string `json:"dir,omitempty"`
	// By is Remote.By: the OS user whose own SSH login holds Dir.
	By        string    `json:"by,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"` // zero: its command never started
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// State is what became of its command: Succeeded or Failed (it exited:
	// ExitCode), Timeout, Cancelled (gssh stopped it: a preemption, gssh
	// requeue, superseded), Lost (its process or host was lost), or ""
	// (it never started).
	State    State  `json:"state,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Ended says why the job went on from it, as a short stable code:
	// AttemptPreempted, AttemptRequeued, AttemptHostLost, AttemptLost,
	// AttemptGPUFailed, AttemptLaunchFailed, AttemptAbandoned or
	// AttemptSuperseded.
	Ended string `json:"ended"`
	// Reason says it in words: the job's reason when it went on.
	Reason string `json:"reason,omitempty"`
}

// Why an attempt ended (Attempt.Ended).
const (
	AttemptPreempted    = "preempted"     // a rebalancing pass preempted it
	AttemptRequeued     = "requeued"      // gssh requeue
	AttemptHostLost     = "host_lost"     // its host was down for lost_after (--requeue)
	AttemptLost         = "lost"          // its process vanished without an exit status (--requeue)
	AttemptGPUFailed    = "gpu_failed"    // a GPU failed under it (--requeue)
	AttemptLaunchFailed = "launch_failed" // its launch failed: it never started
	AttemptAbandoned    = "abandoned"     // its launch never finished and was abandoned: it never started
	AttemptSuperseded   = "superseded"    // stopped: an earlier attempt's result, recovered from its host, counts
)

// EndAttempt appends j's current attempt to j.Attempts, ended at end
// (zero for an attempt that never started) with how its command ended
// (st: State, ExitCode, Signal; a state that is not an end is recorded
// Lost when it started), ended (an Attempt* code) and reason. A job
// with no attempt placed (Attempt 0, or no host) is left as it is.
func (j *Job) EndAttempt(end time.Time, st Status, ended, reason string) {
	if j.Attempt <= 0 || j.Placement.Host == "" {
		return
	}
	a := j.current()
	a.EndedAt, a.State, a.ExitCode, a.Signal, a.Ended, a.Reason = end, st.State, st.ExitCode, st.Signal, ended, reason
	switch {
	case a.StartedAt.IsZero():
		a.State, a.EndedAt = "", time.Time{}
	case !a.State.Terminal():
		a.State = Lost
	}
	j.Attempts = append(slices.DeleteFunc(slices.Clone(j.Attempts), func(x Attempt) bool { return x.N == a.N }), a)
}

// current is j's own attempt, as its record says now.
func (j *Job) current() Attempt {
	return Attempt{N: j.Attempt, Host: j.Placement.Host, GPUs: slices.Clone(j.Placement.Indexes), Dir: j.Remote.Dir, By: j.Remote.By,
		StartedAt: j.StartedAt, EndedAt: j.EndedAt, State: j.State, ExitCode: j.ExitCode, Signal: j.Signal, Ended: j.ReasonCode, Reason: j.Reason}
}

// AllAttempts lists every launch attempt of j in number order: its
// earlier ones (Attempts) and its current or last one, from its own
// fields, when it is placed (its State is then the job's: running, or
// how it ended). A queued job's last attempt is among Attempts.
func (j Job) AllAttempts() []Attempt {
	out := slices.Clone(j.Attempts)
	if j.Placement.Host != "" && !slices.ContainsFunc(out, func(a Attempt) bool { return a.N == j.Attempt }) {
		out = append(out, j.current())
	}
	slices.SortStableFunc(out, func(a, b Attempt) int { return a.N - b.N })
	return out
}

// LastRun is the latest of j's attempts whose command started (the one
// gssh logs shows by default); ok is false when none did.
func (j Job) LastRun() (a Attempt, ok bool) {
	all := j.AllAttempts()
	for i := len(all) - 1; i >= 0; i-- {
		if !all[i].StartedAt.IsZero() || all[i].Dir != "" {
			return all[i], true
		}
	}
	return Attempt{}, false
}
