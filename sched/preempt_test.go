package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

var rebalanceNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// victim is preemptible job id of user running exclusively on host's
// GPUs ids at priority prio, started ago before rebalanceNow.
func victim(id job.ID, user string, prio int, ago time.Duration, host string, ids ...string) job.Job {
	j := owned(running(id, host, 0, ids...), user)
	j.Spec.Priority, j.Spec.Preemptible, j.StartedAt = prio, true, rebalanceNow.Add(-ago)
	return j
}

// waiter is queued job id of user asking for n exclusive GPUs at prio,
// submitted 20 minutes before rebalanceNow.
func waiter(id job.ID, user string, prio, n int) job.Job {
	j := owned(queued(id, excl(n)), user)
	j.Spec.Priority, j.SubmittedAt = prio, rebalanceNow.Add(-20*time.Minute)
	return j
}

func rebalanceIn(hosts []Host, run []job.Job, queue ...job.Job) Input {
	return Input{Now: rebalanceNow, Policy: Policy{Weights: FairShareAlone, Rebalance: true}, Hosts: hosts, Running: run, Queue: queue}
}

// preempted is the victims of d as "victim>for".
func preempted(d Decisions) []string {
	var out []string
	for _, p := range d.Preempts {
		out = append(out, fmt.Sprintf("%d>%d", p.Job, p.For))
		if p.Reason.Code != CodePreempted || !strings.HasPrefix(p.Reason.Text, fmt.Sprintf("preempted for job %d of ", p.For)) {
			panic("reason " + p.Reason.Text)
		}
	}
	return out
}

// Victim choice: the fewest victims whose going lets the waiting job
// fit, then the least work lost (run time × GPUs), all on one host.
func TestRebalanceVictimChoice(t *testing.T) {
	a := host("a", gpus(4, 80*GiB)...)
	run := []job.Job{
		victim(1, "v", 6, 50*time.Minute, "a", "GPU-00"),
		victim(2, "v", 6, 20*time.Minute, "a", "GPU-01"),
		victim(3, "v", 6, 15*time.Minute, "a", "GPU-02", "GPU-03"),
	}
	for _, c := range []struct {
		name string
		gpus int
		want []string
	}{
		{"one GPU: the least work lost (20 GPU-min, not 3's 30)", 1, []string{"2>9"}},
		{"two GPUs: one victim before two", 2, []string{"3>9"}},
		{"three GPUs: the two youngest", 3, []string{"3>9", "2>9"}},
		{"four GPUs: all three", 4, []string{"3>9", "2>9", "1>9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Plan(rebalanceIn([]Host{a}, run, waiter(9, "w", 4, c.gpus)))
			if got := preempted(d); !slices.Equal(got, c.want) {
				t.Errorf("preempts %v, want %v", got, c.want)
			}
			if len(d.Starts) != 0 {
				t.Errorf("started %v while the victims still hold their GPUs", startIDs(d))
			}
		})
	}
	// On two hosts: the one where fewer must go.
	b := host("b", gpus(2, 80*GiB)...)
	run2 := append(slices.Clone(run), victim(4, "v", 6, 40*time.Minute, "b", "GPU-00", "GPU-01"))
	d := Plan(rebalanceIn([]Host{a, b}, run2, waiter(9, "w", 4, 2)))
	if got := preempted(d); !slices.Equal(got, []string{"3>9"}) || d.Preempts[0].Host != "a" {
		t.Errorf("preempts %v (%+v), want 3 on a (30 GPU-min, not 4's 80)", got, d.Preempts)
	}
}

// Who may be preempted: only running, preemptible, batch jobs that ran
// min_runtime since their (re)start, of a lower priority class or a
// user with a worse fair-share score; and only for a job that waited
// preempt_after.
func TestRebalanceWhoMayBePreempted(t *testing.T) {
	a := host("a", gpus(1, 80*GiB)...)
	base := victim(1, "v", 6, 30*time.Minute, "a", "GPU-00")
	for _, c := range []struct {
		name   string
		change func(v, w *job.Job, in *Input)
		want   bool
	}{
		{"lower priority class", func(v, w *job.Job, in *Input) {}, true},
		{"rebalance off", func(v, w *job.Job, in *Input) { in.Policy.Rebalance = false }, false},
		{"rebalance off, forced for the pass", func(v, w *job.Job, in *Input) { in.Policy.Rebalance, in.Rebalance = false, true }, true},
		{"not preemptible", func(v, w *job.Job, in *Input) { v.Spec.Preemptible = false }, false},
		{"interactive", func(v, w *job.Job, in *Input) { v.Spec.Interactive = &job.Interactive{Session: "s"} }, false},
		{"launching", func(v, w *job.Job, in *Input) { v.State = job.Launching }, false},
		{"ran less than min_runtime", func(v, w *job.Job, in *Input) { v.StartedAt = rebalanceNow.Add(-9 * time.Minute) }, false},
		{"ran just min_runtime", func(v, w *job.Job, in *Input) { v.StartedAt = rebalanceNow.Add(-10 * time.Minute) }, true},
		{"restarted within min_runtime of a preemption", func(v, w *job.Job, in *Input) {
			v.Restarts, v.Runs, v.StartedAt = 1, []job.Use{{User: "v", Started: rebalanceNow.Add(-time.Hour), Ended: rebalanceNow.Add(-30 * time.Minute), Share: 1}}, rebalanceNow.Add(-5*time.Minute)
		}, false},
		{"a smaller min_runtime", func(v, w *job.Job, in *Input) {
			v.StartedAt, in.Policy.MinRuntime = rebalanceNow.Add(-2*time.Second), time.Second
		}, true},
		{"waited less than preempt_after", func(v, w *job.Job, in *Input) { w.SubmittedAt = rebalanceNow.Add(-9 * time.Minute) }, false},
		{"requeued less than preempt_after ago", func(v, w *job.Job, in *Input) {
			w.Runs = []job.Use{{User: "w", Started: rebalanceNow.Add(-time.Hour), Ended: rebalanceNow.Add(-5 * time.Minute), Share: 1}}
		}, false},
		{"a smaller preempt_after", func(v, w *job.Job, in *Input) {
			w.SubmittedAt, in.Policy.PreemptAfter = rebalanceNow.Add(-2*time.Second), time.Second
		}, true},
		{"same class, same user", func(v, w *job.Job, in *Input) { v.Spec.Priority, v.User = 4, "w" }, false},
		{"a higher class than the waiting job", func(v, w *job.Job, in *Input) { v.Spec.Priority = 3 }, false},
		{"same class, worse fair-share score", func(v, w *job.Job, in *Input) {
			v.Spec.Priority, in.Usage = 4, map[string]float64{"v": 7200, "w": 3600}
		}, true},
		{"same class, better fair-share score", func(v, w *job.Job, in *Input) {
			v.Spec.Priority, in.Usage = 4, map[string]float64{"v": 3600, "w": 7200}
		}, false},
		{"same class, a weight that makes the score better", func(v, w *job.Job, in *Input) {
			v.Spec.Priority, in.Usage = 4, map[string]float64{"v": 7200, "w": 3600}
			in.Policy.Users = map[string]UserShare{"v": {Weight: 4}}
		}, false},
		{"same class under order priority: fair-share does not rank", func(v, w *job.Job, in *Input) {
			v.Spec.Priority, in.Usage, in.Policy.Order = 4, map[string]float64{"v": 7200, "w": 3600}, OrderPriority
		}, false},
		{"lower class under order priority", func(v, w *job.Job, in *Input) { in.Policy.Order = OrderPriority }, true},
		{"order fifo", func(v, w *job.Job, in *Input) { in.Policy.Order = OrderFIFO }, false},
		{"the waiting job is held", func(v, w *job.Job, in *Input) { w.Hold = &job.Hold{By: "w"} }, false},
		{"the waiting job's owner within its cap", func(v, w *job.Job, in *Input) {
			in.Policy.Users = map[string]UserShare{"w": {Weight: 1, Caps: Caps{MaxJobs: 1}}}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, w := base, waiter(9, "w", 4, 1)
			in := rebalanceIn([]Host{a}, nil)
			c.change(&v, &w, &in)
			in.Running, in.Queue = []job.Job{v}, []job.Job{w}
			d := Plan(in)
			if got := len(d.Preempts) > 0; got != c.want {
				t.Fatalf("preempts %+v, want some: %v", d.Preempts, c.want)
			}
			if c.want && !strings.Contains(d.Preempts[0].Reason.Text, "ranks ahead") {
				t.Errorf("reason %q", d.Preempts[0].Reason.Text)
			}
		})
	}
}

// The reasons name the waiting job, its user and what ranks it ahead.
func TestRebalanceReasons(t *testing.T) {
	a := host("a", gpus(1, 80*GiB)...)
	d := Plan(rebalanceIn([]Host{a}, []job.Job{victim(1, "bob", 6, time.Hour, "a", "GPU-00")}, waiter(9, "alice", 4, 1)))
	if len(d.Preempts) != 1 || d.Preempts[0].Reason.Text != "preempted for job 9 of alice (priority 4 ranks ahead of 6)" {
		t.Errorf("preempts %+v", d.Preempts)
	}
	in := rebalanceIn([]Host{a}, []job.Job{victim(1, "bob", 4, time.Hour, "a", "GPU-00")}, waiter(9, "alice", 4, 1))
	in.Usage = map[string]float64{"alice": 1080, "bob": 6480}
	d = Plan(in)
	if len(d.Preempts) != 1 || d.Preempts[0].Reason.Text != "preempted for job 9 of alice (fair-share: alice's score 0.30 ranks ahead of bob's 1.8)" {
		t.Errorf("preempts %+v", d.Preempts)
	}
	// Under the default weights the reason gives both priorities.
	in.Policy.Weights = Weights{}
	d = Plan(in)
	if len(d.Preempts) != 1 || d.Preempts[0].Reason.Text != "preempted for job 9 of alice (alice's priority 0.79 = fair-share 0.74 + age 0.00 + size 0.05 ranks ahead of bob's priority 0.36 = fair-share 0.30 + age 0.00 + size 0.05)" {
		t.Errorf("default weights: preempts %+v", d.Preempts)
	}
}

// Never preempt for a job that would not fit once the victims are gone,
// nor for one whose room another job would take, nor beyond a cap.
func TestRebalanceOnlyWhatStarts(t *testing.T) {
	// Two GPUs held by other people's processes: the waiting job's three
	// never fit, whatever goes.
	h := host("a", gpus(4, 80*GiB)...)
	for i := range 2 {
		h.Snapshot.GPUs[i] = with(h.Snapshot.GPUs[i], foreign)
	}
	run := []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-02"), victim(2, "v", 6, time.Hour, "a", "GPU-03")}
	if d := Plan(rebalanceIn([]Host{h}, run, waiter(9, "w", 4, 3))); len(d.Preempts) != 0 {
		t.Errorf("preempts %+v for a job that never fits", d.Preempts)
	}
	if d := Plan(rebalanceIn([]Host{h}, run, waiter(9, "w", 4, 2))); !slices.Equal(preempted(d), []string{"1>9", "2>9"}) {
		t.Errorf("preempts %v, want 1 and 2: two GPUs fit", preempted(d))
	}

	// Caps: bob's victim going would let bob's own capped job of a higher
	// class in, which takes the GPU first: no preemption for w.
	one := host("a", gpus(1, 80*GiB)...)
	capped := owned(queued(5, excl(1)), "bob")
	capped.Spec.Priority, capped.SubmittedAt = 2, rebalanceNow.Add(-time.Hour)
	in := rebalanceIn([]Host{one}, []job.Job{victim(1, "bob", 6, time.Hour, "a", "GPU-00")}, capped, waiter(9, "w", 4, 1))
	in.Policy.Users = map[string]UserShare{"bob": {Weight: 1, Caps: Caps{MaxJobs: 1}}}
	d := Plan(in)
	if len(d.Preempts) != 0 {
		t.Errorf("preempts %+v: job 5 (bob's, under his cap once 1 is gone) would take the GPU", d.Preempts)
	}
	for _, p := range d.Pending {
		if p.Job == 5 && p.Reason.Code != CodeUserCap {
			t.Errorf("job 5: %+v", p.Reason)
		}
	}
	// Without the cap bob's job 5 is itself the first waiting job, and
	// may preempt bob's own lower-class job.
	in.Policy.Users = nil
	if got := preempted(Plan(in)); !slices.Equal(got, []string{"1>5"}) {
		t.Errorf("preempts %v, want 1 for 5", got)
	}
	// The waiting job's own cap: w runs one job already, its cap is one:
	// gated, no reason to preempt.
	in = rebalanceIn([]Host{one, host("b", gpu(0, 80*GiB))}, []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00"), owned(running(2, "b", 0, "GPU-00"), "w")}, waiter(9, "w", 4, 1))
	in.Policy.Users = map[string]UserShare{"w": {Weight: 1, Caps: Caps{MaxJobs: 1}}}
	if d := Plan(in); len(d.Preempts) != 0 || d.Pending[0].Reason.Code != CodeUserCap {
		t.Errorf("preempts %+v, pending %+v: w is at its cap", d.Preempts, d.Pending)
	}
}

// While some job is being preempted, no pass chooses more victims; the
// first qualifying job in queue order gets them, and no more jobs than it
// needs are preempted in one plan.
func TestRebalanceOneRoundAtATime(t *testing.T) {
	a := host("a", gpus(2, 80*GiB)...)
	run := []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00"), victim(2, "v", 6, 2*time.Hour, "a", "GPU-01")}
	d := Plan(rebalanceIn([]Host{a}, run, waiter(8, "w", 4, 1), waiter(9, "w", 4, 1)))
	if got := preempted(d); !slices.Equal(got, []string{"1>8"}) {
		t.Fatalf("preempts %v, want only 1 for 8 (the first waiting job; one pass, one job's victims)", got)
	}
	run[0].State = job.Preempting
	if d := Plan(rebalanceIn([]Host{a}, run, waiter(8, "w", 4, 1), waiter(9, "w", 4, 1))); len(d.Preempts) != 0 {
		t.Errorf("preempts %+v while job 1 is preempting", d.Preempts)
	}
	// Nor for a job that fits now: it starts.
	free := host("a", gpus(3, 80*GiB)...)
	if d := Plan(rebalanceIn([]Host{free}, run[1:], waiter(8, "w", 4, 1))); len(d.Preempts) != 0 || !slices.Equal(startIDs(d), []job.ID{8}) {
		t.Errorf("preempts %+v, starts %v", d.Preempts, startIDs(d))
	}
}

// A plan with rebalancing decides the same starts and reasons as one
// without, and leaves its input as it was.
func TestRebalanceChangesNoStart(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...), host("b", with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthOK }))}
	run := []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00", "GPU-01"), victim(2, "v", 6, time.Hour, "a", "GPU-02", "GPU-03")}
	queue := []job.Job{waiter(7, "w", 4, 1), waiter(8, "w", 4, 2), waiter(9, "w", 4, 4)}
	in := rebalanceIn(hosts, run, queue...)
	on := Plan(in)
	in.Policy.Rebalance = false
	off := Plan(in)
	if len(on.Preempts) == 0 || len(off.Preempts) != 0 {
		t.Fatalf("preempts on %+v, off %+v", on.Preempts, off.Preempts)
	}
	on.Preempts = nil
	if !slices.EqualFunc(on.Starts, off.Starts, func(a, b Start) bool { return a.Job == b.Job && a.Placement.Host == b.Placement.Host }) || len(on.Pending) != len(off.Pending) {
		t.Errorf("with rebalancing %+v, without %+v", on, off)
	}
	if run[0].State != job.Running || queue[0].State != job.Queued {
		t.Error("the input changed")
	}
}

// A plan that preempts nothing says which setting holds each waiting job
// back, and how far it is from letting it.
func TestRebalanceHolds(t *testing.T) {
	a := host("a", gpus(1, 80*GiB)...)
	for _, c := range []struct {
		name string
		in   Input
		want []Hold
	}{
		{"preempt_after", func() Input {
			in := rebalanceIn([]Host{a}, []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00")}, waiter(9, "w", 4, 1))
			in.Queue[0].SubmittedAt = rebalanceNow.Add(-6*time.Minute - 50*time.Second)
			return in
		}(), []Hold{{Job: 9, Ref: "9", Setting: "preempt_after", Text: "preempt_after: 3m10s to go (it has waited 6m50s of 10m)"}}},
		{"min_runtime", rebalanceIn([]Host{a}, []job.Job{victim(1, "v", 6, 2*time.Minute, "a", "GPU-00")}, waiter(9, "w", 4, 1)),
			[]Hold{{Job: 9, Ref: "9", Setting: "min_runtime", Text: "min_runtime: 8m to go (job 1, which ranks behind it, has run 2m of 10m)"}}},
		{"no victim", rebalanceIn([]Host{a}, []job.Job{victim(1, "v", 2, time.Hour, "a", "GPU-00")}, waiter(9, "w", 4, 1)),
			[]Hold{{Job: 9, Ref: "9", Text: "no running job may be preempted for it: none preemptible ranks behind it, or their going leaves it no room"}}},
		{"fifo", func() Input {
			in := rebalanceIn([]Host{a}, []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00")}, waiter(9, "w", 4, 1))
			in.Policy.Order = OrderFIFO
			return in
		}(), []Hold{{Setting: "order", Text: "order: fifo preempts nothing (rebalancing goes by priority or fair-share: order: priority or fairshare)"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Plan(c.in)
			if len(d.Preempts) != 0 || !slices.Equal(d.Holds, c.want) {
				t.Errorf("preempts %v, holds %+v; want none and %+v", preempted(d), d.Holds, c.want)
			}
		})
	}
	// Once it may, it preempts, and holds nothing.
	d := Plan(rebalanceIn([]Host{a}, []job.Job{victim(1, "v", 6, time.Hour, "a", "GPU-00")}, waiter(9, "w", 4, 1)))
	if got := preempted(d); !slices.Equal(got, []string{"1>9"}) || d.Holds != nil {
		t.Errorf("preempts %v, holds %+v; want 1>9 and none", got, d.Holds)
	}
}
