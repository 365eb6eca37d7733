package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// A job's GPU share: 1 per whole GPU taken exclusively, a MIG device's part
// of its GPU, a --mem job's part of the GPU's memory.
func TestShares(t *testing.T) {
	for _, tt := range []struct {
		hosts []Host
		req   Request
		want  float64
	}{
		{[]Host{host("h", gpus(4, 80*GiB)...)}, excl(2), 2},
		{[]Host{host("h", gpus(4, 80*GiB)...)}, shared(1, 8*GiB), 0.1},
		{[]Host{host("h", gpus(4, 80*GiB)...)}, shared(2, 40*GiB), 1},
		{[]Host{host("h", migGPU(0))}, excl(1), 0.5},
	} {
		d := plan1(tt.hosts, nil, tt.req)
		if len(d.Starts) != 1 || math.Abs(d.Starts[0].Placement.Share-tt.want) > 1e-9 {
			t.Errorf("%+v: %+v, want share %g", tt.req, d.Starts, tt.want)
		}
	}
	if u, _ := (job.Job{StartedAt: t0, Placement: job.Placement{GPUs: []string{"a", "b"}}}).Use(); u.Share != 2 {
		t.Errorf("a placement without a share counts its GPUs")
	}
}

// Usage, worked by hand: GPU-seconds, halved every half-life, or summed
// over the window; running jobs count up to now.
func TestUsage(t *testing.T) {
	h := time.Hour
	ran := func(user string, share float64, from, to time.Duration, state job.State) job.Job {
		j := job.Job{User: user, State: state, StartedAt: t0.Add(from), Placement: job.Placement{Share: share}}
		if state.Terminal() {
			j.EndedAt = t0.Add(to)
		}
		return j
	}
	now := t0.Add(48 * h)
	jobs := []job.Job{
		ran("ann", 2, 46*h, 47*h, job.Succeeded), // 2 GPUs for an hour, ended an hour ago
		ran("bob", 1, 47*h, 0, job.Running),      // 1 GPU since an hour ago, running
		ran("cat", 1, 0, 24*h, job.Failed),       // a day-long job that ended a day ago
		{User: "dan", State: job.Queued},         // never started
	}
	// Half-life 1h: ann: 2 × h/ln2 × (2^-1 − 2^-2) = 2 × 3600/ln2 × 0.25.
	got := Usage(Uses(jobs), now, FairShare{HalfLife: h})
	want := map[string]float64{
		"ann": 2 * 3600 / math.Ln2 * (0.5 - 0.25),
		"bob": 3600 / math.Ln2 * (1 - 0.5),
		"cat": 3600 / math.Ln2 * (math.Exp2(-24) - math.Exp2(-48)),
	}
	for u, w := range want {
		if math.Abs(got[u]-w) > 1e-6 {
			t.Errorf("half-life: %s = %g, want %g", u, got[u], w)
		}
	}
	if _, ok := got["dan"]; ok {
		t.Error("a job that never started counts")
	}
	// Window 24h: ann 7200, bob 3600; cat ended exactly at the window's start.
	got = Usage(Uses(jobs), now, FairShare{Window: 24 * h})
	if got["ann"] != 7200 || got["bob"] != 3600 || got["cat"] != 0 {
		t.Errorf("window: %v", got)
	}
	// With no half-life the default (24h) applies: an hour just ended
	// counts almost whole.
	got = Usage(Uses(jobs[:1]), t0.Add(47*h), FairShare{})
	if w := 2 * 86400 / math.Ln2 * (1 - math.Exp2(-1.0/24)); math.Abs(got["ann"]-w) > 1e-6 {
		t.Errorf("default half-life: %g, want %g", got["ann"], w)
	}
}

// The order under fairshare: priority class first, then the score
// (usage / weight, lowest first), then submit order.
func TestFairShareOrder(t *testing.T) {
	hosts := []Host{host("h", gpus(1, 80*GiB)...)}
	j := func(id job.ID, user string, prio int) job.Job {
		q := queued(id, excl(1))
		q.User, q.Spec.Priority = user, prio
		return q
	}
	queue := []job.Job{j(1, "ann", 5), j(2, "bob", 5), j(3, "cat", 5), j(4, "dan", 4), j(5, "bob", 5)}
	usage := map[string]float64{"ann": 3 * 3600, "bob": 1 * 3600, "cat": 4 * 3600, "dan": 100 * 3600}
	pol := Policy{Weights: FairShareAlone, Users: map[string]UserShare{"cat": {Weight: 4}}} // cat's score: 1.0
	d := Plan(Input{Hosts: hosts, Queue: queue, Usage: usage, Policy: pol, Explain: 1})
	var order []job.ID
	for _, s := range d.Starts {
		order = append(order, s.Job)
	}
	for _, p := range d.Pending {
		order = append(order, p.Job)
	}
	// dan (priority 4) first whatever his usage; then bob 1.0 (job 2 before
	// job 5), cat 1.0 (4 GPU-hours / weight 4; bob's jobs were submitted
	// first), ann 3.0.
	if want := []job.ID{4, 2, 3, 5, 1}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if p := d.Pending[3]; p.Job != 1 || p.Position != 5 || p.Rank != "5th in the queue: ann's fair-share score 3.0 ranks behind bob 1.0 and cat 1.0; behind 1 job of a higher priority class" {
		t.Errorf("the last: %+v", p)
	}
	// bob's second job: behind his first, not behind other users.
	if p := Plan(Input{Hosts: hosts, Queue: queue, Usage: usage, Policy: pol, Explain: 5}).Pending[2]; p.Job != 5 || p.Rank !=
		"4th in the queue: bob's fair-share score 1.0 ranks behind cat 1.0; behind 1 earlier job of bob's own; behind 1 job of a higher priority class" {
		t.Errorf("bob's second: %+v", p)
	}
	if got := []string{ScoreText(0), ScoreText(10), ScoreText(0.42 * 3600), ScoreText(17.34 * 3600)}; !slices.Equal(got, []string{"0", "<0.01", "0.42", "17.3"}) {
		t.Errorf("score texts %q", got)
	}
	// The same queue under priority order: submit order within the class.
	d = Plan(Input{Hosts: hosts, Queue: queue, Usage: usage, Policy: Policy{Order: OrderPriority}})
	if d.Starts[0].Job != 4 || d.Pending[0].Job != 1 {
		t.Errorf("priority order: %+v", d)
	}
}

// Best fit packs, first fit fragments: shared jobs fill the fullest GPU
// first; a 1-GPU exclusive job takes the host with one free GPU, not the
// only host with four, so a 4-GPU job still fits.
func TestBestFit(t *testing.T) {
	g := gpus(2, 80*GiB)
	foreign(&g[1]) // GPU 1: 1 GiB used by someone
	hosts := []Host{host("a", g...)}
	for fit, want := range map[Fit]int{FitFirst: 0, FitBest: 1} {
		d := Plan(Input{Hosts: hosts, Queue: []job.Job{queued(1, shared(1, 8*GiB))}, Policy: Policy{Fit: fit}})
		if d.Starts[0].Placement.Indexes[0] != want {
			t.Errorf("%s: shared job on GPU %d, want %d", fit, d.Starts[0].Placement.Indexes[0], want)
		}
	}
	// Host a: 4 free GPUs; host b: 1 free of 2.
	hosts = []Host{host("a", gpus(4, 80*GiB)...), host("b", gpus(2, 80*GiB)...)}
	run := []job.Job{running(1, "b", 0, "GPU-00")}
	queue := []job.Job{queued(2, excl(1)), queued(3, excl(4))}
	first := Plan(Input{Hosts: hosts, Running: run, Queue: queue, Policy: Policy{Fit: FitFirst, Backfill: BackfillSkip}})
	best := Plan(Input{Hosts: hosts, Running: run, Queue: queue, Policy: Policy{Fit: FitBest, Backfill: BackfillSkip}})
	if len(first.Starts) != 1 || first.Starts[0].Placement.Host != "a" {
		t.Errorf("first fit: %+v", first.Starts)
	}
	if len(best.Starts) != 2 || best.Starts[0].Placement.Host != "b" || best.Starts[1].Placement.Host != "a" {
		t.Errorf("best fit: %+v (the 1-GPU job must take b, leaving a whole for the 4-GPU job)", best.Starts)
	}
	// A job that takes a GPU whole takes the smallest there is, on a
	// host (GPU 1 of 24 GiB before GPU 0 of 80) and across hosts (b's 24
	// GiB before a's 80, though a would be left with fewer free GPUs):
	// the large GPUs stay for the jobs that need their memory. A shared
	// job still goes where it leaves least.
	mixed := []gpuinfo.GPU{gpu(0, 80*GiB), gpu(1, 24*GiB)}
	hosts = []Host{host("a", mixed...)}
	queue = []job.Job{queued(1, excl(1)), queued(2, shared(1, 40*GiB))}
	for fit, want := range map[Fit][]int{FitFirst: {0, 1}, FitBest: {1, 0}} {
		d := Plan(Input{Hosts: hosts, Queue: queue[:1], Policy: Policy{Fit: fit}})
		if got := d.Starts[0].Placement.Indexes[0]; got != want[0] {
			t.Errorf("%s: exclusive job on GPU %d of a, want %d", fit, got, want[0])
		}
	}
	if d := Plan(Input{Hosts: hosts, Queue: queue, Policy: Policy{Fit: FitBest, Backfill: BackfillSkip}}); len(d.Starts) != 2 || d.Starts[1].Placement.Indexes[0] != 0 {
		t.Errorf("best fit: %+v: the 40 GiB job must find GPU 0 of 80 GiB free", d.Starts)
	}
	hosts = []Host{host("a", gpus(2, 80*GiB)...), host("b", gpus(4, 24*GiB)...)}
	run = []job.Job{running(1, "a", 0, "GPU-00")}
	if d := Plan(Input{Hosts: hosts, Running: run, Queue: queue[:1], Policy: Policy{Fit: FitBest}}); d.Starts[0].Placement.Host != "b" {
		t.Errorf("best fit: exclusive job on %s, want b's smaller GPUs", d.Starts[0].Placement.Host)
	}
}

// EASY backfill: the first job that cannot start gets a reservation from
// the running jobs' walltimes; a job behind it starts now only if it ends
// before the reservation or stays off the reserved GPUs.
func TestEasyBackfill(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...), host("b", gpus(1, 80*GiB)...)}
	long := func(id job.ID, gpu string, left time.Duration) job.Job {
		j := running(id, "a", 0, gpu)
		j.StartedAt, j.Spec.Timeout = t0, time.Hour+left
		return j
	}
	// On a: GPUs 0 and 1 busy until 13:30 and 15:00 (walltimes); 2, 3 free.
	run := []job.Job{long(1, "GPU-00", 30*time.Minute), long(2, "GPU-01", 2*time.Hour)}
	big := queued(10, excl(4))
	short := queued(11, excl(1))
	short.Spec.Timeout = time.Hour // ends at 14:00, before 15:00
	longer := queued(12, excl(1))
	longer.Spec.Timeout = 5 * time.Hour // would run past 15:00
	longest := queued(13, excl(1))      // no walltime: the 24 h estimate
	in := Input{Now: t0.Add(time.Hour), Hosts: hosts, Running: run, Queue: []job.Job{big, short, longer, longest}, Policy: Policy{Weights: FairShareAlone}}
	d := Plan(in)
	starts := map[job.ID]string{}
	for _, s := range d.Starts {
		starts[s.Job] = fmt.Sprintf("%s:%v", s.Placement.Host, s.Placement.Indexes)
	}
	// The 4-GPU job waits for 15:00, when job 2's walltime ends: a GPU 0-3.
	p := d.Pending[0]
	if p.Job != 10 || p.Reservation == nil || p.Reservation.String() != "reserved a GPU 0-3 from 2026-12-01 15:00 UTC" {
		t.Fatalf("the big job: %+v", p)
	}
	// The short job fits before it, on a; the longer one only off the
	// reservation, on b; the last finds nothing left.
	if starts[11] != "a:[2]" || starts[12] != "b:[0]" || len(starts) != 2 {
		t.Errorf("starts %v", starts)
	}
	last := d.Pending[1]
	if last.Job != 13 || !strings.Contains(last.Reason.Text, "reserved for job 10 from 2026-12-01 15:00 UTC") || last.Reason.Code != CodeNoFreeGPU && last.Reason.Code != CodeReserved {
		t.Errorf("the last: %+v", last)
	}
	// Forecasts: the big job at its reservation; the last once job 12's
	// walltime frees b (a is the big job's from 15:00 for 24 hours).
	for id, want := range map[job.ID]string{10: "2026-12-01 15:00 a:[0 1 2 3]", 13: "2026-12-01 18:00 b:[0]", 11: "2026-12-01 13:00 a:[2]"} {
		f := ForecastStart(in, id, nil)
		if got := f.Start.Format("2006-01-02 15:04") + " " + fmt.Sprintf("%s:%v", f.Placement.Host, f.Placement.Indexes); got != want || f.Estimated {
			t.Errorf("forecast of job %d: %s (%+v), want %s", id, got, f, want)
		}
	}
	if f := ForecastStart(in, 99, nil); f.Why != "job 99 is not queued" {
		t.Errorf("forecast of a job not queued: %+v", f)
	}
	// Without backfill (skip), the longer job takes a GPU of the reserved
	// host and the big job waits past 15:00.
	in.Policy.Backfill = BackfillSkip
	if d := Plan(in); len(d.Starts) != 3 {
		t.Errorf("skip: %+v", d.Starts)
	}
}

// No starvation: a 4-GPU job under a steady stream of 1-GPU jobs from
// another user (each an hour, their ends 15 minutes apart, so the four
// GPUs are never free at once). Under EASY the reservation makes the
// stream drain off the GPUs and the job starts when the last running one
// reaches its walltime; under skip the stream keeps it waiting.
func TestNoStarvation(t *testing.T) {
	for _, tt := range []struct {
		backfill Backfill
		startsBy time.Duration // after t0; 0: never, in 12 hours
	}{{BackfillEasy, time.Hour}, {BackfillSkip, 0}} {
		lab := &miniLab{hosts: []Host{host("a", gpus(4, 80*GiB)...)}, policy: Policy{Backfill: tt.backfill}, now: t0}
		for i := range 4 { // walltime 1h; they end at 15, 30, 45, 60 min
			lab.submit("ann", excl(1), time.Hour, time.Duration(i)*15*time.Minute)
		}
		lab.run(time.Minute)
		bigID := lab.submit("bob", excl(4), time.Hour, 0)
		for range 48 {
			for lab.queued("ann") < 4 {
				lab.submit("ann", excl(1), time.Hour, 0)
			}
			lab.run(15 * time.Minute)
			if lab.jobs[bigID].State != job.Queued {
				break
			}
		}
		big := lab.jobs[bigID]
		switch {
		case tt.startsBy == 0 && big.State != job.Queued:
			t.Errorf("%s: the 4-GPU job started at %s under a stream that never leaves 4 GPUs free", tt.backfill, big.StartedAt)
		case tt.startsBy > 0 && (big.State == job.Queued || big.StartedAt.After(t0.Add(tt.startsBy))):
			t.Errorf("%s: the 4-GPU job %s (started %s), want by %s", tt.backfill, big.State, big.StartedAt, t0.Add(tt.startsBy))
		}
	}
}

// Over a long run with a virtual clock, two users of weights 1:1 and then
// 1:3 who always have jobs queued get GPU-seconds in the ratio of their
// weights, within 10 %, after 200 jobs.
func TestFairShareSplit(t *testing.T) {
	for _, weights := range [][2]float64{{1, 1}, {1, 3}} {
		lab := &miniLab{hosts: []Host{host("a", gpus(4, 80*GiB)...)}, now: t0,
			policy: Policy{Users: map[string]UserShare{"ann": {Weight: weights[0]}, "bob": {Weight: weights[1]}}}}
		for lab.ended < 200 {
			for _, u := range []string{"ann", "bob"} {
				for lab.queued(u) < 8 {
					lab.submit(u, excl(1), time.Hour, 0)
				}
			}
			lab.run(15 * time.Minute)
		}
		got := lab.gpuSeconds()
		ratio := got["bob"] / got["ann"]
		if want := weights[1] / weights[0]; math.Abs(ratio-want)/want > 0.10 {
			t.Errorf("weights %v: GPU-seconds %v, ratio %.2f, want %.2f ± 10%%", weights, got, ratio, want)
		}
	}
}

// miniLab runs the planner over time: jobs run exactly their runtime.
type miniLab struct {
	hosts   []Host
	policy  Policy
	now     time.Time
	jobs    map[job.ID]*job.Job
	runtime map[job.ID]time.Duration
	next    job.ID
	ended   int
}

func (l *miniLab) submit(user string, r Request, runtime, walltimeLeft time.Duration) job.ID {
	if l.jobs == nil {
		l.jobs, l.runtime = map[job.ID]*job.Job{}, map[job.ID]time.Duration{}
	}
	l.next++
	j := queued(l.next, r)
	j.User, j.SubmittedAt, j.Spec.Timeout = user, l.now, runtime
	l.jobs[j.ID], l.runtime[j.ID] = &j, runtime-walltimeLeft
	return j.ID
}

func (l *miniLab) queued(user string) int {
	n := 0
	for _, j := range l.jobs {
		if j.User == user && j.State == job.Queued {
			n++
		}
	}
	return n
}

// run advances the clock by d in one-minute steps, ending jobs and
// planning after every step with something to do.
func (l *miniLab) run(d time.Duration) {
	for end := l.now.Add(d); l.now.Before(end); l.now = l.now.Add(time.Minute) {
		var all, running, queue []job.Job
		for _, id := range slices.Sorted(func(yield func(job.ID) bool) {
			for id := range l.jobs {
				if !yield(id) {
					return
				}
			}
		}) {
			j := l.jobs[id]
			if j.State == job.Running && !l.now.Before(j.StartedAt.Add(l.runtime[id])) {
				j.State, j.EndedAt = job.Succeeded, j.StartedAt.Add(l.runtime[id])
				l.ended++
			}
			all = append(all, *j)
			switch j.State {
			case job.Running:
				running = append(running, *j)
			case job.Queued:
				queue = append(queue, *j)
			}
		}
		d := Plan(Input{Now: l.now, Policy: l.policy, Hosts: l.hosts, Running: running, Queue: queue, Usage: Usage(Uses(all), l.now, l.policy.FairShare)})
		for _, s := range d.Starts {
			j := l.jobs[s.Job]
			j.State, j.Placement, j.StartedAt = job.Running, s.Placement, l.now
		}
	}
}

func (l *miniLab) gpuSeconds() map[string]float64 {
	out := map[string]float64{}
	for _, j := range l.jobs {
		if j.State.Terminal() {
			u, _ := j.Use()
			out[j.User] += u.Ended.Sub(u.Started).Seconds() * u.Share
		}
	}
	return out
}

// A forecast waits for ends it assumed (no walltime: the estimate) and
// gives up on a job no end makes room for.
func TestForecast(t *testing.T) {
	hosts := []Host{host("a", gpus(1, 80*GiB)...)}
	r := running(1, "a", 0, "GPU-00")
	r.StartedAt = t0
	q := queued(2, excl(1))
	in := Input{Now: t0.Add(time.Hour), Hosts: hosts, Running: []job.Job{r}, Queue: []job.Job{q}}
	if f := ForecastStart(in, 2, nil); !f.Start.Equal(t0.Add(DefaultBackfillEstimate)) || !f.Estimated {
		t.Errorf("behind a job without walltime: %+v", f)
	}
	in.Policy.BackfillEstimate = 2 * time.Hour
	if f := ForecastStart(in, 2, nil); !f.Start.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("with a 2h estimate: %+v", f)
	}
	in.Hosts[0].Drain = true
	if f := ForecastStart(in, 2, nil); !f.Start.IsZero() || f.Why != "no job's end makes room: a: drained" {
		t.Errorf("a drained host: %+v", f)
	}
}

// Only an enforced walltime lets a job onto reserved GPUs: one without
// (its 24 h estimate ends before the reservation) could run for a week.
func TestBackfillNeedsAWalltime(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...)}
	r := func(id job.ID, gpu string) job.Job {
		j := running(id, "a", 0, gpu)
		j.StartedAt, j.Spec.Timeout = t0, 48*time.Hour
		return j
	}
	run := []job.Job{r(1, "GPU-00"), r(2, "GPU-01")}
	for _, tt := range []struct {
		timeout time.Duration
		starts  bool
	}{{0, false}, {time.Hour, true}, {49 * time.Hour, false}} {
		small := queued(11, excl(1))
		small.Spec.Timeout = tt.timeout
		d := Plan(Input{Now: t0, Hosts: hosts, Running: run, Queue: []job.Job{queued(10, excl(4)), small}, Policy: Policy{Weights: FairShareAlone}})
		if got := len(d.Starts) == 1 && d.Starts[0].Job == 11; got != tt.starts {
			t.Errorf("timeout %s: starts %+v, pending %+v", tt.timeout, d.Starts, d.Pending)
		}
		if !tt.starts && !strings.Contains(d.Pending[1].Reason.Text, "GPU 2,3: reserved for job 10 from 2026-12-03 12:00 UTC") {
			t.Errorf("timeout %s: %+v", tt.timeout, d.Pending[1])
		}
	}
	// With a default_timeout every job has one.
	d := Plan(Input{Now: t0, Hosts: hosts, Running: run, Queue: []job.Job{queued(10, excl(4)), queued(11, excl(1))},
		Policy: Policy{Weights: FairShareAlone, DefaultTimeout: time.Hour}})
	if len(d.Starts) != 1 {
		t.Errorf("default_timeout 1h: %+v", d)
	}
}

// A job that outran the estimate (no walltime) is assumed to run another
// estimate: it does not pin the reservation to now when another host
// drains within the hour.
func TestOverdueJobDoesNotPinTheReservation(t *testing.T) {
	hosts := []Host{host("a", gpus(4, 80*GiB)...), host("b", gpus(4, 80*GiB)...)}
	old := running(1, "a", 0, "GPU-00")
	old.StartedAt = t0.Add(-25 * time.Hour)
	run := []job.Job{old}
	for i := range 4 {
		j := running(job.ID(2+i), "b", 0, fmt.Sprintf("GPU-%02d", i))
		j.StartedAt, j.Spec.Timeout = t0, time.Hour+time.Duration(i)*time.Minute
		run = append(run, j)
	}
	d := Plan(Input{Now: t0, Hosts: hosts, Running: run, Queue: []job.Job{queued(10, excl(4))}})
	if p := d.Pending[0]; p.Reservation == nil || p.Reservation.Host != "b" || !p.Reservation.From.Equal(t0.Add(63*time.Minute)) {
		t.Errorf("reservation %v, want b from 13:03", p.Reservation)
	}
	// Alone, it is assumed to end with its second estimate (48 h after its
	// start), and the time stays put from pass to pass.
	for _, now := range []time.Time{t0, t0.Add(10 * time.Minute), t0.Add(22 * time.Hour)} {
		d := Plan(Input{Now: now, Hosts: hosts[:1], Running: run[:1], Queue: []job.Job{queued(10, excl(4))}})
		if p := d.Pending[0]; p.Reservation == nil || !p.Reservation.From.Equal(old.StartedAt.Add(48*time.Hour)) {
			t.Errorf("at %s: reservation %v, want from %s", now, p.Reservation, old.StartedAt.Add(48*time.Hour))
		}
	}
}

// The forecast goes on past a job whose reason is mostly drained hosts
// (it is still exhausted on one), and works usage out again as the jobs
// it plays forward accrue it.
func TestForecastUsage(t *testing.T) {
	drained := func(name string) Host { h := host(name, gpus(1, 80*GiB)...); h.Drain = true; return h }
	hosts := []Host{drained("a"), drained("b"), host("c", gpus(1, 80*GiB)...)}
	r := running(1, "c", 0, "GPU-00")
	r.User, r.StartedAt, r.Spec.Timeout = "ann", t0, 8*time.Hour
	mine, bobs := queued(2, excl(1)), queued(3, excl(1))
	mine.User, mine.Spec.Timeout = "ann", time.Hour
	bobs.User, bobs.Spec.Timeout = "bob", time.Hour
	week := FairShare{Window: 7 * 24 * time.Hour}
	bobUsed := []job.Use{{User: "bob", Started: t0.Add(-2 * time.Hour), Ended: t0.Add(-time.Hour), Share: 1}}
	in := Input{Now: t0, Hosts: hosts, Running: []job.Job{r}, Queue: []job.Job{mine, bobs}, Policy: Policy{FairShare: week}}
	in.Usage = Usage(append(slices.Clone(bobUsed), Uses([]job.Job{r})...), t0, week)
	// Now ann (0 used yet) is ahead of bob (1 GPU-hour)...
	if d := Plan(in); d.Pending[0].Job != 2 {
		t.Fatalf("order now: %+v", d.Pending)
	}
	// ...but by 20:00 her running job has used 8 hours: bob goes first.
	if f := ForecastStart(in, 2, bobUsed); !f.Start.Equal(t0.Add(9*time.Hour)) || f.Placement.Host != "c" {
		t.Errorf("forecast with usage worked out again: %+v, want 21:00 on c", f)
	}
	if f := ForecastStart(in, 2, nil); !f.Start.Equal(t0.Add(8 * time.Hour)) {
		t.Errorf("forecast with usage as it is now: %+v, want 20:00", f)
	}
}

// One plan does not hand every free GPU to the user who is lowest when
// it begins: each start charges its user what the job will have used by
// its expected end, and the next job goes to whoever is lowest then.
func TestFairShareWithinAPlan(t *testing.T) {
	hosts := []Host{host("a", gpus(8, 80*GiB)...)}
	var queue []job.Job
	for i := range 10 {
		j := queued(job.ID(i+1), excl(1))
		j.User, j.Spec.Timeout = "ann", 24*time.Hour
		queue = append(queue, j)
	}
	for i := range 2 {
		j := queued(job.ID(20+i), excl(1))
		j.User, j.Spec.Timeout = "bob", 24*time.Hour
		queue = append(queue, j)
	}
	usage := map[string]float64{"bob": 60} // bob used a GPU-minute; ann nothing
	d := Plan(Input{Now: t0, Hosts: hosts, Queue: queue, Usage: usage})
	var order []string
	for _, s := range d.Starts {
		order = append(order, map[bool]string{true: "bob", false: "ann"}[s.Job >= 20])
	}
	if want := []string{"ann", "bob", "ann", "bob", "ann", "ann", "ann", "ann"}; !slices.Equal(order, want) {
		t.Errorf("starts by user %v, want %v", order, want)
	}
	// Under priority order the same queue goes by submit order: ann takes all 8.
	d = Plan(Input{Now: t0, Hosts: hosts, Queue: queue, Usage: usage, Policy: Policy{Order: OrderPriority}})
	if d.Starts[7].Job != 8 {
		t.Errorf("priority order: %+v", d.Starts)
	}
}
