package health

import (
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

func TestDown(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := Rules{}
	var h Host
	// Three failures within 20 s: not down (one minute of cron passes
	// fails three times only when they span down_after).
	for i := range 3 {
		h = h.Failed(t0.Add(time.Duration(i)*10*time.Second), "timeout", r)
	}
	if h.Down() || h.Failures != 3 {
		t.Fatalf("3 failures in 20 s: %+v, want failing, not down", h)
	}
	h = h.Failed(t0.Add(60*time.Second), "timeout", r)
	if !h.Down() || !h.DownSince.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("4 failures over 60 s: %+v, want down since 60 s", h)
	}
	if h.JobsLost(t0.Add(5*time.Minute), r) || !h.JobsLost(t0.Add(6*time.Minute), r) {
		t.Errorf("JobsLost: want false at 4 min down, true at 5")
	}
	// Two failures over an hour: still not down (one slow connect a day
	// never adds up).
	var slow Host
	slow = slow.Failed(t0, "timeout", r).Failed(t0.Add(time.Hour), "timeout", r)
	if slow.Down() {
		t.Errorf("2 failures over an hour: down, want failing")
	}
	up := h.Answered(t0.Add(7 * time.Minute))
	if up.Down() || up.Failures != 0 || up.LastError != "timeout" || !up.LastOK.Equal(t0.Add(7*time.Minute)) {
		t.Errorf("Answered = %+v, want up with the last error kept", up)
	}
	if s := up.Summary(); s != "" {
		t.Errorf("Summary of an up host = %q", s)
	}
	if s := h.Summary(); s == "" {
		t.Errorf("Summary of a down host is empty")
	}
}

func TestStrays(t *testing.T) {
	t0 := time.Now()
	j := job.Job{ID: 3, Attempt: 1, State: job.Unknown, Placement: job.Placement{Host: "h"}}
	h := Host{}.AddStray(j, t0, "lost").AddStray(j, t0, "lost")
	if len(h.Strays) != 1 || !h.HasStray(3, 1) || h.HasStray(3, 2) {
		t.Fatalf("AddStray twice = %+v, want one stray", h.Strays)
	}
	s := h.Strays[0]
	if !s.Live(j) {
		t.Errorf("the job's own current attempt is not live")
	}
	for _, cur := range []job.Job{
		{ID: 3, Attempt: 1, State: job.Lost, Placement: j.Placement},                     // given up
		{ID: 3, Attempt: 2, State: job.Running, Placement: job.Placement{Host: "other"}}, // requeued, runs elsewhere
		{ID: 3, Attempt: 2, State: job.Queued},                                           // requeued, waits
		{ID: 3, Attempt: 1, State: job.Cancelled, Placement: j.Placement},                // cancelled --force
	} {
		if s.Live(cur) {
			t.Errorf("stray live for %+v", cur)
		}
	}
	if h = h.DropStray(3, 1); h.Strays != nil {
		t.Errorf("DropStray left %+v", h.Strays)
	}
}
