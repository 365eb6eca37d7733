package sched

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

func after(j job.Job, kind job.DepKind, ids ...job.ID) job.Job {
	for _, id := range ids {
		j.Spec.After = append(j.Spec.After, job.Dependency{Kind: kind, Job: id})
	}
	return j
}

func endedJob(id job.ID, s job.State, reason string) job.Job {
	return job.Job{ID: id, User: "u", State: s, Reason: reason}
}

// Holds, dependencies and --begin keep a job from being placed, each
// with its code and words; a dependency that can never be met cancels it.
func TestGates(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...)}
	run := running(1, "a", 0, "GPU-00")
	run.StartedAt, run.Spec.Timeout = t0, time.Hour
	deps := map[job.ID]job.Job{
		2: endedJob(2, job.Succeeded, "exit status 0"),
		3: endedJob(3, job.Failed, "exit status 3"),
		4: endedJob(4, job.Cancelled, "cancelled by bob"),
		5: endedJob(5, job.Timeout, "ran past its 1h walltime"),
	}
	held := queued(20, excl(1))
	held.Hold = &job.Hold{By: "alice", At: t0}
	late := queued(21, excl(1))
	late.Spec.Begin = t0.Add(2 * time.Hour)
	early := queued(22, excl(1))
	early.Spec.Begin = t0.Add(-time.Hour) // in the past: no gate
	q := queued(30, excl(1))
	cases := []struct {
		name   string
		j      job.Job
		start  bool
		code   Code
		text   string
		cancel string
	}{
		{"held", held, false, CodeHeld, "held by alice since 2026-12-01 12:00 UTC (gssh release 20)", ""},
		{"begin later", late, false, CodeBegin, "begins at 2026-12-01 14:00:00 UTC (--begin)", ""},
		{"begin passed", early, true, "", "", ""},
		{"after a running job", after(q, job.AfterOK, 1), false, CodeDependency, "waits for job 1 to succeed", ""},
		{"after several", after(after(q, job.AfterOK, 1, 31), job.AfterAny, 32), false, CodeDependency, "waits for jobs 1, 31 to succeed; job 32 to end", ""},
		{"after one that succeeded", after(q, job.AfterOK, 2), true, "", "", ""},
		{"after one that failed", after(q, job.AfterOK, 3), false, "", "", "job 3 failed (exit status 3); --after needs it to succeed"},
		{"after-notok, it succeeded", after(q, job.AfterNotOK, 2), false, "", "", "job 2 succeeded (exit status 0); --after-notok needs it to fail, time out or be lost"},
		{"after-notok, it timed out", after(q, job.AfterNotOK, 5), true, "", "", ""},
		{"after-notok, it was cancelled", after(q, job.AfterNotOK, 4), false, "", "", "job 4 was cancelled (cancelled by bob); --after-notok needs it to fail, time out or be lost"},
		{"after-any, cancelled", after(q, job.AfterAny, 4), true, "", "", ""},
		{"after one not in the state", after(q, job.AfterAny, 9), false, "", "", "job 9 is not in the state; --after-any needs it to end"},
		{"held, and doomed", after(held, job.AfterOK, 3), false, "", "", "job 3 failed (exit status 3); --after needs it to succeed"},
	}
	for _, c := range cases {
		queue := []job.Job{c.j, queued(31, excl(8)), queued(32, excl(8))} // 31, 32 never fit: 4 GPUs
		for _, terse := range []bool{false, true} {
			d := Plan(Input{Now: t0, Hosts: hosts, Running: []job.Job{run}, Queue: queue, Deps: deps, Terse: terse, Policy: Policy{Weights: FairShareAlone}})
			started := len(d.Starts) == 1 && d.Starts[0].Job == c.j.ID
			if started != c.start {
				t.Errorf("%s: started %v, want %v (%+v)", c.name, started, c.start, d)
				continue
			}
			if c.cancel != "" {
				if len(d.Cancels) != 1 || d.Cancels[0].Job != c.j.ID || d.Cancels[0].Reason.Code != CodeDependencyNever || d.Cancels[0].Reason.Text != c.cancel {
					t.Errorf("%s: cancels %+v, want %q", c.name, d.Cancels, c.cancel)
				}
				for _, p := range d.Pending {
					if p.Job == c.j.ID {
						t.Errorf("%s: a cancelled job is also pending", c.name)
					}
				}
				continue
			}
			if len(d.Cancels) != 0 {
				t.Errorf("%s: cancels %+v", c.name, d.Cancels)
			}
			if c.start {
				continue
			}
			p := d.Pending[0]
			want := c.text
			if terse {
				want = ""
			}
			if p.Job != c.j.ID || p.Reason.Code != c.code || p.Reason.Text != want || p.Exhausted {
				t.Errorf("%s (terse %v): pending %+v, want %s %q", c.name, terse, p, c.code, want)
			}
		}
	}
}

// A gated job holds up no one, even under strict order, and takes no
// reservation.
func TestGatedJobsBlockNothing(t *testing.T) {
	hosts := []Host{host("a", gpus(2, 80*GiB)...)}
	run := running(1, "a", 0, "GPU-00")
	run.StartedAt, run.Spec.Timeout = t0, time.Hour
	held := queued(2, excl(2)) // would need both GPUs: a reservation, or a block
	held.Hold = &job.Hold{By: "u", At: t0}
	next := queued(3, excl(1))
	for _, pol := range []Policy{{Order: OrderFIFO, Backfill: BackfillNone}, {Backfill: BackfillEasy}} {
		d := Plan(Input{Now: t0, Hosts: hosts, Running: []job.Job{run}, Queue: []job.Job{held, next}, Policy: pol})
		if len(d.Starts) != 1 || d.Starts[0].Job != 3 || d.Pending[0].Reservation != nil {
			t.Errorf("%+v: %+v", pol, d)
		}
	}
}

// The forecast of a gated job: the time its --begin comes, the end of
// what it waits for (taken to succeed), or no start while it is held.
func TestForecastGates(t *testing.T) {
	hosts := []Host{host("a", gpus(2, 80*GiB)...)}
	run := running(1, "a", 0, "GPU-00")
	run.StartedAt, run.Spec.Timeout = t0, time.Hour
	late := queued(2, excl(1))
	late.Spec.Begin = t0.Add(3 * time.Hour)
	dep := after(queued(3, excl(1)), job.AfterOK, 1)
	notok := after(queued(4, excl(1)), job.AfterNotOK, 1)
	held := queued(5, excl(1))
	held.Hold = &job.Hold{By: "u", At: t0}
	in := Input{Now: t0, Hosts: hosts, Running: []job.Job{run}, Queue: []job.Job{late, dep, notok, held}}
	if f := ForecastStart(in, 2, nil); !f.Start.Equal(late.Spec.Begin) {
		t.Errorf("--begin: %+v", f)
	}
	if f := ForecastStart(in, 3, nil); !f.Start.Equal(t0.Add(time.Hour)) {
		t.Errorf("--after a job ending at 13:00: %+v", f)
	}
	if f := ForecastStart(in, 4, nil); !f.Start.IsZero() || !strings.Contains(f.Why, "if the jobs ahead succeed") {
		t.Errorf("--after-notok: %+v", f)
	}
	if f := ForecastStart(in, 5, nil); !f.Start.IsZero() || !strings.HasPrefix(f.Why, "held by u") {
		t.Errorf("held: %+v", f)
	}
}

// An array with %2 runs at most two tasks at once, counting the running
// ones and those this plan starts; the others wait with array_limit.
func TestArrayLimit(t *testing.T) {
	hosts := []Host{host("a", gpus(8, 80*GiB)...)}
	task := func(id job.ID, i int) job.Job {
		j := queued(id, excl(1))
		j.Spec.Array = &job.ArrayTask{Job: 10, Task: i, Tasks: 5, Limit: 2}
		return j
	}
	var queue []job.Job
	for i := range 5 {
		queue = append(queue, task(10+job.ID(i), i))
	}
	d := Plan(Input{Now: t0, Hosts: hosts, Queue: queue})
	if len(d.Starts) != 2 || d.Starts[0].Job != 10 || d.Starts[1].Job != 11 {
		t.Fatalf("starts %+v", d.Starts)
	}
	for _, p := range d.Pending {
		if p.Reason.Code != CodeArrayLimit || p.Reason.Text != "array 10 runs at most 2 of its tasks at once (--array %2)" {
			t.Errorf("pending %+v", p)
		}
	}
	run := queue[0]
	run.State, run.Placement = job.Running, job.Placement{Host: "a", GPUs: []string{"GPU-00"}, Indexes: []int{0}}
	d = Plan(Input{Now: t0, Hosts: hosts, Running: []job.Job{run}, Queue: queue[1:]})
	if len(d.Starts) != 1 || d.Starts[0].Job != 11 {
		t.Errorf("one running: starts %+v", d.Starts)
	}
}

// A dependency on a whole array is one entry: met when every task ended
// as its kind needs, cancelled at the first task that cannot.
func TestArrayDependency(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...)}
	task := func(id job.ID, i int, s job.State, reason string) job.Job {
		j := endedJob(id, s, reason)
		j.Spec.Array = &job.ArrayTask{Job: 10, Task: i, Tasks: 3}
		return j
	}
	dep := func(kind job.DepKind) job.Job {
		j := queued(20, excl(1))
		j.Spec.After = []job.Dependency{{Kind: kind, Job: 10, Tasks: 3}}
		return j
	}
	pending := queued(12, excl(8)) // never fits: stays queued
	pending.Spec.Array = &job.ArrayTask{Job: 10, Task: 2, Tasks: 3}
	for _, c := range []struct {
		name       string
		kind       job.DepKind
		tasks      []job.Job
		start      bool
		text, doom string
	}{
		{"two of three done", job.AfterOK, []job.Job{task(10, 0, job.Succeeded, "exit status 0"), task(11, 1, job.Succeeded, "exit status 0"), pending}, false, "waits for array 10 (1 of 3 tasks left) to succeed", ""},
		{"all succeeded", job.AfterOK, []job.Job{task(10, 0, job.Succeeded, ""), task(11, 1, job.Succeeded, ""), task(12, 2, job.Succeeded, "")}, true, "", ""},
		{"one failed", job.AfterOK, []job.Job{task(10, 0, job.Succeeded, ""), task(11, 1, job.Failed, "exit status 2"), pending}, false, "",
			"job 10_1 failed (exit status 2); --after needs every task of array 10 to succeed"},
		{"after-any, one cancelled", job.AfterAny, []job.Job{task(10, 0, job.Cancelled, "cancelled by u"), task(11, 1, job.Failed, ""), task(12, 2, job.Succeeded, "")}, true, "", ""},
		{"after-notok, one succeeded", job.AfterNotOK, []job.Job{task(10, 0, job.Failed, ""), task(11, 1, job.Succeeded, "exit status 0"), pending}, false, "",
			"job 10_1 succeeded (exit status 0); --after-notok needs every task of array 10 to fail, time out or be lost"},
		{"a task missing", job.AfterAny, []job.Job{task(10, 0, job.Succeeded, ""), task(11, 1, job.Succeeded, "")}, false, "",
			"job 12 of array 10 is not in the state; --after-any needs every task to end"},
	} {
		deps := map[job.ID]job.Job{}
		queue := []job.Job{dep(c.kind)}
		for _, tk := range c.tasks {
			if tk.State == job.Queued {
				queue = append(queue, tk)
			} else {
				deps[tk.ID] = tk
			}
		}
		d := Plan(Input{Now: t0, Hosts: hosts, Queue: queue, Deps: deps})
		started := slices.ContainsFunc(d.Starts, func(s Start) bool { return s.Job == 20 })
		switch {
		case started != c.start:
			t.Errorf("%s: started %v (%+v)", c.name, started, d)
		case c.doom != "" && (len(d.Cancels) != 1 || d.Cancels[0].Reason.Text != c.doom):
			t.Errorf("%s: cancels %+v, want %q", c.name, d.Cancels, c.doom)
		case c.text != "" && !slices.ContainsFunc(d.Pending, func(p Pending) bool { return p.Job == 20 && p.Reason.Text == c.text }):
			t.Errorf("%s: pending %+v, want %q", c.name, d.Pending, c.text)
		}
	}
}

// Job ids are written as runs, ", " between them, ten runs at the most
// and then how many jobs are left.
func TestIDRanges(t *testing.T) {
	ids := []job.ID{9, 10, 11, 12, 20, 14, 15}
	if got, want := idRanges(ids), "9-12, 14-15, 20"; got != want {
		t.Errorf("idRanges(%v) = %q, want %q", ids, got, want)
	}
	ids = nil
	for i := range 13 {
		ids = append(ids, job.ID(3*i+1)) // 1, 4, 7, ...: 13 runs of one
	}
	ids = append(ids, 41, 42) // a 14th run, 41-42: 5 jobs past the tenth run
	if got, want := idRanges(ids), "1, 4, 7, 10, 13, 16, 19, 22, 25, 28, and 5 more"; got != want {
		t.Errorf("idRanges(%v) = %q, want %q", ids, got, want)
	}
}
