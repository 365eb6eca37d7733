package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

// On a real OpenSSH worker with one idle GPU, a queue of five jobs from
// three users (written to the store in the worst order for fair-share)
// runs to completion in fair-share order, one at a time (nothing
// over-booked); Explain and Usage say why.
//
// Usage is summed over a week (a window, so the scores are exact): ann
// used 2 GPU-hours, bob 1, cat 6 with weight 4 (score 1.5).
func TestFairShareOnSSHFleet(t *testing.T) {
	pol := sched.Policy{Weights: sched.FairShareAlone, FairShare: sched.FairShare{Window: 7 * 24 * time.Hour}, Users: map[string]sched.UserShare{"cat": {Weight: 4}}}
	l := sshLab(t, pol)
	st, err := state.Open(l.state, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for user, hours := range map[string]int{"ann": 2, "bob": 1, "cat": 6} {
		_, err := st.Submit(job.Job{User: user, State: job.Succeeded, Spec: job.Spec{Argv: []string{"earlier"}, GPUs: 1, Workdir: "~", Priority: 5},
			Placement: job.Placement{Host: "w", GPUs: []string{"GPU-3"}, Indexes: []int{3}, Share: 1},
			StartedAt: now.Add(-time.Duration(hours+1) * time.Hour), EndedAt: now.Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}
	var queued []job.Job
	for _, user := range []string{"ann", "ann", "cat", "bob", "bob"} {
		j, err := st.Submit(job.Job{User: user, Spec: job.Spec{Argv: []string{"sleep", "1"}, Name: user, GPUs: 1, Workdir: "~", Priority: 5}})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, j)
	}
	ctx := context.Background()
	if _, err := l.svc.Schedule(ctx, service.ScheduleRequest{}); err != nil {
		t.Fatal(err)
	}
	// bob's first job runs; ann's first waits third, behind bob and cat.
	ex, err := l.svc.Explain(ctx, queued[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "3rd in the queue: ann's fair-share score 2.0 ranks behind bob 1.0 and cat 1.5"; ex.Rank != want || ex.Position != 3 {
		t.Errorf("ann's first job: position %d, %q, want %q", ex.Position, ex.Rank, want)
	}
	if ex.Reason == nil || !strings.Contains(ex.Reason.Text, fmt.Sprintf("GPU 3: in use by gssh jobs (bob: job %d)", queued[3].ID)) {
		t.Errorf("ann's first job waits for: %+v", ex.Reason)
	}
	if ex.Forecast == nil || ex.Forecast.Start.IsZero() || ex.Forecast.Placement.Host != "w" {
		t.Errorf("ann's first job's forecast: %+v", ex.Forecast)
	}

	var done []job.Job
	for deadline := time.Now().Add(60 * time.Second); len(done) < len(queued) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := l.svc.Schedule(ctx, service.ScheduleRequest{}); err != nil {
			t.Fatal(err)
		}
		done = done[:0]
		for _, q := range queued {
			j, err := l.svc.Job(ctx, q.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State.Terminal() {
				done = append(done, j)
			}
		}
	}
	if len(done) != len(queued) {
		t.Fatalf("%d of %d jobs ended", len(done), len(queued))
	}
	slices.SortFunc(done, func(a, b job.Job) int { return a.StartedAt.Compare(b.StartedAt) })
	var order []string
	for i, j := range done {
		order = append(order, j.User)
		if j.State != job.Succeeded || j.Placement.Host != "w" || !slices.Equal(j.Placement.Indexes, []int{3}) {
			t.Errorf("job %d: %s on %v: %s", j.ID, j.State, j.Placement, j.Reason)
		}
		if i > 0 && j.StartedAt.Before(done[i-1].EndedAt) {
			t.Errorf("job %d started at %s, before job %d ended (%s): GPU 3 over-booked", j.ID, j.StartedAt, done[i-1].ID, done[i-1].EndedAt)
		}
		if d := j.EndedAt.Sub(j.StartedAt); d < 900*time.Millisecond || d > 10*time.Second {
			t.Errorf("job %d ran %s by the record (sleep 1)", j.ID, d)
		}
	}
	if want := []string{"bob", "bob", "cat", "ann", "ann"}; !slices.Equal(order, want) {
		t.Errorf("start order %v, want %v", order, want)
	}

	doc, err := l.svc.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	share := 0.0
	for _, u := range doc.Users {
		users = append(users, fmt.Sprintf("%s w%g r%d", u.User, u.Weight, u.Rank))
		share += u.Share
		if u.RunningJobs != 0 || u.Queued != 0 || u.Fair != 0 {
			t.Errorf("%s: nothing runs or waits now: %+v", u.User, u)
		}
	}
	if want := []string{"bob w1 r1", "cat w4 r2", "ann w1 r3"}; !slices.Equal(users, want) || doc.Schema != service.UsageSchema {
		t.Errorf("usage %v, want %v", users, want)
	}
	if ann := doc.Users[2]; ann.GPUHours < 2 || ann.GPUHours > 2.01 || ann.Decayed != ann.GPUHours || share < 0.999 || share > 1.001 {
		t.Errorf("ann's usage %+v; shares sum to %g", ann, share)
	}
}
