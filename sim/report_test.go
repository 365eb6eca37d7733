package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sched"
)

const hr = time.Hour

// rounded is r with its ratios and GPU-hours rounded to 1e-12, so that a
// value worked out by hand (0.3) compares equal to its floating-point sum.
func rounded(r Report) Report {
	round := func(x float64) float64 { return math.Round(x*1e12) / 1e12 }
	for _, f := range []*float64{&r.UnplaceableGPUHours, &r.Utilization, &r.UtilizationArrivals, &r.BusyWhileWaiting,
		&r.Fragmentation, &r.JainActive, &r.JainWaiting} {
		*f = round(*f)
	}
	r.Users = append([]UserRow(nil), r.Users...)
	for i := range r.Users {
		r.Users[i].GPUHours = round(r.Users[i].GPUHours)
	}
	r.Sizes = append([]SizeRow(nil), r.Sizes...)
	for i := range r.Sizes {
		r.Sizes[i].GPUHours = round(r.Sizes[i].GPUHours)
	}
	return r
}

func lab(t testing.TB, spec string) []sched.Host {
	t.Helper()
	hosts, err := ParseLab(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return hosts
}

// A tiny run, built by hand, on one host of 2 GPUs of 80 GiB:
//
//	job  user  submit  GPUs          start  end  share  wait  wait+run  GPU-h
//	a    ann   0       2             0      2h   2      0     2h        2·2h = 4
//	b    bob   1h      1, --mem 20G  2h     6h   0.25   1h    5h        0.25·4h = 1
//	c    ann   2h      2             6h     8h   2      4h    6h        2·2h = 4
//
// and the lab between passes (ann has weight 2):
//
//	after  queued  booked  whole  partial  holds
//	0      0       2       no     0        [0, 1h)
//	1h     1 (b)   2       no     0        [1h, 2h)
//	2h     1 (c)   0.25    yes    1        [2h, 6h)
//	6h     0       2       no     0        [6h, 8h): the makespan
//
// Makespan 8h. Waits sorted 0, 1h, 4h: mean 5h/3 = 1h40m, p50 at rank
// ⌈1.5⌉ = 2: 1h, p95 at rank ⌈2.85⌉ = 3: 4h. Mean completion (2h + 5h +
// 6h)/3 = 4h20m.
//
// Utilization: (2·1h + 2·1h + 0.25·4h + 2·2h) / (2 GPUs · 8h) = 9/16 =
// 0.5625, the 9 GPU-hours the jobs ran. Over the arrivals [0, 2h]: (2 +
// 2)/(2·2) = 1. A job waits over [1h, 6h): booked 2·1h + 0.25·4h = 3
// GPU-hours over 2 GPUs · 5h: 0.3. A whole-GPU job waits over [2h, 6h),
// with 1 GPU partly booked: 1·4h / (2·4h) = 0.5.
//
// Fairness windows [0, 6h) and [6h, 8h). In the first ann (a runs 2 GPUs
// · 2h = 4 GPU-h, / weight 2: 2) and bob (b runs 0.25 · 4h: 1) are active
// and both wait (b over [1h, 2h), c from 2h): J = (2+1)² / (2·(4+1)) =
// 0.9 for both. In the second only ann is active (c runs; b ended at 6h):
// J = 1, and no one waits. JainActive (0.9 + 1)/2 = 0.95, JainWaiting 0.9.
func TestReportTinyRun(t *testing.T) {
	cfg := Config{Hosts: lab(t, "1x2xA100-80G"), Policy: sched.Policy{Users: map[string]sched.UserShare{"ann": {Weight: 2}}},
		Jobs: []Job{
			{Name: "a", User: "ann", GPUs: 2, Runtime: 2 * hr},
			{Name: "b", User: "bob", Submit: 1 * hr, GPUs: 1, Mem: 20 << 30, Runtime: 4 * hr},
			{Name: "c", User: "ann", Submit: 2 * hr, GPUs: 2, Runtime: 2 * hr},
		}}
	res := &Result{
		Jobs: []Outcome{
			{Job: 0, Placeable: true, Started: true, Start: 0, End: 2 * hr, Host: "h000-a100", Share: 2},
			{Job: 1, Placeable: true, Started: true, Start: 2 * hr, End: 6 * hr, Host: "h000-a100", Share: 0.25},
			{Job: 2, Placeable: true, Started: true, Start: 6 * hr, End: 8 * hr, Host: "h000-a100", Share: 2},
		},
		Samples: []Sample{
			{After: 0, Queued: 0, Booked: 2},
			{After: 1 * hr, Queued: 1, Booked: 2},
			{After: 2 * hr, Queued: 1, Booked: 0.25, Whole: true, Partial: 1},
			{After: 6 * hr, Queued: 0, Booked: 2},
		},
		Passes:   4,
		Makespan: 8 * hr,
	}
	want := Report{
		Policy: "gssh", Jobs: 3, Started: 3,
		Makespan: 8 * hr, MeanWait: hr + 40*time.Minute, P50Wait: hr, P95Wait: 4 * hr, MaxWait: 4 * hr, MeanCompletion: 4*hr + 20*time.Minute,
		Utilization: 0.5625, UtilizationArrivals: 1, BusyWhileWaiting: 0.3, Fragmentation: 0.5, JainActive: 0.95, JainWaiting: 0.9,
		Users: []UserRow{
			{User: "ann", Weight: 2, Jobs: 2, Started: 2, GPUHours: 8, MeanWait: 2 * hr, P95Wait: 4 * hr, MaxWait: 4 * hr}, // waits 0, 4h
			{User: "bob", Weight: 1, Jobs: 1, Started: 1, GPUHours: 1, MeanWait: hr, P95Wait: hr, MaxWait: hr},
		},
		Sizes: []SizeRow{
			{GPUs: "1", Jobs: 1, Started: 1, MeanWait: hr, P95Wait: hr, MaxWait: hr, GPUHours: 1},
			{GPUs: "2", Jobs: 2, Started: 2, MeanWait: 2 * hr, P95Wait: 4 * hr, MaxWait: 4 * hr, GPUHours: 8},
			{GPUs: "4"},
			{GPUs: "8"},
		},
	}
	got := NewReport("gssh", cfg, res)
	if g := rounded(got); !reflect.DeepEqual(g, want) {
		t.Errorf("report\n got %+v\nwant %+v", g, want)
	}

	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"policy":"gssh"`, `"unplaceable_gpu_hours":0`, `"never_started":0`, `"makespan_s":28800`,
		`"p50_wait_s":3600`, `"mean_completion_s":`, `"mean_wait_s":`, `"waited_over_day":0`, `"utilization_arrivals":1`, `"busy_while_waiting":`,
		`"jain_active":`, `"jain_waiting":`, `"users":[{"user":"ann","weight":2,"jobs":2,"started":2,"gpu_hours":8,"mean_wait_s":`, `"sizes":[{"gpus":"1","jobs":1,`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
}

// Nearest rank: the p-th percentile of n sorted values is the one at rank
// ⌈p/100 · n⌉.
func TestPercentiles(t *testing.T) {
	secs := func(n int) []time.Duration {
		v := make([]time.Duration, n)
		for i := range v {
			v[i] = time.Duration(n-i) * time.Second // unsorted: waitStats sorts
		}
		return v
	}
	s := time.Second
	for _, c := range []struct {
		name                string
		waits               []time.Duration
		mean, p50, p95, max time.Duration
	}{
		{"none", nil, 0, 0, 0, 0},
		{"1 value: all ranks are 1", []time.Duration{5 * s}, 5 * s, 5 * s, 5 * s, 5 * s},
		{"2 values: p50 rank ⌈1⌉ = 1, p95 rank ⌈1.9⌉ = 2", []time.Duration{2 * s, 1 * s}, 1500 * time.Millisecond, 1 * s, 2 * s, 2 * s},
		{"10 values 1..10 s: p50 rank 5, p95 rank ⌈9.5⌉ = 10, mean 5.5 s", secs(10), 5500 * time.Millisecond, 5 * s, 10 * s, 10 * s},
		{"20 values 1..20 s: p95 rank exactly 19 (no float round-up to 20)", secs(20), 10500 * time.Millisecond, 10 * s, 19 * s, 20 * s},
		{"3 values: mean 1/3 s rounds to the nanosecond", []time.Duration{0, 0, s}, 333333333, 0, s, s},
	} {
		mean, p50, p95, most := waitStats(c.waits)
		if mean != c.mean || p50 != c.p50 || p95 != c.p95 || most != c.max {
			t.Errorf("%s: mean %s p50 %s p95 %s max %s, want %s %s %s %s", c.name, mean, p50, p95, most, c.mean, c.p50, c.p95, c.max)
		}
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"equal: 1", []float64{3, 3, 3}, 1},
		{"one user has all of 4: 1/4", []float64{0, 0, 6, 0}, 0.25},
		{"one user has all of 2: 1/2", []float64{5, 0}, 0.5},
		{"all zero counts as equal: 1", []float64{0, 0}, 1},
		{"a single user: 1", []float64{7}, 1},
		{"1 and 2: 3² / (2·5) = 0.9", []float64{1, 2}, 0.9},
		{"none: 0", nil, 0},
	} {
		if got := jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: %g", c.name, got)
		}
	}
}

// Windows, clipping and weights. On a 2-GPU lab, bob of weight 3:
//
//	ann  1 GPU   submit 0   runs [0, 10h)
//	bob  1 GPU   submit 0   waits [0, 8h), runs [8h, 11h)
//	cat  1 GPU   submit 7h  never starts: waits from 7h on
//
// Makespan 11h: windows [0, 6h) and [6h, 11h). First: ann (6 GPU-h) and
// bob (0) active: J = 6²/(2·36) = 1/2; bob waits alone: J = 1 (all 0).
// Second: ann 4 (clipped to [6h, 10h)), bob 3/3 = 1, cat 0 active: J =
// 5²/(3·17) = 25/51; bob (1) and cat (0) wait: J = 1/2. JainActive (1/2 +
// 25/51)/2, JainWaiting (1 + 1/2)/2 = 0.75.
func TestReportJainWindows(t *testing.T) {
	cfg := Config{Hosts: lab(t, "1x2xA100-80G"), Policy: sched.Policy{Users: map[string]sched.UserShare{"bob": {Weight: 3}}},
		Jobs: []Job{
			{User: "ann", GPUs: 1, Runtime: 10 * hr},
			{User: "bob", GPUs: 1, Runtime: 3 * hr},
			{User: "cat", Submit: 7 * hr, GPUs: 1, Runtime: hr},
		}}
	res := &Result{Makespan: 11 * hr, Jobs: []Outcome{
		{Job: 0, Placeable: true, Started: true, Start: 0, End: 10 * hr, Share: 1},
		{Job: 1, Placeable: true, Started: true, Start: 8 * hr, End: 11 * hr, Share: 1},
		{Job: 2, Placeable: true},
	}}
	r := NewReport("x", cfg, res)
	if want := (0.5 + 25.0/51) / 2; math.Abs(r.JainActive-want) > 1e-12 {
		t.Errorf("JainActive %g, want %g", r.JainActive, want)
	}
	if math.Abs(r.JainWaiting-0.75) > 1e-12 {
		t.Errorf("JainWaiting %g, want 0.75", r.JainWaiting)
	}
	if r.NeverStarted != 1 || r.Started != 2 {
		t.Errorf("never started %d, started %d", r.NeverStarted, r.Started)
	}
}

// The tables, and unplaceable jobs counted, not dropped. On 2 hosts of 4
// GPUs of 80 GiB (dan has weight 0.5):
//
//	#  user  GPUs            submit  outcome                      wait  GPU-h
//	0  ann   1               0       runs [0, 1h), share 1        0     1
//	1  ann   3               0       runs [30h, 32h), share 3     30h   6
//	2  bob   16              1h      unplaceable, 2h              -     16·2 = 32
//	3  cat   8, --mem 20G    2h      unplaceable, 2h              -     8·(20/80)·2 = 4
//	4  cat   1, --mem 100G   3h      unplaceable, 3h              -     1·min(1, 100/80)·3 = 3
//	5  bob   2               4h      never starts                 -     -
//	6  dan   2               5h      runs [6h, 10h), share 0      1h    2 GPUs·4h = 8
//	7  eve   5               5h      unplaceable, 1h              -     5·1 = 5
//
// Started 3, unplaceable 4 (32+4+3+5 = 44 GPU-h), never started 1. Waits
// sorted 0, 1h, 30h: mean 31h/3 = 10h20m, p50 1h, p95 30h; one over a day.
// Sizes 1, 2, 4, 8, then >8, then 3 and 5.
func TestReportTables(t *testing.T) {
	cfg := Config{Hosts: lab(t, "2x4xA100-80G"), Policy: sched.Policy{Users: map[string]sched.UserShare{"dan": {Weight: 0.5}}},
		Jobs: []Job{
			{User: "ann", GPUs: 1, Runtime: hr},
			{User: "ann", GPUs: 3, Runtime: 2 * hr},
			{User: "bob", Submit: hr, GPUs: 16, Runtime: 2 * hr},
			{User: "cat", Submit: 2 * hr, GPUs: 8, Mem: 20 << 30, Runtime: 2 * hr},
			{User: "cat", Submit: 3 * hr, GPUs: 1, Mem: 100 << 30, Runtime: 3 * hr},
			{User: "bob", Submit: 4 * hr, GPUs: 2, Runtime: hr},
			{User: "dan", Submit: 5 * hr, GPUs: 2, Runtime: 4 * hr},
			{User: "eve", Submit: 5 * hr, GPUs: 5, Runtime: hr},
		}}
	res := &Result{Makespan: 32 * hr, Jobs: []Outcome{
		{Job: 0, Placeable: true, Started: true, Start: 0, End: hr, Share: 1},
		{Job: 1, Placeable: true, Started: true, Start: 30 * hr, End: 32 * hr, Share: 3},
		{Job: 2},
		{Job: 3},
		{Job: 4},
		{Job: 5, Placeable: true},
		{Job: 6, Placeable: true, Started: true, Start: 6 * hr, End: 10 * hr}, // no share recorded: one per GPU
		{Job: 7},
	}}
	r := rounded(NewReport("x", cfg, res))
	if r.Jobs != 8 || r.Started != 3 || r.Unplaceable != 4 || r.UnplaceableGPUHours != 44 || r.NeverStarted != 1 || r.WaitedOverDay != 1 {
		t.Errorf("counts %+v", r)
	}
	if r.Makespan != 32*hr || r.MeanWait != 10*hr+20*time.Minute || r.P50Wait != hr || r.P95Wait != 30*hr || r.MaxWait != 30*hr {
		t.Errorf("times %+v", r)
	}
	// The mean of end − submit: (1h + 32h + 5h)/3 = 12h40m.
	if r.MeanCompletion != 12*hr+40*time.Minute {
		t.Errorf("mean completion %s", r.MeanCompletion)
	}
	wantUsers := []UserRow{
		{User: "ann", Weight: 1, Jobs: 2, Started: 2, GPUHours: 7, MeanWait: 15 * hr, P95Wait: 30 * hr, MaxWait: 30 * hr},
		{User: "bob", Weight: 1, Jobs: 2}, // unplaceable and never started: counted, no waits
		{User: "cat", Weight: 1, Jobs: 2},
		{User: "dan", Weight: 0.5, Jobs: 1, Started: 1, GPUHours: 8, MeanWait: hr, P95Wait: hr, MaxWait: hr},
		{User: "eve", Weight: 1, Jobs: 1},
	}
	if !reflect.DeepEqual(r.Users, wantUsers) {
		t.Errorf("users\n got %+v\nwant %+v", r.Users, wantUsers)
	}
	wantSizes := []SizeRow{
		{GPUs: "1", Jobs: 2, Started: 1, GPUHours: 1}, // jobs 0 (wait 0) and 4
		{GPUs: "2", Jobs: 2, Started: 1, MeanWait: hr, P95Wait: hr, MaxWait: hr, GPUHours: 8},
		{GPUs: "3", Jobs: 1, Started: 1, MeanWait: 30 * hr, P95Wait: 30 * hr, MaxWait: 30 * hr, GPUHours: 6},
		{GPUs: "4"},
		{GPUs: "5", Jobs: 1},
		{GPUs: "8", Jobs: 1},
		{GPUs: ">8", Jobs: 1}, // sizes in numeric order, ">8" last
	}
	if !reflect.DeepEqual(r.Sizes, wantSizes) {
		t.Errorf("sizes\n got %+v\nwant %+v", r.Sizes, wantSizes)
	}
}

// An unplaceable job through Run: never queued, counted with what it
// asked for; alone, it leaves an empty window and no NaN.
func TestReportUnplaceable(t *testing.T) {
	hosts := lab(t, "1x2xA100-80G")
	for _, c := range []struct {
		name                    string
		jobs                    []Job
		started, unplaceable    int
		gpuHours                float64
		makespan                time.Duration
		utilization, jainActive float64
	}{
		// The 4-GPU job asks 4·3h = 12 GPU-h; the other runs [1h, 3h) alone
		// on 1 of 2 GPUs: utilization over [0, 3h] 2/(2·3) = 1/3; ann alone
		// is active in the one window: J = 1.
		{"beside a job that runs", []Job{
			{Name: "big", User: "bob", GPUs: 4, Runtime: 3 * hr},
			{Name: "small", User: "ann", Submit: hr, GPUs: 1, Runtime: 2 * hr},
		}, 1, 1, 12, 3 * hr, 1.0 / 3, 1},
		{"alone", []Job{{Name: "big", User: "bob", GPUs: 4, Mem: 40 << 30, Runtime: 3 * hr}}, 0, 1, 4 * 0.5 * 3, 0, 0, 0},
	} {
		cfg := Config{Hosts: hosts, Jobs: c.jobs}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReport("gssh", cfg, res)
		if r.Jobs != len(c.jobs) || r.Started != c.started || r.Unplaceable != c.unplaceable || r.NeverStarted != 0 ||
			math.Abs(r.UnplaceableGPUHours-c.gpuHours) > 1e-9 || r.Makespan != c.makespan ||
			math.Abs(r.Utilization-c.utilization) > 1e-9 || r.JainActive != c.jainActive || r.JainWaiting != 0 {
			t.Errorf("%s: %+v", c.name, r)
		}
		if r.Users[0].User != "bob" && r.Users[len(r.Users)-1].User != "bob" || r.Sizes[2] != (SizeRow{GPUs: "4", Jobs: 1}) {
			t.Errorf("%s: the unplaceable job is not in the tables: %+v %+v", c.name, r.Users, r.Sizes)
		}
		b, err := json.Marshal(r) // fails on a NaN or an infinity
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		_ = b
	}
}

// End to end: a dozen jobs through Run on one host of 4 A100s, under
// several policies, and what must hold of any report.
func TestReportRun(t *testing.T) {
	hosts := lab(t, "1x4xA100-80G")
	var jobs []Job
	for i := range 12 {
		j := Job{Name: fmt.Sprintf("j%d", i), User: fmt.Sprintf("u%d", i%3), Submit: time.Duration(i*17) * time.Minute,
			GPUs: []int{1, 2, 4, 1}[i%4], Priority: 5, Runtime: time.Duration(30+i*23%90) * time.Minute}
		switch i {
		case 3, 7:
			j.Mem = 20 << 30 // shared
		case 5:
			j.Walltime = 20 * time.Minute // stopped
		case 9:
			j.GPUs = 8 // more than the host has: unplaceable
		}
		jobs = append(jobs, j)
	}
	for name, pol := range map[string]sched.Policy{
		"gssh": {Users: map[string]sched.UserShare{"u1": {Weight: 2}}},
		"fifo": {Order: sched.OrderFIFO, Fit: sched.FitFirst, Backfill: sched.BackfillNone},
		"skip": {Order: sched.OrderPriority, Fit: sched.FitFirst, Backfill: sched.BackfillSkip},
	} {
		cfg := Config{Hosts: hosts, Jobs: jobs, Policy: pol}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReport(name, cfg, res)
		if r.Started+r.Unplaceable+r.NeverStarted != r.Jobs || r.Jobs != 12 || r.Unplaceable != 1 || r.Started != 11 {
			t.Errorf("%s: started %d + unplaceable %d + never started %d of %d", name, r.Started, r.Unplaceable, r.NeverStarted, r.Jobs)
		}
		for what, x := range map[string]float64{"utilization": r.Utilization, "utilization over arrivals": r.UtilizationArrivals,
			"busy while waiting": r.BusyWhileWaiting, "fragmentation": r.Fragmentation, "jain active": r.JainActive, "jain waiting": r.JainWaiting} {
			if !(x >= 0 && x <= 1+1e-12) {
				t.Errorf("%s: %s %g not in [0, 1]", name, what, x)
			}
		}
		if !(r.JainActive > 0) || !(r.Utilization > 0) {
			t.Errorf("%s: jain %g, utilization %g", name, r.JainActive, r.Utilization)
		}
		if !(r.MaxWait >= r.P95Wait && r.P95Wait >= r.P50Wait && r.P50Wait >= 0 && r.MeanWait <= r.MaxWait && r.MeanCompletion >= r.MeanWait) {
			t.Errorf("%s: waits mean %s p50 %s p95 %s max %s, completion %s", name, r.MeanWait, r.P50Wait, r.P95Wait, r.MaxWait, r.MeanCompletion)
		}
		if r.Makespan != res.Makespan { // the first arrival is at 0
			t.Errorf("%s: makespan %s, run's %s", name, r.Makespan, res.Makespan)
		}
		// The tables add up, and the samples' booked GPUs integrate to the
		// GPU-hours the outcomes show.
		var userJobs, sizeJobs int
		var userHours, sizeHours float64
		for _, u := range r.Users {
			userJobs += u.Jobs
			userHours += u.GPUHours
			if u.MaxWait < u.P95Wait {
				t.Errorf("%s: %+v", name, u)
			}
		}
		for _, s := range r.Sizes {
			sizeJobs += s.Jobs
			sizeHours += s.GPUHours
		}
		booked := r.Utilization * 4 * r.Makespan.Hours()
		if userJobs != 12 || sizeJobs != 12 || len(r.Users) != 3 || math.Abs(userHours-sizeHours) > 1e-9 || math.Abs(userHours-booked) > 1e-9 {
			t.Errorf("%s: jobs %d, %d; GPU-hours by user %g, by size %g, booked %g", name, userJobs, sizeJobs, userHours, sizeHours, booked)
		}
		if got := []string{r.Sizes[0].GPUs, r.Sizes[3].GPUs}; len(r.Sizes) != 4 || got[0] != "1" || got[1] != "8" || r.Sizes[3].Jobs != 1 {
			t.Errorf("%s: sizes %+v", name, r.Sizes)
		}
	}
}
