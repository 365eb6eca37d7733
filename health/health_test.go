package health

import (
	"strings"
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

func TestGPUHealth(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	lost := []Reading{{Index: 0}, {Index: 1, Bad: "lost"}}
	ok := []Reading{{Index: 0}, {Index: 1}}
	var h Host
	h, changed := h.Probed(ok, at(0))
	if changed || h.GPUs != nil {
		t.Fatalf("healthy GPUs made a record: %+v", h.GPUs)
	}
	h, changed = h.Probed(lost, at(1))
	if !changed || len(h.GPUs) != 1 || h.GPUs["1"].Why != "lost" || !h.GPUs["1"].Since.Equal(at(1)) {
		t.Fatalf("after GPU 1 read lost: %+v", h.GPUs)
	}
	if h2, changed := h.Probed(lost, at(2)); changed || !h2.GPUs["1"].Since.Equal(at(1)) {
		t.Errorf("lost again: changed %v, %+v; want the record as it was", changed, h2.GPUs)
	}
	// Two healthy probes, then lost again: the count starts over, the
	// failure keeps its first time.
	h, _ = h.Probed(ok, at(3))
	h, _ = h.Probed(ok, at(4))
	if g := h.GPUs["1"]; g.Good != 2 || !strings.Contains(g.Text(), "healthy in 2 of the 3") {
		t.Fatalf("after 2 healthy probes: %+v %q", g, g.Text())
	}
	h, _ = h.Probed(lost, at(5))
	if g := h.GPUs["1"]; g.Good != 0 || !g.Since.Equal(at(1)) {
		t.Fatalf("lost again while recovering: %+v", g)
	}
	for i := range 3 {
		if len(h.GPUs) != 1 {
			t.Fatalf("record gone after %d healthy probes, want 3", i)
		}
		h, _ = h.Probed(ok, at(6+i))
	}
	if h.GPUs != nil {
		t.Errorf("after 3 healthy probes: %+v, want no record", h.GPUs)
	}
}

// TestGPUHealthSameProbe: passes that read the same probe (one GPU-stream
// frame) count it once toward a GPU's recovery.
func TestGPUHealthSameProbe(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	h, _ := Host{}.Probed([]Reading{{Index: 0, Bad: "lost"}}, t0)
	frame := t0.Add(2 * time.Second)
	for range 5 { // five passes, one frame
		h, _ = h.Probed([]Reading{{Index: 0}}, frame)
	}
	if g := h.GPUs["0"]; g.Good != 1 {
		t.Fatalf("one frame read by five passes counts %d healthy probes, want 1", g.Good)
	}
	for i := 2; i <= HealthyProbes; i++ {
		h, _ = h.Probed([]Reading{{Index: 0}}, frame.Add(time.Duration(i)*time.Second))
	}
	if len(h.GPUs) != 0 {
		t.Errorf("after %d frames the GPU still has a record: %+v", HealthyProbes, h.GPUs)
	}
}
