package sim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

// fairWindow is the length of the consecutive windows Jain's fairness
// index is taken over (Report.JainActive, Report.JainWaiting).
const fairWindow = 6 * time.Hour

// Report is what one run of one policy shows. Times are durations (in
// JSON, seconds to the millisecond in fields ending _s: makespan_s,
// mean_wait_s, ...; see reportjson.go); GPU-hours are whole GPUs × hours;
// the ratios are fractions from 0 to 1.
//
// The run's window is [first arrival, makespan end]: the first arrival is
// the earliest Submit of any job of the config (unplaceable ones too), the
// makespan end is Result.Makespan (the last end; the first arrival if no
// job ended).
//
// The GPU-hours of a started job are Outcome.Share × (End − Start) / 3600 s
// (a Share of 0, as a placement without a recorded share has, counts one
// per GPU, as job.Use does; a started job without an end counts 0).
//
// The ratios over time integrate the step function of Result.Samples:
// each sample's values hold from its After until the next sample's After,
// the last one's until the end of the interval integrated (the makespan
// end for the run's window), and nothing holds before the first sample.
type Report struct {
	Policy string `json:"policy"`
	About  string `json:"about,omitempty"` // what the policy is (Policy.About)
	// Jobs is the number of jobs of the config; Started those that ran.
	Jobs    int `json:"jobs"`
	Started int `json:"started"`
	// Unplaceable counts the jobs no host of the lab can ever take
	// (Outcome.Placeable false): counted here, not dropped.
	// UnplaceableGPUHours is what they asked for: GPUs × Runtime / 3600 s
	// each, their full Runtime (a shorter walltime not applied), with a
	// --mem job (Mem > 0) counting per GPU the share it would have had on
	// the lab's smallest GPU: Mem / SmallestGPU(cfg.Hosts), at most 1 (1
	// when no GPU memory is known).
	Unplaceable         int     `json:"unplaceable"`
	UnplaceableGPUHours float64 `json:"unplaceable_gpu_hours"`
	// NeverStarted counts the placeable jobs still waiting when the run
	// ended.
	NeverStarted int `json:"never_started"`
	// Makespan is from the first arrival to the last end (0 if none ended
	// after it).
	Makespan time.Duration `json:"-"`
	// The waits, start − submit, of the started jobs: their mean, and the
	// nearest-rank percentiles of the sorted waits (the p-th percentile of
	// n waits is the one at rank ⌈p/100 · n⌉, counting from 1: P50 of 2
	// waits is the shorter, P95 of 10 the longest); all 0 when none
	// started.
	MeanWait time.Duration `json:"-"`
	P50Wait  time.Duration `json:"-"`
	P95Wait  time.Duration `json:"-"`
	MaxWait  time.Duration `json:"-"`
	// MeanCompletion is the mean of wait + run (end − submit) over the
	// started jobs (0 when none started).
	MeanCompletion time.Duration `json:"-"`
	// WaitedOverDay counts the started jobs that waited more than 24 hours
	// (a job that never started is counted in NeverStarted only).
	WaitedOverDay int `json:"waited_over_day"`
	// Utilization is ∫ Sample.Booked dt over the run's window, in GPU-
	// seconds, divided by the lab's GPUs (Capacity) × the window's length
	// in seconds; 0 for an empty window or a lab without GPUs.
	Utilization float64 `json:"utilization"`
	// UtilizationArrivals is the same over [first arrival, last arrival]
	// (the latest Submit of any job): how busy the lab was while work was
	// still coming; 0 when all jobs arrive at one instant.
	UtilizationArrivals float64 `json:"utilization_arrivals"`
	// BusyWhileWaiting is ∫ Booked dt over the times in the run's window
	// when some job waits (Sample.Queued > 0), divided by GPUs × the length
	// of those times: how much of the lab was booked while a job was kept
	// waiting. 0 if no job ever waits.
	BusyWhileWaiting float64 `json:"busy_while_waiting"`
	// Fragmentation is ∫ Sample.Partial dt over the times in the run's
	// window when a job needing whole GPUs waits (Sample.Whole), divided
	// by GPUs × the length of those times: the part of the lab that
	// shared jobs had partly booked, so that it could not take a waiting
	// whole-GPU job. 0 if no whole-GPU job ever waits.
	Fragmentation float64 `json:"fragmentation"`
	// Jain's fairness index J = (Σx)² / (n·Σx²) over n users, where x_u is
	// user u's GPU-seconds inside a window (each running interval,
	// [Start, End), clipped to it, × Share) divided by u's weight
	// (cfg.Policy.Weight), for the consecutive 6-hour windows from the
	// first arrival (the last one cut at the makespan end). J is 1 when all
	// users get the same, 1/n when one gets everything; a window where all
	// x are 0 counts J = 1.
	//
	// JainActive is the mean of J over the windows where some user is
	// active, J taken over the users active in the window: a job of theirs
	// runs or waits at some time in it (their x may be 0). JainWaiting is
	// the mean over the windows where some job waits of J over the users
	// with a job waiting at some time in the window. A job waits from its
	// submit to its start (to the run's end when it never starts);
	// unplaceable jobs never wait. Both are 0 when no window qualifies.
	JainActive  float64 `json:"jain_active"`
	JainWaiting float64 `json:"jain_waiting"`
	// Users has one row per user of the config's jobs, by user name.
	Users []UserRow `json:"users"`
	// Sizes has one row per GPU count, in increasing order: 1, 2, 4 and 8
	// always, any other count up to 8 some job has (3, 5, ...), and last
	// one row ">8" for all jobs of more than 8 GPUs, if there are any.
	Sizes []SizeRow `json:"sizes"`
}

// UserRow is one user's part of a run.
type UserRow struct {
	User   string  `json:"user"`
	Weight float64 `json:"weight"` // cfg.Policy.Weight(User)
	// Jobs counts all of the user's jobs (unplaceable and never-started
	// ones too); GPUHours the GPU-hours of those that ran.
	Jobs     int     `json:"jobs"`
	Started  int     `json:"started"`
	GPUHours float64 `json:"gpu_hours"`
	// Over the user's started jobs, as in Report (0 if none started).
	MeanWait time.Duration `json:"-"`
	P95Wait  time.Duration `json:"-"`
	MaxWait  time.Duration `json:"-"`
}

// SizeRow is the jobs of one GPU count in a run.
type SizeRow struct {
	GPUs string `json:"gpus"` // "1", "2", "4", "8", ">8", or another count
	// Jobs counts all the jobs of this size (unplaceable and
	// never-started ones too).
	Jobs    int `json:"jobs"`
	Started int `json:"started"`
	// Over the started jobs of this size, as in Report (0 if none
	// started).
	MeanWait time.Duration `json:"-"`
	P95Wait  time.Duration `json:"-"`
	MaxWait  time.Duration `json:"-"`
	GPUHours float64       `json:"gpu_hours"` // of the started jobs of this size
}

// tally gathers one row's jobs.
type tally struct {
	jobs     int
	gpuHours float64
	waits    []time.Duration
}

// NewReport reports res, the Result of Run(cfg) under the policy named
// policy. res holds one Outcome per job of cfg, by index (a missing one
// counts as a job that never arrived: unplaceable); a nil res is an empty
// Result.
func NewReport(policy string, cfg Config, res *Result) Report {
	if res == nil {
		res = &Result{}
	}
	r := Report{Policy: policy, Jobs: len(cfg.Jobs), Users: []UserRow{}} // [] in JSON when there are no jobs
	outcome := func(i int) Outcome {
		if i < len(res.Jobs) {
			return res.Jobs[i]
		}
		return Outcome{Job: i}
	}
	gpus, _ := Capacity(cfg.Hosts)
	smallest := SmallestGPU(cfg.Hosts)

	var first, last time.Duration
	for i, j := range cfg.Jobs {
		if i == 0 || j.Submit < first {
			first = j.Submit
		}
		last = max(last, j.Submit)
	}
	end := max(res.Makespan, first)
	r.Makespan = end - first

	var waits []time.Duration
	var completion float64 // ns
	users := map[string]*tally{}
	sizes := map[int]*tally{}
	for i, j := range cfg.Jobs {
		o := outcome(i)
		u := users[j.User]
		if u == nil {
			u = &tally{}
			users[j.User] = u
		}
		key := j.GPUs
		if key > 8 {
			key = math.MaxInt // ">8"
		}
		s := sizes[key]
		if s == nil {
			s = &tally{}
			sizes[key] = s
		}
		u.jobs++
		s.jobs++
		switch {
		case !o.Placeable:
			r.Unplaceable++
			r.UnplaceableGPUHours += wouldShare(j, smallest) * j.Runtime.Hours()
		case !o.Started:
			r.NeverStarted++
		default:
			r.Started++
			wait := o.Start - j.Submit
			waits = append(waits, wait)
			u.waits = append(u.waits, wait)
			s.waits = append(s.waits, wait)
			if wait > 24*time.Hour {
				r.WaitedOverDay++
			}
			h := gpuHours(o, j)
			u.gpuHours += h
			s.gpuHours += h
			completion += float64(max(o.End, o.Start) - j.Submit)
		}
	}
	r.MeanWait, r.P50Wait, r.P95Wait, r.MaxWait = waitStats(waits)
	if len(waits) > 0 {
		r.MeanCompletion = time.Duration(math.Round(completion / float64(len(waits))))
	}

	for _, name := range slices.Sorted(maps.Keys(users)) {
		t := users[name]
		row := UserRow{User: name, Weight: cfg.Policy.Weight(name), Jobs: t.jobs, Started: len(t.waits), GPUHours: t.gpuHours}
		row.MeanWait, _, row.P95Wait, row.MaxWait = waitStats(t.waits)
		r.Users = append(r.Users, row)
	}
	order := []int{1, 2, 4, 8}
	for n := range sizes {
		if !slices.Contains(order, n) {
			order = append(order, n) // ">8" is MaxInt: last
		}
	}
	slices.Sort(order)
	for _, n := range order {
		t := cmp.Or(sizes[n], &tally{})
		label := strconv.Itoa(n)
		if n == math.MaxInt {
			label = ">8"
		}
		row := SizeRow{GPUs: label, Jobs: t.jobs, Started: len(t.waits), GPUHours: t.gpuHours}
		row.MeanWait, _, row.P95Wait, row.MaxWait = waitStats(t.waits)
		r.Sizes = append(r.Sizes, row)
	}

	if gpus > 0 {
		g := float64(gpus)
		always := func(Sample) bool { return true }
		booked := func(s Sample) float64 { return s.Booked }
		if end > first {
			area, _ := stepIntegral(res.Samples, first, end, booked, always)
			r.Utilization = area / (g * (end - first).Seconds())
		}
		if last > first {
			area, _ := stepIntegral(res.Samples, first, last, booked, always)
			r.UtilizationArrivals = area / (g * (last - first).Seconds())
		}
		if area, span := stepIntegral(res.Samples, first, end, booked, func(s Sample) bool { return s.Queued > 0 }); span > 0 {
			r.BusyWhileWaiting = area / (g * span)
		}
		if area, span := stepIntegral(res.Samples, first, end, func(s Sample) float64 { return float64(s.Partial) }, func(s Sample) bool { return s.Whole }); span > 0 {
			r.Fragmentation = area / (g * span)
		}
	}
	r.JainActive, r.JainWaiting = fairness(cfg, outcome, first, end)
	return r
}

// gpuHours is what started job j used: o.Share (one per GPU when not
// recorded) × its run time, in GPU-hours.
func gpuHours(o Outcome, j Job) float64 {
	return share(o, j) * max(o.End-o.Start, 0).Hours()
}

// share is the whole GPUs started job j counted for.
func share(o Outcome, j Job) float64 {
	if o.Share > 0 {
		return o.Share
	}
	return float64(max(j.GPUs, 0))
}

// wouldShare is the whole GPUs unplaceable job j would have counted for:
// one per GPU, or for a --mem job Mem / smallest (the lab's smallest GPU,
// in bytes) per GPU, at most 1 (1 when smallest is 0).
func wouldShare(j Job, smallest uint64) float64 {
	per := 1.0
	if j.Mem > 0 && smallest > 0 {
		per = min(1, float64(j.Mem)/float64(smallest))
	}
	return float64(max(j.GPUs, 0)) * per
}

// waitStats is the mean, nearest-rank p50 and p95, and maximum of waits
// (sorted in place); all 0 for none.
func waitStats(waits []time.Duration) (mean, p50, p95, most time.Duration) {
	if len(waits) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(waits)
	var sum float64 // ns: an int64 sum of many long waits could overflow
	for _, w := range waits {
		sum += float64(w)
	}
	mean = time.Duration(math.Round(sum / float64(len(waits))))
	return mean, percentile(waits, 50), percentile(waits, 95), waits[len(waits)-1]
}

// percentile is the nearest-rank pct-th percentile of sorted: the value
// at rank ⌈pct/100 · n⌉ (from 1, at least 1); 0 for none.
func percentile(sorted []time.Duration, pct int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (pct*n + 99) / 100 // ⌈pct·n/100⌉ in integers, exact
	return sorted[min(max(rank, 1), n)-1]
}

// stepIntegral integrates the samples' step function over [a, b): each
// sample holds from its After until the next one's (the last one beyond),
// clipped to [a, b). It returns ∫ value dt over the times when cond holds
// (value × seconds), and the length of those times (seconds).
func stepIntegral(samples []Sample, a, b time.Duration, value func(Sample) float64, cond func(Sample) bool) (area, span float64) {
	for i, s := range samples {
		from, to := max(s.After, a), b
		if i+1 < len(samples) {
			to = min(samples[i+1].After, b)
		}
		if to <= from || !cond(s) {
			continue
		}
		dt := (to - from).Seconds()
		area += value(s) * dt
		span += dt
	}
	return area, span
}

// jain is Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when all are
// equal (all 0 included), 1/n when one has everything; 0 for none.
func jain(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum, squares float64
	for _, x := range xs {
		sum += x
		squares += x * x
	}
	if squares == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// fairness is Report.JainActive and Report.JainWaiting over the windows
// of fairWindow from first to end. It sweeps the windows once: each job
// adds its user to the active (waiting) set in the first window it is
// active (waits) in and takes it out after the last, and its GPU-seconds
// to each window its run meets, so the cost is the jobs plus the windows
// × the users in them.
func fairness(cfg Config, outcome func(int) Outcome, first, end time.Duration) (active, waiting float64) {
	if end <= first {
		return 0, 0
	}
	nw := int((end - first + fairWindow - 1) / fairWindow)
	// windows is the windows [k0, k1] that [s, e) meets; a point (s == e)
	// meets the one holding it. ok is false if it meets none.
	windows := func(s, e time.Duration) (k0, k1 int, ok bool) {
		s = max(s, first)
		if s >= end || e < s {
			return 0, 0, false
		}
		k0 = int((s - first) / fairWindow)
		if e == s {
			return k0, k0, true
		}
		return k0, min(int((min(e, end)-1-first)/fairWindow), nw-1), true
	}
	type use struct {
		user int
		secs float64 // GPU-seconds / weight
	}
	index := map[string]int{}
	var weights []float64
	uses := make([][]use, nw)
	actOn, actOff := make([][]int, nw+1), make([][]int, nw+1)
	waitOn, waitOff := make([][]int, nw+1), make([][]int, nw+1)
	for i, j := range cfg.Jobs {
		o := outcome(i)
		if !o.Placeable {
			continue // never queued: neither active nor waiting
		}
		u, ok := index[j.User]
		if !ok {
			u = len(weights)
			index[j.User] = u
			weights = append(weights, cfg.Policy.Weight(j.User))
		}
		waitEnd, activeEnd := end, end // never started: waits to the end
		if o.Started {
			waitEnd, activeEnd = o.Start, max(o.End, o.Start)
		}
		if k0, k1, ok := windows(j.Submit, activeEnd); ok {
			actOn[k0] = append(actOn[k0], u)
			actOff[k1+1] = append(actOff[k1+1], u)
		}
		if waitEnd > j.Submit {
			if k0, k1, ok := windows(j.Submit, waitEnd); ok {
				waitOn[k0] = append(waitOn[k0], u)
				waitOff[k1+1] = append(waitOff[k1+1], u)
			}
		}
		if o.Started && o.End > o.Start {
			if k0, k1, ok := windows(o.Start, o.End); ok {
				sh := share(o, j) / weights[u]
				for k := k0; k <= k1; k++ {
					a := first + time.Duration(k)*fairWindow
					b := min(a+fairWindow, end)
					if d := min(o.End, b) - max(o.Start, a); d > 0 {
						uses[k] = append(uses[k], use{u, sh * d.Seconds()})
					}
				}
			}
		}
	}
	x := make([]float64, len(weights))
	act, wait := newUserSet(len(weights)), newUserSet(len(weights))
	var scratch []float64
	sumA, sumW, nA, nW := 0.0, 0.0, 0, 0
	for k := range nw {
		act.apply(actOff[k], actOn[k])
		wait.apply(waitOff[k], waitOn[k])
		for _, c := range uses[k] {
			x[c.user] += c.secs
		}
		if len(act.members) > 0 {
			scratch = scratch[:0]
			for _, u := range act.members {
				scratch = append(scratch, x[u])
			}
			sumA += jain(scratch)
			nA++
		}
		if len(wait.members) > 0 {
			scratch = scratch[:0]
			for _, u := range wait.members {
				scratch = append(scratch, x[u])
			}
			sumW += jain(scratch)
			nW++
		}
		for _, c := range uses[k] {
			x[c.user] = 0
		}
	}
	if nA > 0 {
		active = sumA / float64(nA)
	}
	if nW > 0 {
		waiting = sumW / float64(nW)
	}
	return active, waiting
}

// userSet is the users with at least one job in some state, kept by
// counts as jobs enter and leave it.
type userSet struct {
	count, pos []int // pos: index in members, -1 when out
	members    []int
}

func newUserSet(n int) *userSet {
	s := &userSet{count: make([]int, n), pos: make([]int, n)}
	for i := range s.pos {
		s.pos[i] = -1
	}
	return s
}

// apply takes a job of each user of off out of the set, then puts one of
// each user of on in.
func (s *userSet) apply(off, on []int) {
	for _, u := range off {
		if s.count[u]--; s.count[u] == 0 {
			p, last := s.pos[u], s.members[len(s.members)-1]
			s.members[p], s.pos[last] = last, p
			s.members = s.members[:len(s.members)-1]
			s.pos[u] = -1
		}
	}
	for _, u := range on {
		if s.count[u]++; s.count[u] == 1 {
			s.pos[u] = len(s.members)
			s.members = append(s.members, u)
		}
	}
}
