package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Input is everything one plan is a pure function of.
type Input struct {
	// Now is the time of the plan: walltimes, reservations and fair-share
	// usage are measured against it.
	Now    time.Time
	Policy Policy
	// Hosts are every host of the inventory with its facts and its last
	// snapshot, in any order (the plan goes by name).
	Hosts []Host
	// Running are the jobs that hold GPUs now (launching or running, with
	// their placements): what they book is not offered to the queue.
	// Jobs in other states are ignored.
	Running []job.Job
	// Queue are the queued jobs, in any order.
	Queue []job.Job
	// Cluster is the state's cluster id: GPU processes that carry it (and
	// a job's GSSH_JOB_ID) are that job's. "" matches any.
	Cluster string
	// Usage is each user's fair-share usage at Now, in GPU-seconds as
	// Usage weighs them (OrderFair ranks by it).
	Usage map[string]float64
	// Terse asks for codes without words: a pending job's reason, and its
	// rejections, carry their codes and empty texts (a simulator's
	// thousands of passes; the decisions are the same).
	Terse bool
	// Deps are the jobs queued ones depend on (Spec.After) that are in
	// neither Queue nor Running, by id: the ended ones. A dependency found
	// nowhere can never be met.
	Deps map[job.ID]job.Job
	// Explain is a job to explain in full (gssh show, a dry run; 0: none):
	// its Pending gets Rank, its Start the hosts turned down for it. Those
	// words cost time per job, so a pass asks for none.
	Explain job.ID
	// Rebalance asks this plan for preemptions (Decisions.Preempts) even
	// when the policy's Rebalance is off: gssh schedule --rebalance.
	Rebalance bool
}

// Start is a job the plan starts, and where.
type Start struct {
	Job       job.ID        `json:"job"`
	Placement job.Placement `json:"placement"`
	// Rejected lists the hosts turned down for the job and why, in
	// host-name order ("why not elsewhere"); only for Input.Explain.
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Pending is a queued job the plan does not start, and why.
type Pending struct {
	Job    job.ID `json:"job"`
	Reason Reason `json:"reason"`
	// Rejected lists every host turned down and why, in host-name order
	// (empty for a job blocked behind another).
	Rejected []Rejection `json:"rejected,omitempty"`
	// Position is the job's place in the queue's order (1 = first), and
	// Rank says in words what puts it there ("4th: bob's fair-share score
	// 1.8 ranks behind alice 0.3 and carol 0.9"; only for Input.Explain).
	Position int    `json:"position"`
	Rank     string `json:"rank,omitempty"`
	// Reservation is what EASY backfill holds for the job, when it is the
	// first that cannot start.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Exhausted: some host that meets the job's constraints turned it
	// down only for what is taken now, so it fits there once something
	// ends (see Code.Exhausted); false for a job blocked behind another.
	Exhausted bool `json:"exhausted,omitempty"`
}

// Reservation is where and from when a job that cannot start now will be
// able to, by the running jobs' walltimes: until then, only jobs that end
// in time may use those GPUs.
type Reservation struct {
	Host    string    `json:"host"`
	GPUs    []string  `json:"gpus"`
	Indexes []int     `json:"indexes"`
	From    time.Time `json:"from"`
}

func (r Reservation) String() string {
	return fmt.Sprintf("reserved %s GPU %s from %s", r.Host, units.Ranges(slices.Sorted(slices.Values(r.Indexes)), 3), r.From.UTC().Format("2006-01-02 15:04 UTC"))
}

// Decisions is what a pass should do.
type Decisions struct {
	// Starts are the jobs to launch, in the order they were placed; each
	// was placed with the GPUs of the ones before it booked.
	Starts []Start `json:"starts"`
	// Pending holds every queued job not started, in queue order, but
	// those in Cancels.
	Pending []Pending `json:"pending"`
	// Cancels are the queued jobs to end as cancelled: a dependency of
	// theirs can never be met.
	Cancels []Cancel `json:"cancels,omitempty"`
	// Preempts are the running jobs to preempt (SIGTERM, then back to the
	// queue) so that one waiting job starts once they are gone; only
	// when the policy's Rebalance or Input.Rebalance is on (see
	// rebalance).
	Preempts []Preempt `json:"preempts,omitempty"`
	// Holds say, when rebalancing preempts nothing, what keeps it from
	// preempting for each waiting job it looked at (see Hold).
	Holds []Hold `json:"holds,omitempty"`
}

// Plan orders in.Queue by in.Policy (and in.Usage) and offers each job, in
// turn, the GPUs that in.Running and the jobs placed before it leave,
// booking what it takes. Under BackfillEasy the first job that does not
// fit gets a reservation, and jobs behind it may use the reserved GPUs
// only if they end before it begins. It returns the starts and a reason
// for every job left queued. It is deterministic (hosts go by name, GPUs
// by index, ties by job id) and leaves its input as it is.
func Plan(in Input) Decisions { return plan(in, true, nil) }

// plan is Plan, made with a Planner of its own (a plan may plan again
// within: rebalance).
func plan(in Input, memo bool, ended map[job.ID]bool) Decisions {
	return new(Planner).plan(in, memo, ended)
}

// plan is Plan; without memo every job is placed afresh, on every host
// (tests check that the memos change no answer). The running jobs in ended hold nothing:
// they are taken to have ended (a forecast), and what their processes use
// counts as free.
func (pl *Planner) plan(in Input, memo bool, ended map[job.ID]bool) Decisions {
	pol := in.Policy.WithDefaults()
	hosts := pl.nodes(in.Hosts, in.Running, in.Cluster, func(j *job.Job) time.Time { return expectedEnd(j, pol, in.Now) }, memo && len(ended) == 0)
	byName := pl.byName
	for _, n := range hosts {
		n.nocache, n.now = !memo, in.Now
		if len(ended) > 0 {
			n.gone = ended
		}
	}
	out := Decisions{Starts: []Start{}, Pending: pl.pendings(len(in.Queue))}
	var blocker *job.Job
	var blocked Reason // what every job behind the blocker is told
	// froms are the reservations' starts, earliest first: a job's end
	// against them is all the checks read of it (want.inTime).
	var froms []time.Time
	reservations := 0
	// failed remembers, per request shape, the decision of a job that did
	// not fit: until the next booking or reservation (capacity only
	// shrinks during a plan) every job of that shape gets the same answer,
	// so a queue of thousands of alike jobs is not worked out thousands of
	// times. The key holds everything the checks read of a job.
	var failed shapeMemo[decision]
	var unreservable shapeMemo[bool]
	rank := NewRanking(pol, in.Now, in.Usage, nil) // its users: the picker's
	picks := newPicker(in.Queue, in.Running, rank, &pl.picks)
	w := new(want) // each job's in turn: nothing keeps it past its turn
	states := jobStates{in: &in, gone: ended}
	capped := pol.hasCaps()
	windowed := windowAhead(hosts, in.Now)
	for pos := 0; ; pos++ {
		r, more := picks.next()
		if !more {
			break
		}
		j := r.Job
		if len(j.Spec.After) > 0 || j.Hold != nil || !j.Spec.Begin.IsZero() || j.Spec.Array != nil && j.Spec.Array.Limit > 0 || capped {
			why, doom := gate(j, in.Now, &states, in.Terse && j.ID != in.Explain)
			if !doom.ok() {
				out.Cancels = append(out.Cancels, Cancel{Job: j.ID, Reason: doom})
				pos--
				continue
			}
			if !why.ok() {
				p := Pending{Job: j.ID, Position: pos + 1, Reason: why}
				if j.ID == in.Explain {
					p.Rank = rankText(picks.picked, pos, pol)
				}
				out.Pending = append(out.Pending, p)
				continue
			}
		}
		pend := func(p Pending) {
			p.Job, p.Position = j.ID, pos+1
			if j.ID == in.Explain {
				p.Rank = rankText(picks.picked, pos, pol)
			}
			out.Pending = append(out.Pending, p)
		}
		if blocker != nil {
			r := blocked
			if in.Terse && j.ID != in.Explain {
				r.Text = "" // the code only, so a new head rewrites no reasons
			}
			pend(Pending{Reason: r})
			continue
		}
		*w = want{Request: requestOf(&j.Spec), job: j.ID, holder: holderOf(j)}
		// A job may use reserved GPUs only if it is sure to end in time:
		// only an enforced walltime says so. The estimate is what the
		// reservations of the jobs behind it assume.
		if wt := enforced(j, pol); wt > 0 {
			w.ends, w.wall = in.Now.Add(wt), wt
		}
		w.windowed = windowed
		w.holder.Ends = in.Now.Add(walltime(j, pol))
		if len(froms) > 0 {
			w.inTime = inTime(w.ends, froms)
		}
		w.explain = j.ID == in.Explain
		w.terse = in.Terse && !w.explain
		key := w.shape()
		d, seen := failed.get(key)
		if !seen || !memo || w.explain {
			d = place(hosts, w, pol.Fit)
		}
		if !d.ok {
			failed.put(key, d)
			p := Pending{Reason: d.reason, Rejected: d.rejected, Exhausted: d.exhausted}
			switch {
			case pol.Backfill == BackfillNone && d.exhausted:
				blocker = j
				blocked = because(CodeBlocked, fmt.Sprintf("waiting behind job %s, which goes first and does not fit yet (backfill: none)", j.Ref()))
			case pol.Backfill == BackfillEasy && d.exhausted && (reservations < pol.ReserveDepth || aged(j, pol, in.Now, reservations)) &&
				!isTrue(unreservable.get(key)):
				// A shape no gssh job's end makes room for stays so for
				// the plan: bookings only add holders.
				if res := reserve(hosts, w, pol, in.Now); res == nil {
					unreservable.put(key, true)
				} else {
					byName[res.Host].reserve(*res, j.ID, j.Ref(), res.From.Add(walltime(j, pol)))
					reservations++
					i, _ := slices.BinarySearchFunc(froms, res.From, time.Time.Compare)
					froms = slices.Insert(froms, i, res.From)
					p.Reservation = res
					failed.clear()
				}
			}
			pend(p)
			continue
		}
		byName[d.placement.Host].book(d.placement, w.holder)
		picks.charge(j, d.placement.Share, walltime(j, pol))
		states.started(j, d.placement)
		failed.clear()
		st := Start{Job: j.ID, Placement: d.placement}
		if w.explain {
			st.Rejected = d.rejected
		}
		out.Starts = append(out.Starts, st)
	}
	if (pol.Rebalance || in.Rebalance) && len(ended) == 0 {
		out.Preempts, out.Holds = rebalance(in, rank, hosts, out.Pending, memo)
	}
	return out
}

// enforced is the walltime j is held to: its --timeout, else the
// policy's default_timeout; 0 for none.
func enforced(j *job.Job, pol Policy) time.Duration {
	return cmp.Or(j.Spec.Timeout, pol.DefaultTimeout)
}

// walltime is what j is expected to run: its enforced walltime, else (for
// reservations only) the backfill estimate.
func walltime(j *job.Job, pol Policy) time.Duration {
	return cmp.Or(enforced(j, pol), pol.BackfillEstimate)
}

// expectedEnd is when running job j is expected to end: its start plus its
// walltime. Past that, a job held to its walltime ends any moment (the
// next pass stops it): now; one that outran the estimate is assumed to
// run another estimate, and another: the end of the estimate period it is
// in, so it never pins a reservation to now, and the time a reservation
// (and every reason that names it) gives does not move from pass to
// pass.
func expectedEnd(j *job.Job, pol Policy, now time.Time) time.Time {
	start := j.StartedAt
	if start.IsZero() {
		start = now
	}
	e := start.Add(walltime(j, pol))
	switch {
	case e.After(now):
		return e
	case enforced(j, pol) > 0:
		return now
	}
	est := pol.BackfillEstimate
	periods := now.Sub(start)/est + 1
	return start.Add(periods * est)
}

// reserve finds the earliest time at which w fits, as the jobs holding
// GPUs end at their expected ends (earliest first, ties by job id), and
// where: EASY backfill's reservation. Nil when w would not fit even with
// every one of them gone (what blocks it is no gssh job's).
func reserve(hosts []*node, w *want, pol Policy, now time.Time) *Reservation {
	before := func(a, b ending) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.job, b.job)) }
	var s *scratch
	if len(hosts) > 0 {
		s = hosts[0].scratch
	}
	if s == nil {
		s = new(scratch)
	}
	if s.gone == nil {
		s.gone = map[job.ID]bool{}
	}
	gone := s.gone
	clear(gone)
	if len(hosts) > 0 {
		maps.Copy(gone, hosts[0].gone) // the jobs a forecast took to have ended
	}
	// Each job holds GPUs of one host, so a host's fit depends on its own
	// ends only: the earliest fit is the least, over the hosts, of each
	// host's first fit as its jobs end in order. A host stops looking at
	// ends later than the best found so far.
	var best *Reservation
	var bestEnd ending
	ends := s.ends
	defer func() { s.ends = ends[:0] }()
	for _, n := range hosts {
		ends = ends[:0]
		early := false // some end comes before the best so far
		for _, h := range n.jobs {
			if !n.gone[h.Job] && !h.other() { // another queue's job: its end is not known here
				at := h.Ends
				if at.IsZero() || at.Before(now) {
					at = now
				}
				e := ending{at.UnixNano(), h.Job, at, false}
				ends = append(ends, e)
				early = early || best == nil || before(e, bestEnd) < 0
			}
		}
		// The reservations made before end too: the job may fit once one
		// is over.
		for _, h := range n.holds {
			if h.job != w.job {
				e := ending{h.until.UnixNano(), h.job, h.until, true}
				ends = append(ends, e)
				early = early || best == nil || before(e, bestEnd) < 0
			}
		}
		if !early {
			continue // the loop below would stop at once
		}
		// A job listed twice among the running ones is here twice, alike.
		slices.SortFunc(ends, before)
		ends = slices.CompactFunc(ends, func(a, b ending) bool { return a.job == b.job })
		for _, e := range ends {
			if best != nil && before(e, bestEnd) >= 0 {
				break
			}
			if !e.hold {
				gone[e.job] = true
			}
			if !mayFit(n, w, gone) {
				continue
			}
			trial := n.whatIfIn(&s.trial, gone)
			trial.now = e.t // a drain ahead takes the job only if it ends by the drain's start from then
			trial.holds = n.holds
			at := *w                                                  // started at e.t, the reservations before it are in its way
			at.ends, at.quiet = e.t.Add(w.holder.Ends.Sub(now)), true // codes: no words are shown of a what-if
			us, why := feasible(trial, &at)
			if !why.ok() {
				continue
			}
			p := choose(pol.Fit, []option{{trial, us}}, &at)
			best, bestEnd = &Reservation{Host: p.Host, GPUs: p.GPUs, Indexes: p.Indexes, From: e.t}, e
			break
		}
		for _, e := range ends {
			if !n.gone[e.job] {
				delete(gone, e.job)
			}
		}
	}
	return best
}

// aged reports whether queued job j gets a reservation beyond the
// policy's depth, with reservations made so far: under the multifactor
// order (max_age is its knob), when it has waited MaxAge, up to
// MaxAgedReservations beyond the depth. (Under fifo the oldest jobs are
// first anyway, and EASY stays EASY.)
func aged(j *job.Job, pol Policy, now time.Time, reservations int) bool {
	return pol.Order == OrderFair && reservations < pol.ReserveDepth+MaxAgedReservations && now.Sub(WaitingSince(j)) >= pol.MaxAge
}

// inTime is a job's end against the reservations' starts (froms,
// earliest first), as shape keys it: 1 + how many it does not end before
// (all of them when it has no end).
func inTime(ends time.Time, froms []time.Time) int32 {
	if ends.IsZero() {
		return int32(1 + len(froms))
	}
	before, _ := slices.BinarySearchFunc(froms, ends, func(f, e time.Time) int {
		if e.Before(f) {
			return 1
		}
		return -1
	})
	return int32(1 + before)
}

// ending is a holder's end, or a reservation's, as reserve orders them.
type ending struct {
	at   int64 // t in Unix ns, to sort by
	job  job.ID
	t    time.Time
	hold bool // a reservation's end, not a holder's
}

// mayFit is false when n cannot take w once the holders in gone are gone,
// by the ledger alone: too few of its units are left with no gssh job
// (w exclusive), or with room for w's booking beside the jobs left (w
// shared), or too few of the host's CPUs or too little of its memory
// beside the jobs left (mayFitHost). It is only a quick "no" before the
// feasibility chain, which alone says yes.
func mayFit(n *node, w *want, gone map[job.ID]bool) bool {
	if !mayFitHost(n, w, gone) {
		return false
	}
	need, room := max(w.GPUs, 1), 0
	for i := range n.units {
		u := &n.units[i]
		var mem uint64
		taken := false
		for _, h := range n.held[u.slot].Holders {
			if gone[h.Job] {
				continue
			}
			mem += h.Mem
			taken = taken || h.Mem == 0 || w.MemPerGPU == 0
		}
		if !taken && (w.MemPerGPU == 0 || u.total == nil || mem+w.MemPerGPU <= *u.total) {
			room++
		}
	}
	return room >= need
}

// MaxForecastSteps bounds a forecast: the job ends it plays forward (each
// one plans the queue again) before it gives up.
const MaxForecastSteps = 100

// Forecast is when a queued job is expected to start.
type Forecast struct {
	// Start is the expected start (Input.Now: at once); zero when no
	// forecast could be made, and then Why says why.
	Start     time.Time     `json:"start,omitzero"`
	Placement job.Placement `json:"placement,omitzero"`
	// Estimated: some end the forecast waited for is the backfill
	// estimate of a job without walltime, not a walltime.
	Estimated bool   `json:"estimated,omitempty"`
	Why       string `json:"why,omitempty"`
}

// ForecastStart says when queued job id is expected to start, as Slurm's
// `squeue --start` does: it plays in forward, each running job ending at
// its expected end (its walltime, else the policy's backfill estimate),
// the queue planned again at each end as Plan would, nothing new
// submitted, until id starts. Jobs usually end before their walltimes, so
// this is a latest start more than a prediction. At most
// MaxForecastSteps ends are played.
//
// ended are the uses of the jobs that ended before in.Now (the store's
// ledger within the policy's horizon): with them, fair-share usage is
// worked out again at each end, as the jobs played forward accrue it;
// nil keeps in.Usage as it is.
func ForecastStart(in Input, id job.ID, ended []job.Use) Forecast {
	pol := in.Policy.WithDefaults()
	running := slices.Clone(in.Running)
	queue := slices.Clone(in.Queue)
	if !slices.ContainsFunc(queue, func(j job.Job) bool { return j.ID == id }) {
		return Forecast{Why: fmt.Sprintf("job %d is not queued", id)}
	}
	gone := map[job.ID]bool{}
	endAt := map[job.ID]time.Time{}
	pl := new(Planner) // each step's plan is read before the next

	now, estimated := in.Now, false
	for step := range MaxForecastSteps + 1 {
		cur := in
		cur.Now, cur.Running, cur.Queue = now, running, queue
		if ended != nil && step > 0 {
			uses := slices.Clone(ended)
			for _, j := range running {
				if u, ok := j.Use(); ok {
					u.Ended = endAt[j.ID] // zero while it runs
					uses = append(uses, u)
				}
			}
			cur.Usage = Usage(uses, now, pol.FairShare)
		}
		if len(gone) > 0 { // the jobs the forecast ended succeeded, as far as dependents know
			cur.Deps = maps.Clone(in.Deps)
			if cur.Deps == nil {
				cur.Deps = map[job.ID]job.Job{}
			}
			for _, j := range running {
				if gone[j.ID] {
					j.State = job.Succeeded
					cur.Deps[j.ID] = j
				}
			}
		}
		d := pl.plan(cur, true, gone)
		for _, c := range d.Cancels {
			if c.Job == id {
				return Forecast{Why: "it never starts if the jobs ahead succeed, as the forecast assumes: " + c.Reason.Text}
			}
		}
		started := map[job.ID]job.Placement{}
		for _, s := range d.Starts {
			if s.Job == id {
				return Forecast{Start: now, Placement: s.Placement, Estimated: estimated}
			}
			started[s.Job] = s.Placement
		}
		var begin time.Time
		for _, p := range d.Pending {
			if p.Job != id {
				continue
			}
			switch {
			case p.Reason.Code == CodeHeld:
				return Forecast{Why: p.Reason.Text}
			case p.Reason.Code == CodeBegin:
				i := slices.IndexFunc(queue, func(j job.Job) bool { return j.ID == id })
				begin = queue[i].Spec.Begin
			case p.Reason.Code == CodeUserCap:
				// the user's own running jobs end as the forecast plays on,
				// unless the job alone asks for more than the cap
				j := queue[slices.IndexFunc(queue, func(j job.Job) bool { return j.ID == id })]
				if c := pol.CapsOf(j.User); c.MaxGPUs > 0 && j.Spec.GPUs > c.MaxGPUs {
					return Forecast{Why: p.Reason.Text}
				}
			case p.Reason.Code == CodeDependency:
			case !p.Exhausted && p.Reason.Code != CodeBlocked:
				return Forecast{Why: "no job's end makes room: " + p.Reason.Text}
			}
		}
		queue = slices.DeleteFunc(slices.Clone(queue), func(j job.Job) bool {
			p, ok := started[j.ID]
			if ok {
				j.State, j.StartedAt, j.Placement = job.Running, now, p
				running = append(running, j)
			}
			return ok
		})
		var next time.Time
		for i := range running {
			if e := expectedEnd(&running[i], pol, now); !gone[running[i].ID] && (next.IsZero() || e.Before(next)) {
				next = e
			}
		}
		if !begin.IsZero() && (next.IsZero() || begin.Before(next)) {
			now = begin // nothing ends before its --begin
			continue
		}
		if next.IsZero() {
			return Forecast{Why: "no running job's end makes room"}
		}
		for i := range running {
			j := &running[i]
			if !gone[j.ID] && !expectedEnd(j, pol, now).After(next) {
				gone[j.ID], endAt[j.ID] = true, next
				estimated = estimated || enforced(j, pol) == 0
			}
		}
		now = next
	}
	return Forecast{Why: fmt.Sprintf("more than %d job ends ahead of it", MaxForecastSteps)}
}

// ScoreText prints a fair-share score (or usage), given in GPU-seconds,
// in GPU-hours as people read them: "0", "<0.01", "0.42", "1.5", "17.3".
func ScoreText(seconds float64) string {
	switch h := seconds / 3600; {
	case h == 0:
		return "0"
	case h < 0.01:
		return "<0.01"
	case h < 1:
		return strconv.FormatFloat(h, 'f', 2, 64)
	default:
		return strconv.FormatFloat(h, 'f', 1, 64)
	}
}

// ahead names up to 3 of the jobs in rs, the nearest first.
func ahead(rs []ranked, name func(ranked) string) string {
	var out []string
	for k := len(rs) - 1; k >= 0 && len(out) < 3; k-- {
		out = append(out, name(rs[k]))
	}
	if len(rs) > 3 {
		out = append(out, fmt.Sprintf("%d more", len(rs)-3))
	}
	return joinAnd(out)
}

func countBefore(rs []ranked, f func(ranked) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// shape is a memo key: everything a check reads of a job (but its id,
// which only the reservation's own job is checked by).
type shape struct {
	host, labels string
	gpus         int
	mem          uint64
	cpus         int
	hostMem      uint64
	// inTime is all the checks read of the job's end: whether it ends
	// before the plan's reservation (1) or not (2); 0 while there is
	// none. (The exact end would make every job a shape of its own.)
	inTime int32
	// wall is the job's walltime while some host's drain is ahead (it
	// decides whether the job ends by the drain's start, and the reason
	// names it); 0 otherwise.
	wall  time.Duration
	quiet bool // codes only
}

// shape is the memo key of w.
func (w *want) shape() shape {
	k := shape{gpus: w.GPUs, mem: w.MemPerGPU, cpus: w.CPUs, hostMem: w.HostMem, quiet: w.quiet}
	if !auto(w.Host) {
		k.host = w.Host // any host is "": keys of alike jobs compare without reading their strings
	}
	if len(w.Labels) > 0 {
		k.labels = strings.Join(w.Labels, "\x00")
	}
	k.inTime = w.inTime
	if w.windowed {
		k.wall = w.wall
	}
	return k
}

// RequestOf is the placement request of a job spec.
func RequestOf(s job.Spec) Request { return requestOf(&s) }

// requestOf is RequestOf, without copying the spec.
func requestOf(s *job.Spec) Request {
	return Request{Host: s.Host, Labels: s.Labels, GPUs: s.GPUs, MemPerGPU: s.MemPerGPU, CPUs: s.CPUs, HostMem: s.HostMem}
}
