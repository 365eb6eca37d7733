package sched

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// order is the queue's order in d: starts, then pending.
func order(d Decisions) []job.ID {
	var out []job.ID
	for _, s := range d.Starts {
		out = append(out, s.Job)
	}
	for _, p := range d.Pending {
		out = append(out, p.Job)
	}
	return out
}

// The multifactor order: fair-share alone puts the heavy user last; an
// age weight lets the job that waited longest overtake; a size weight
// puts the small job first (or the large one); ties go by submit order.
func TestMultifactorOrder(t *testing.T) {
	hosts := []Host{host("h", gpus(1, 80*GiB)...)}
	run := []job.Job{running(9, "h", 0, "GPU-00")} // nothing starts: the whole queue is pending, in order
	run[0].StartedAt = t0
	now := t0.Add(2 * time.Hour)
	j := func(id job.ID, user string, gpus int, submitted time.Duration) job.Job {
		q := queued(id, excl(gpus))
		q.User, q.SubmittedAt, q.Spec.Timeout = user, t0.Add(submitted), time.Hour
		return q
	}
	// ann used 10 GPU-hours, bob none; ann's job 1 has waited 2 h, bob's
	// jobs 2 (4 GPUs) and 3 (1 GPU) a minute.
	queue := []job.Job{j(1, "ann", 1, 0), j(2, "bob", 4, 119*time.Minute), j(3, "bob", 1, 119*time.Minute)}
	usage := map[string]float64{"ann": 10 * 3600}
	for _, tt := range []struct {
		name string
		pol  Policy
		want []job.ID
	}{
		{"fair-share alone", Policy{Weights: Weights{FairShare: 1}}, []job.ID{2, 3, 1}},
		{"the defaults: fair-share, then bob's smaller job first", Policy{}, []job.ID{3, 2, 1}},
		{"fair-share alone, given", Policy{Weights: Weights{FairShare: 2}}, []job.ID{2, 3, 1}},
		{"age", Policy{Weights: Weights{FairShare: 1, Age: 1}, MaxAge: time.Hour}, []job.ID{1, 2, 3}},
		{"age capped far off", Policy{Weights: Weights{FairShare: 1, Age: 1}, MaxAge: 1000 * time.Hour}, []job.ID{2, 3, 1}},
		{"size, small first", Policy{Weights: Weights{FairShare: 1, Size: 1}}, []job.ID{3, 2, 1}},
		{"size, large first", Policy{Weights: Weights{FairShare: 1, Size: 1}, FavorLarge: true}, []job.ID{2, 3, 1}},
		{"fifo ignores the weights", Policy{Order: OrderFIFO, Weights: Weights{Size: 1}}, []job.ID{1, 2, 3}},
	} {
		d := Plan(Input{Now: now, Hosts: hosts, Running: run, Queue: queue, Usage: usage, Policy: tt.pol})
		if got := order(d); !slices.Equal(got, tt.want) {
			t.Errorf("%s: order %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A job's priority, factor by factor, and its words.
func TestPriorityFactors(t *testing.T) {
	pol := Policy{Weights: Weights{FairShare: 1, Age: 0.5, Size: 0.2}, MaxAge: 4 * time.Hour, FavorLarge: true}
	usage := map[string]float64{"ann": 2 * 3600, "bob": 6 * 3600}
	users := slices.Values([]string{"ann", "bob"})
	now := t0.Add(time.Hour)
	r := NewRanking(pol, now, usage, users)
	q := queued(1, excl(2))
	q.User, q.SubmittedAt, q.Spec.Timeout = "ann", t0, 5*time.Hour
	p := r.Of(&q, r.Score("ann"))
	// fair score: 8 GPU-hours over 2 users = 4 h; ann's 2 h: 2^-0.5.
	want := Priority{Job: 1, Class: 5, Score: 7200, FairShare: math.Exp2(-0.5), Age: 0.25, Size: math.Log10(11) / math.Log10(1001)}
	want.Value = want.FairShare + 0.5*want.Age + 0.2*want.Size
	if math.Abs(p.FairShare-want.FairShare) > 1e-12 || p.Age != want.Age || math.Abs(p.Size-want.Size) > 1e-12 || math.Abs(p.Value-want.Value) > 1e-12 || p.Score != want.Score {
		t.Errorf("priority %+v, want %+v", p, want)
	}
	if got := FactorsText(p, pol); got != "priority 0.90 = fair-share 0.71 + age 0.12 + size 0.07" {
		t.Errorf("words %q", got)
	}
	// Without usage the fair score is at least MinFairScore: a user who
	// used nothing has factor 1; a minute of usage barely changes it.
	r = NewRanking(pol, now, map[string]float64{"ann": 60}, users)
	if f := r.FairShareFactor(0); f != 1 {
		t.Errorf("no usage: %g", f)
	}
	if f := r.FairShareFactor(r.Score("ann")); f < 0.98 {
		t.Errorf("a minute: %g", f)
	}
	// A job that waited past MaxAge counts 1; one whose --begin is ahead 0.
	old := q
	old.SubmittedAt = now.Add(-10 * time.Hour)
	later := q
	later.Spec.Begin = now.Add(time.Hour)
	if a, b := r.Of(&old, 0).Age, r.Of(&later, 0).Age; a != 1 || b != 0 {
		t.Errorf("ages %g, %g", a, b)
	}
}

// gssh show's words under a multifactor order: the factors, then the
// jobs of the class ahead, the nearest first.
func TestMultifactorRankText(t *testing.T) {
	hosts := []Host{host("h", gpus(1, 80*GiB)...)}
	run := []job.Job{running(9, "h", 0, "GPU-00")}
	pol := Policy{Weights: Weights{FairShare: 1, Age: 1}, MaxAge: time.Hour}
	var queue []job.Job
	for i, u := range []string{"ann", "bob", "cat", "dan", "eve"} {
		q := queued(job.ID(i+1), excl(1))
		q.User, q.SubmittedAt = u, t0.Add(time.Duration(i)*10*time.Minute)
		queue = append(queue, q)
	}
	d := Plan(Input{Now: t0.Add(time.Hour), Hosts: hosts, Running: run, Queue: queue, Policy: pol, Explain: 5})
	p := d.Pending[4]
	want := "5th in the queue: priority 1.33 = fair-share 1.00 + age 0.33; ranks behind job 4 of dan (1.50), job 3 of cat (1.67), job 2 of bob (1.83) and 1 more"
	if p.Job != 5 || p.Rank != want {
		t.Errorf("rank %q\nwant %q", p.Rank, want)
	}
	// The first job's words are its factors: nothing ranks ahead of it.
	d = Plan(Input{Now: t0.Add(time.Hour), Hosts: hosts, Running: run, Queue: queue, Policy: pol, Explain: 1})
	if p, want := d.Pending[0], "1st in the queue: priority 2.00 = fair-share 1.00 + age 1.00"; p.Job != 1 || p.Rank != want {
		t.Errorf("first: rank %q\nwant %q", p.Rank, want)
	}
}

// Deeper reservations: with reserve_depth 2 the second job that cannot
// start gets a reservation too, after the first's on the GPUs they share,
// and a job that would run into it may not start; with depth 1 only the
// first has one. A job that waited max_age gets one beyond the depth.
func TestReserveDepth(t *testing.T) {
	hosts := []Host{host("h", gpus(2, 80*GiB)...)}
	now := t0.Add(time.Hour)
	r1, r2 := running(1, "h", 0, "GPU-00"), running(2, "h", 0, "GPU-01")
	r1.StartedAt, r1.Spec.Timeout = t0, 2*time.Hour // ends at t0+2h
	r2.StartedAt, r2.Spec.Timeout = t0, 5*time.Hour // ends at t0+5h
	big := queued(3, excl(2))                       // fits at t0+5h, runs 10 h
	big.Spec.Timeout, big.SubmittedAt = 10*time.Hour, now
	one := queued(4, excl(1)) // fits on GPU 0 at t0+2h
	one.Spec.Timeout, one.SubmittedAt = 4*time.Hour, now
	// 5: 1 GPU for 2h30m: it would end after t0+2h on GPU 0 (job 4's
	// reservation) and after... it has no GPU free now anyway; it shows
	// whether its reason names a reservation.
	queue := []job.Job{big, one}
	plan := func(depth int, maxAge time.Duration) Decisions {
		return Plan(Input{Now: now, Hosts: hosts, Running: []job.Job{r1, r2}, Queue: queue,
			Policy: Policy{Order: OrderFIFO, Backfill: BackfillEasy, ReserveDepth: depth, MaxAge: maxAge}})
	}
	d := plan(1, 0)
	if d.Pending[0].Reservation == nil || d.Pending[1].Reservation != nil {
		t.Fatalf("depth 1: %+v", d.Pending)
	}
	if got := d.Pending[0].Reservation.From; !got.Equal(t0.Add(5 * time.Hour)) {
		t.Errorf("depth 1: job 3 from %s", got)
	}
	d = plan(2, 0)
	if d.Pending[1].Reservation == nil {
		t.Fatalf("depth 2: no second reservation: %+v", d.Pending)
	}
	// Job 4 would fit on GPU 0 at t0+2h but must end by t0+5h, when job 3
	// takes both GPUs: 2h + 4h runs past it, so it goes after job 3's
	// 10 h, at t0+15h.
	if got := d.Pending[1].Reservation.From; !got.Equal(t0.Add(15 * time.Hour)) {
		t.Errorf("depth 2: job 4 from %s, want %s", got, t0.Add(15*time.Hour))
	}
	// A job of 2 h 59 min fits before job 3's reservation, at t0+2h.
	one.Spec.Timeout = 179 * time.Minute
	queue = []job.Job{big, one}
	if got := plan(2, 0).Pending[1].Reservation.From; !got.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("depth 2, a short job: from %s", got)
	}
	// Past max_age, job 4 gets one at depth 1 too under the multifactor
	// order (not under fifo: EASY stays EASY).
	one.SubmittedAt = now.Add(-2 * time.Hour)
	queue = []job.Job{big, one}
	if d := plan(1, time.Hour); d.Pending[1].Reservation != nil {
		t.Errorf("fifo: an aged job has a reservation: %+v", d.Pending[1])
	}
	d = Plan(Input{Now: now, Hosts: hosts, Running: []job.Job{r1, r2}, Queue: queue,
		Policy: Policy{Weights: FairShareAlone, Backfill: BackfillEasy, ReserveDepth: 1, MaxAge: time.Hour}})
	if d.Pending[0].Job != 3 || d.Pending[1].Reservation == nil {
		t.Errorf("fairshare: an aged job has no reservation: %+v", d.Pending)
	}
	// GPU 0 free now, GPU 1 until t0+5h: job 3 is reserved from t0+5h;
	// job 6 (6 h) cannot end before it, so it gets the second
	// reservation, after job 3's 10 h; job 7 (5 h) would run into job 3's
	// reservation and waits, saying so; job 8 (1 h) starts now.
	mid, short, late := queued(7, excl(1)), queued(8, excl(1)), queued(6, excl(1))
	short.Spec.Timeout, mid.Spec.Timeout, late.Spec.Timeout = time.Hour, 5*time.Hour, 6*time.Hour
	short.SubmittedAt, mid.SubmittedAt, late.SubmittedAt = now, now, now
	d = Plan(Input{Now: now, Hosts: hosts, Running: []job.Job{r2}, Queue: []job.Job{big, late, mid, short},
		Policy: Policy{Order: OrderFIFO, Backfill: BackfillEasy, ReserveDepth: 2}})
	if len(d.Starts) != 1 || d.Starts[0].Job != 8 {
		t.Errorf("starts %+v", d.Starts)
	}
	if r := d.Pending[1].Reservation; d.Pending[1].Job != 6 || r == nil || !r.From.Equal(t0.Add(15*time.Hour)) {
		t.Errorf("job 6: %+v", d.Pending[1])
	}
	if p := d.Pending[2]; p.Job != 7 || p.Reservation != nil || !strings.Contains(p.Reason.Text, "reserved for job 3 from") {
		t.Errorf("job 7: %+v", p)
	}
}

// Bad weights, max_age and reserve_depth are refused, saying what to
// give.
func TestPolicyCheckFactors(t *testing.T) {
	for _, tt := range []struct {
		pol  Policy
		want string
	}{
		{Policy{Weights: Weights{FairShare: -1}}, "policy weights: -1, 0, 0: give numbers of 0 or more"},
		{Policy{MaxAge: -time.Hour}, "policy max_age: give a duration more than 0"},
		{Policy{ReserveDepth: -1}, "policy reserve_depth -1: give a number from 1 to 1000"},
		{Policy{ReserveDepth: 1001}, "policy reserve_depth 1001: give a number from 1 to 1000"},
	} {
		if err := tt.pol.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.pol, err, tt.want)
		}
	}
	if err := (Policy{Weights: Weights{Age: 1}, MaxAge: time.Hour, ReserveDepth: 1000}).Check(); err != nil {
		t.Errorf("a good policy: %v", err)
	}
}
