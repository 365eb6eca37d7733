package main

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
)

// gssh drain --wait looks at the hosts' jobs every interval (a pass
// between looks), says what it waits for when that changes, and returns
// once none is left; with --timeout it gives up then, naming the jobs
// left, with exit 124.
func TestDrainWait(t *testing.T) {
	j3 := job.Job{ID: 3, User: "alice", State: job.Running, Placement: job.Placement{Host: "a100"}}
	j4 := job.Job{ID: 4, User: "bob", State: job.Unknown, Placement: job.Placement{Host: "a100"}}
	synctest.Test(t, func(t *testing.T) {
		svc := &fakeService{drainJobs: [][]job.Job{{j3, j4}, {j3, j4}, {j4}, {}}}
		a, out, errb := fakeApp(svc)
		start := time.Now()
		if err := drainWait(context.Background(), a, []string{"a100"}, 5*time.Second, 0, false); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 15*time.Second {
			t.Errorf("waited %s, want 3 intervals", waited)
		}
		want := "gssh: waiting for 2 gssh jobs on a100: 3 (alice, running on a100), 4 (bob, unknown on a100)\n" +
			"gssh: waiting for 1 gssh job on a100: 4 (bob, unknown on a100)\n"
		if errb.String() != want || out.String() != "no gssh jobs left on a100\n" {
			t.Errorf("stderr %q\nstdout %q", errb, out)
		}

		svc = &fakeService{drainJobs: [][]job.Job{{j3}}}
		a, _, _ = fakeApp(svc)
		start = time.Now()
		err := drainWait(context.Background(), a, []string{"a100"}, 5*time.Second, 12*time.Second, false)
		if exitCode(err) != exitTimedOut || err.Error() != "--timeout 12s ran out: 1 gssh job still on a100: 3 (alice, running on a100)" {
			t.Errorf("timeout: %v", err)
		}
		if waited := time.Since(start); waited != 12*time.Second {
			t.Errorf("gave up after %s, want 12s", waited)
		}
	})
}

// Flags: --at is read in the local zone and must be to come; --timeout
// goes with --wait.
func TestDrainFlags(t *testing.T) {
	now := time.Now()
	var got *drainOptions
	capture := func(o *drainOptions) error { got = o; return nil }
	a := testApp()
	a.now = func() time.Time { return now }
	if err := run(t, newDrainCmd(a, capture), "a100", "ctl", "--reason", "driver upgrade", "--at", "+2h", "--wait", "--timeout", "1h"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.hosts, ",") != "a100,ctl" || got.reason != "driver upgrade" || !got.from.Equal(now.Add(2*time.Hour)) || !got.wait || got.timeout != time.Hour {
		t.Errorf("options %+v", got)
	}
	if err := run(t, newDrainCmd(a, capture), "a100", "--at", "now"); err != nil || !got.from.IsZero() {
		t.Errorf("--at now: %v, from %v", err, got.from)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"a100", "--at", "2020-01-01 08:00"}, `--at "2020-01-01 08:00" is 2020-01-01 08:00:00`},
		{[]string{"a100", "--at", "soon"}, `--at "soon": not a time`},
		{[]string{"a100", "--timeout", "1h"}, "--timeout goes with --wait"},
		{[]string{"a100", "--wait", "--interval", "0s"}, "--interval 0s: give a duration from 1s"},
		{nil, "give the hosts to drain"},
	} {
		if err := run(t, newDrainCmd(a, capture), tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// What drain, hosts and gpus say of a drain.
func TestDrainWords(t *testing.T) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.Local)
	inForce := sched.Drain{By: "bob", At: now.Add(-time.Hour), From: now.Add(-time.Hour), Reason: "driver upgrade"}
	ahead := sched.Drain{By: "bob", At: now.Add(-time.Hour), From: now.Add(14 * time.Hour), Reason: "PSU swap"}
	z := " " + now.Format("MST") // the local zone's name
	for _, tt := range []struct {
		doc        service.DrainDoc
		cell, note string
	}{
		{service.DrainDoc{}, "", ""},
		{service.DrainDoc{Drain: true, Drained: &inForce}, " (drained)", "a100: drained by bob since 2026-12-01 17:00" + z + ": driver upgrade"},
		{service.DrainDoc{Drained: &ahead}, " (draining at 2026-12-02 08:00" + z + ")", "a100: draining at 2026-12-02 08:00" + z + ", drained by bob on 2026-12-01 17:00" + z + ": PSU swap"},
		{service.DrainDoc{Drain: true, InventoryDrain: "/etc/gssh/hosts.yaml:12"}, " (drained)", "a100: drained in the inventory (/etc/gssh/hosts.yaml:12: drain: true)"},
	} {
		if got := drainCell(tt.doc, now); got != tt.cell {
			t.Errorf("drainCell(%+v) = %q, want %q", tt.doc, got, tt.cell)
		}
		if got := drainNote("a100", tt.doc, now); got != tt.note {
			t.Errorf("drainNote(%+v) = %q, want %q", tt.doc, got, tt.note)
		}
	}
	today := ahead
	today.From = now.Add(time.Hour)
	if got := drainCell(service.DrainDoc{Drained: &today}, now); got != " (draining at 19:00)" {
		t.Errorf("today: %q", got)
	}
	h := service.HostDrain{Host: "a100", Drain: ahead, Replaced: &inForce, Jobs: []job.Job{{ID: 3, User: "alice", State: job.Running, Placement: job.Placement{Host: "a100"}}}}
	if got, want := drainedLine(h, now), "a100 draining at 2026-12-02 08:00"+z+": until then it takes only jobs whose walltime ends by then, and none from then on "+
		"(it was drained by bob since 2026-12-01 17:00"+z+": driver upgrade); 1 gssh job on it runs to its end: 3 (alice, running on a100)"; got != want {
		t.Errorf("drainedLine:\n got %q\nwant %q", got, want)
	}
}
