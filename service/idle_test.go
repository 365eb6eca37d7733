package service

import (
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// TestAddSample: the peak is the most on one unit; utilization is a
// running mean; the GPUs are idle from the first all-zero sample, Idle
// once that lasts idleAfter, busy again at the first sample above 0.
func TestAddSample(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	after := 30 * time.Minute
	u := addSample(nil, map[string]uint64{"h/GPU-0": 4 << 30, "h/GPU-1": 6 << 30}, []int{80, 60}, t0, after)
	if u.PeakBytes != 6<<30 || u.UtilPct != 70 || u.Samples != 1 || !u.IdleSince.IsZero() || u.Idle {
		t.Fatalf("first: %+v", u)
	}
	u = addSample(u, map[string]uint64{"h/GPU-0": 2 << 30}, []int{0, 0}, t0.Add(time.Minute), after)
	if u.PeakBytes != 6<<30 || u.UtilPct != 35 || !u.IdleSince.Equal(t0.Add(time.Minute)) || u.Idle {
		t.Fatalf("idle from now: %+v", u)
	}
	u = addSample(u, nil, []int{0, 0}, t0.Add(31*time.Minute), after)
	if !u.Idle || !u.IdleSince.Equal(t0.Add(time.Minute)) {
		t.Fatalf("idle 30m: %+v", u)
	}
	u = addSample(u, nil, nil, t0.Add(32*time.Minute), after) // a MIG device: no utilization read
	if !u.Idle || u.UtilSamples != 3 || u.Samples != 4 {
		t.Fatalf("no reading: %+v", u)
	}
	u = addSample(u, nil, []int{0, 5}, t0.Add(33*time.Minute), after)
	if u.Idle || !u.IdleSince.IsZero() {
		t.Fatalf("busy again: %+v", u)
	}

	idle := job.Job{ID: 1, State: job.Running, GPUUse: &job.GPUUse{Idle: true, IdleSince: t0}}
	busy := job.Job{ID: 2, State: job.Running, GPUUse: &job.GPUUse{}}
	ended := idle
	ended.ID, ended.State = 3, job.Succeeded
	jobs := []job.Job{idle, busy, ended}
	if got := IdleDue(jobs, t0.Add(time.Hour), after, 0); got != nil {
		t.Errorf("no idle_cancel: %v", got)
	}
	if got := IdleDue(jobs, t0.Add(59*time.Minute), after, 30*time.Minute); len(got) != 0 {
		t.Errorf("not yet: %v", got)
	}
	if got := IdleDue(jobs, t0.Add(time.Hour), after, 30*time.Minute); len(got) != 1 || got[0].ID != 1 {
		t.Errorf("due: %v", got)
	}
}
