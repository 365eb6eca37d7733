package sched

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// drainedAt is host name with n idle GPUs, drained by bob from from.
func drainedAt(name string, n int, from time.Time) Host {
	h := host(name, gpus(n, 80*GiB)...)
	h.Drained = &Drain{By: "bob", At: t0, From: from, Reason: "driver upgrade"}
	return h
}

// walled is job id asking for req, held to walltime wt (0: none).
func walled(id job.ID, req Request, wt time.Duration) job.Job {
	j := queued(id, req)
	j.Spec.Timeout = wt
	return j
}

// A maintenance window not open yet: a job goes on the host only if its
// walltime ends by the window's start; one without a walltime never does
// (unless the policy gives every job one). The memo does not take the
// long job's answer for the short one's, though their requests are alike.
func TestDrainWindowAhead(t *testing.T) {
	from := t0.Add(2 * time.Hour)
	hosts := []Host{drainedAt("a", 4, from)}
	long, short, exact, none := walled(1, excl(1), 4*time.Hour), walled(2, excl(1), time.Hour), walled(3, excl(1), 2*time.Hour), walled(4, excl(1), 0)
	in := Input{Now: t0, Hosts: hosts, Queue: []job.Job{long, short, exact, none}}
	d := Plan(in)
	started := map[job.ID]bool{}
	for _, s := range d.Starts {
		started[s.Job] = true
	}
	if len(d.Starts) != 2 || !started[2] || !started[3] {
		t.Fatalf("starts %+v, want jobs 2 (1h) and 3 (2h, ends as the window opens)", d.Starts)
	}
	want := map[job.ID]string{
		1: "a: draining at 2026-12-01 14:00 UTC: the job's walltime 4h would run past it",
		4: "a: draining at 2026-12-01 14:00 UTC: the job has no walltime (--timeout) to end by then",
	}
	for _, p := range d.Pending {
		if p.Reason.Code != CodeDrained || p.Reason.Text != want[p.Job] || p.Reservation != nil {
			t.Errorf("job %d pending %+v, want drained: %q and no reservation", p.Job, p, want[p.Job])
		}
	}
	if slow := plan(in, false, nil); !reflect.DeepEqual(d, slow) {
		t.Errorf("the memo changed the plan:\n%+v\n%+v", d, slow)
	}
	// A default_timeout is every job's walltime: the job without one fits.
	in.Policy.DefaultTimeout = time.Hour
	if d := Plan(in); len(d.Starts) != 3 || len(d.Pending) != 1 || d.Pending[0].Job != 1 {
		t.Errorf("default_timeout 1h: starts %+v, pending %+v", d.Starts, d.Pending)
	}
	// The inventory's drain: true wins over any window.
	in.Hosts[0].Drain = true
	if d := Plan(in); len(d.Starts) != 0 || d.Pending[0].Reason.Text != "a: drained" {
		t.Errorf("inventory drain: %+v", d)
	}
}

// A window open: the host takes nothing, whatever the walltime; the jobs
// running there go on (no preemption is planned there, even for a job
// of a higher class), and other hosts take the queue.
func TestDrainWindowOpen(t *testing.T) {
	from := t0.Add(2 * time.Hour)
	hosts := []Host{drainedAt("a", 2, from)}
	r := running(1, "a", 0, "GPU-00")
	r.StartedAt, r.Spec.Preemptible, r.Spec.Priority = t0, true, 9
	urgent := walled(2, excl(2), time.Minute)
	urgent.Spec.Priority = 0
	in := Input{Now: from, Hosts: hosts, Running: []job.Job{r}, Queue: []job.Job{urgent, walled(3, excl(1), time.Minute)},
		Policy: Policy{Rebalance: true, PreemptAfter: time.Second, MinRuntime: time.Second}}
	d := Plan(in)
	if len(d.Starts) != 0 || len(d.Preempts) != 0 || len(d.Cancels) != 0 {
		t.Fatalf("a drained host took a job or stopped one: %+v", d)
	}
	for _, p := range d.Pending {
		if p.Reason.Code != CodeDrained || p.Reason.Text != "a: drained by bob since 2026-12-01 14:00 UTC: driver upgrade" {
			t.Errorf("pending %+v", p)
		}
	}
	// Without a reason or a user, the words say less.
	in.Hosts[0].Drained = &Drain{From: from}
	if p := Plan(in).Pending[1]; p.Reason.Text != "a: drained since 2026-12-01 14:00 UTC" {
		t.Errorf("pending %+v", p)
	}
	in.Hosts = append(in.Hosts, host("b", gpus(1, 80*GiB)...))
	if d := Plan(in); len(d.Starts) != 1 || d.Starts[0].Job != 3 || d.Starts[0].Placement.Host != "b" {
		t.Errorf("with b beside it: %+v", d)
	}
}

// EASY backfill reserves no room on a drained host past its window: a
// reservation there needs the job's walltime to end by the window's
// start from the time the room is found; else it goes where the room
// comes later, and the forecast agrees.
func TestDrainReservation(t *testing.T) {
	busy := func(id job.ID, host, gpu string, wt time.Duration) job.Job {
		j := running(id, host, 0, gpu)
		j.StartedAt, j.Spec.Timeout = t0, wt
		return j
	}
	// a frees its one GPU at 13:00, b at 15:00; the big job runs 1 h.
	run := []job.Job{busy(1, "a", "GPU-00", time.Hour), busy(2, "b", "GPU-00", 3*time.Hour)}
	big := walled(10, excl(1), time.Hour)
	for _, tt := range []struct {
		from time.Duration // a's window, from t0
		host string
		at   string
	}{
		{30 * time.Minute, "b", "2026-12-01 15:00"},  // open before a frees
		{90 * time.Minute, "b", "2026-12-01 15:00"},  // a frees at 13:00, the job would run to 14:00
		{2 * time.Hour, "a", "2026-12-01 13:00"},     // ends as the window opens
		{10 * time.Hour, "a", "2026-12-01 13:00"},    // far ahead
		{-10 * time.Minute, "b", "2026-12-01 15:00"}, // open already
	} {
		hosts := []Host{drainedAt("a", 1, t0.Add(tt.from)), host("b", gpus(1, 80*GiB)...)}
		in := Input{Now: t0, Hosts: hosts, Running: run, Queue: []job.Job{big}}
		p := Plan(in).Pending[0]
		if p.Reservation == nil || p.Reservation.Host != tt.host || p.Reservation.From.Format("2006-01-02 15:04") != tt.at {
			t.Errorf("window at +%s: reservation %v, want %s from %s", tt.from, p.Reservation, tt.host, tt.at)
		}
		if f := ForecastStart(in, 10, nil); f.Placement.Host != tt.host || f.Start.Format("2006-01-02 15:04") != tt.at {
			t.Errorf("window at +%s: forecast %+v, want %s at %s", tt.from, f, tt.host, tt.at)
		}
	}
	// No host but the drained one: no reservation at all.
	in := Input{Now: t0, Hosts: []Host{drainedAt("a", 1, t0.Add(30*time.Minute))}, Running: run[:1], Queue: []job.Job{big}}
	if p := Plan(in).Pending[0]; p.Reservation != nil || !strings.Contains(p.Reason.Text, "draining at 2026-12-01 12:30 UTC") {
		t.Errorf("only a drained host: %+v", p)
	}
}
