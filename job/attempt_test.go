package job_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// EndAttempt keeps the attempt a job goes on from; AllAttempts lists it
// with the current one; LastRun is the latest whose command started.
func TestAttempts(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	j := job.Job{ID: 7, State: job.Running, Attempt: 1, Placement: job.Placement{Host: "gpu01", Indexes: []int{2}},
		Remote: job.Remote{Dir: "/h/.gssh/jobs/c-7.1", PID: 42}, StartedAt: t0}
	j.EndAttempt(t0.Add(time.Hour), job.Status{State: job.Running}, job.AttemptHostLost, "gpu01 was down")
	if a := j.Attempts; len(a) != 1 || a[0].N != 1 || a[0].Host != "gpu01" || a[0].Dir != "/h/.gssh/jobs/c-7.1" || a[0].State != job.Lost ||
		!a[0].EndedAt.Equal(t0.Add(time.Hour)) || a[0].Ended != job.AttemptHostLost {
		t.Fatalf("after the host was lost: %+v; want attempt 1 on gpu01, lost", a)
	}
	// Queued again (its placement cleared), then a launch that failed.
	j.State, j.Placement, j.Remote, j.StartedAt = job.Queued, job.Placement{}, job.Remote{}, time.Time{}
	if all := j.AllAttempts(); len(all) != 1 {
		t.Errorf("queued: %+v, want attempt 1 only", all)
	}
	j.Attempt, j.Placement, j.State = 2, job.Placement{Host: "gpu02"}, job.Launching
	j.EndAttempt(t0.Add(2*time.Hour), job.Status{}, job.AttemptLaunchFailed, "launch failed")
	if a := j.Attempts[1]; a.State != "" || !a.StartedAt.IsZero() || !a.EndedAt.IsZero() {
		t.Errorf("a launch that failed: %+v, want never started", a)
	}
	if last, ok := j.LastRun(); !ok || last.N != 1 {
		t.Errorf("last run %+v %v, want attempt 1 (2 never started)", last, ok)
	}
	j.Attempt, j.Placement, j.State, j.StartedAt = 3, job.Placement{Host: "gpu03"}, job.Running, t0.Add(3*time.Hour)
	all := j.AllAttempts()
	if len(all) != 3 || all[2].N != 3 || all[2].State != job.Running || all[2].Host != "gpu03" {
		t.Errorf("running attempt 3: %+v", all)
	}
	if last, _ := j.LastRun(); last.N != 3 {
		t.Errorf("last run %d, want 3", last.N)
	}
	// A job never placed has nothing to keep.
	var none job.Job
	none.EndAttempt(t0, job.Status{}, job.AttemptAbandoned, "")
	if len(none.Attempts) != 0 || len(none.AllAttempts()) != 0 {
		t.Errorf("a job never placed: %+v", none.Attempts)
	}
}

// A record of a gssh before attempts were kept reads with none, and a
// record with none writes no attempts field.
func TestAttemptsJSONAdditive(t *testing.T) {
	var j job.Job
	if err := json.Unmarshal([]byte(`{"id":3,"user":"u","spec":{"argv":["x"],"host":"auto","gpus":1,"workdir":"~","priority":5},"state":"succeeded","attempt":2,"submitted_at":"2026-12-01T14:00:00Z"}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.Attempts != nil {
		t.Errorf("attempts %+v", j.Attempts)
	}
	out, _ := json.Marshal(j)
	if strings.Contains(string(out), "attempts") {
		t.Errorf("%s has an attempts field", out)
	}
	j.Attempts = []job.Attempt{{N: 1, Host: "h", StartedAt: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), Ended: job.AttemptPreempted, State: job.Cancelled}}
	out, _ = json.Marshal(j)
	if !strings.Contains(string(out), `"attempts":[{"attempt":1,"host":"h","started_at":"2026-12-01T14:00:00Z","state":"cancelled","ended":"preempted"}]`) {
		t.Errorf("%s", out)
	}
}

// The run of a result recovered from an attempt that was requeued is
// counted once: in Runs, not again as the job's own use.
func TestUseOfRecoveredResult(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	j := job.Job{State: job.Succeeded, StartedAt: t0, EndedAt: t0.Add(time.Minute), Placement: job.Placement{GPUs: []string{"g"}},
		Runs: []job.Use{{Started: t0, Ended: t0.Add(5 * time.Minute), Share: 1}}}
	if u, ok := j.Use(); ok {
		t.Errorf("use %+v counted again", u)
	}
	j.Runs[0].Started = t0.Add(-time.Hour) // an earlier run of its own: the job's use counts
	if _, ok := j.Use(); !ok {
		t.Errorf("the job's own run is not counted")
	}
}
