package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// CodePreempted is the code of a Preempt's reason, and of a job a
// preemption put back in the queue.
const CodePreempted Code = "preempted"

// Preempt is a running job a rebalancing plan preempts, and the waiting
// job it makes room for.
type Preempt struct {
	Job job.ID `json:"job"` // the victim: running, preemptible
	// Ref names the victim for people (job.Job.Ref: "16_2").
	Ref string `json:"-"`
	For job.ID `json:"for"` // the waiting job that starts once the victims are gone
	// Host is where the victim runs (every victim of one waiting job is
	// on the same host: a job's GPUs are on one host).
	Host string `json:"host"`
	// Reason says why, with code CodePreempted: "preempted for job 12 of
	// alice (priority 4 ranks ahead of 6)".
	Reason Reason `json:"reason"`
}

// Hold is what keeps rebalancing from preempting for a waiting job now:
// the policy setting in the way and, in words, how far it is from
// letting it ("preempt_after: 3m10s to go"). gssh schedule --rebalance
// --dry-run prints them when it would preempt nothing.
type Hold struct {
	Job job.ID `json:"job"` // the waiting job; 0 for the whole queue (order: fifo)
	// Ref names the waiting job for people (job.Job.Ref: "16_2").
	Ref string `json:"-"`
	// Setting is the inventory's policy key in the way: "preempt_after",
	// "min_runtime", "order"; "" when none is (no running job that
	// could ever be preempted for it: none preemptible ranks behind it,
	// or none whose going leaves it room).
	Setting string `json:"setting,omitempty"`
	Text    string `json:"text"`
}

// Bounds of one plan's search for victims.
const (
	// maxWaiters is how many waiting jobs, in queue order, a plan looks
	// for victims for before it gives up.
	maxWaiters = 8
	// maxVictimSets bounds the sets of victims tried (each a what-if of
	// one host) for one waiting job.
	maxVictimSets = 4096
	// maxVerify bounds the plans made again to check that a waiting job
	// starts once a set of victims is gone.
	maxVerify = 8
)

// rebalance decides the preemptions of a plan, as Slurm's preemption by
// partition priority and QOS does with PreemptMode=REQUEUE, for one
// waiting job at a time:
//
//   - Nothing is preempted while some job is still being preempted
//     (state preempting: its GPUs are still booked), so a pass never
//     chooses more victims for a job that already has some.
//   - The waiting job is the first in queue order of those pending that
//     fit once something ends (Pending.Exhausted: neither held, nor
//     waiting for a dependency, --begin, its array's limit or its
//     owner's cap, nor blocked behind another) and have waited
//     PreemptAfter since they were submitted, last requeued or their
//     --begin.
//   - Its victims are running jobs (never launching, preempting or
//     interactive ones) that are preemptible, ran at least MinRuntime
//     since their latest start (so a job preempted once is not again
//     within MinRuntime of its restart), and rank behind it: a lower
//     priority class (a larger --priority) under the priority and
//     fairshare orders, or the same class and a user whose fair-share
//     score is worse under fairshare, by more than the waiting job adds
//     to its own user's in MinRuntime (its GPUs × MinRuntime over the
//     weight): so that the victim's user does not outrank it again as
//     soon as it may be preempted, and two users of one class do not
//     take a GPU from each other every MinRuntime. Under fifo nothing
//     is preempted.
//   - The fewest victims, all on one host, that leave the job room
//     there (the feasibility chain on the host without them), then
//     the youngest: the least work lost (each victim's run time since
//     its start times its GPUs, summed), then host name, then job ids.
//   - The plan is made again without the victims: the waiting job must
//     start in it, so no job is preempted for one that would then not
//     fit, nor for one another job (ahead of it, or let in under its
//     owner's cap by the victims' going) would take the room from.
//
// It returns nil when no waiting job qualifies, with the Holds of the
// waiting jobs it looked at: what setting keeps each from preempting.
func rebalance(in Input, rank *Ranking, hosts []*node, pending []Pending, memo bool) ([]Preempt, []Hold) {
	pol := rank.Policy()
	if pol.Order == OrderFIFO {
		return nil, []Hold{{Setting: "order", Text: "order: fifo preempts nothing (rebalancing goes by priority or fair-share: order: priority or fairshare)"}}
	}
	running := make(map[job.ID]*job.Job, len(in.Running))
	for i := range in.Running {
		r := &in.Running[i]
		if r.State == job.Preempting {
			return nil, []Hold{{Text: fmt.Sprintf("job %s is still being preempted: one round at a time", r.Ref())}}
		}
		running[r.ID] = r
	}
	var holds []Hold
	queued := make(map[job.ID]*job.Job, len(in.Queue))
	for i := range in.Queue {
		queued[in.Queue[i].ID] = &in.Queue[i]
	}
	tried := 0
	for _, p := range pending {
		w, ok := queued[p.Job]
		if !ok || !p.Exhausted {
			continue
		}
		if waited := in.Now.Sub(WaitingSince(w)); waited < pol.PreemptAfter {
			// not counted in maxWaiters: a job not due yet takes no
			// search from those that are
			holds = append(holds, Hold{Job: w.ID, Ref: w.Ref(), Setting: "preempt_after", Text: fmt.Sprintf("preempt_after: %s to go (it has waited %s of %s)",
				units.FormatDuration((pol.PreemptAfter - waited).Round(time.Second)), units.FormatDuration(waited.Round(time.Second)), units.FormatDuration(pol.PreemptAfter.Round(time.Second)))})
			continue
		}
		if tried++; tried > maxWaiters {
			return nil, holds
		}
		// The running jobs that rank behind w and may be preempted, by
		// host, and why each ranks behind.
		why := map[job.ID]string{}
		victims := func(n *node) []*job.Job {
			var out []*job.Job
			seen := map[job.ID]bool{}
			for _, b := range n.held {
				for _, h := range b.Holders {
					v := running[h.Job]
					if h.Planned || h.other() || v == nil || seen[v.ID] {
						continue
					}
					seen[v.ID] = true
					if r, ok := preemptible(v, w, rank, in.Now); ok {
						why[v.ID] = r
						out = append(out, v)
					}
				}
			}
			// youngest first (least run time lost), then id
			slices.SortFunc(out, func(a, b *job.Job) int { return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.ID, b.ID)) })
			return out
		}
		chosen := chooseVictims(in, hosts, w, victims, memo)
		if chosen == nil {
			holds = append(holds, notYet(in, pol, w, running, rank))
			continue
		}
		out := make([]Preempt, len(chosen.jobs))
		for i, v := range chosen.jobs {
			out[i] = Preempt{Job: v.ID, Ref: v.Ref(), For: w.ID, Host: chosen.host,
				Reason: because(CodePreempted, fmt.Sprintf("preempted for job %s of %s (%s)", w.Ref(), w.User, why[v.ID]))}
		}
		return out, nil
	}
	return nil, holds
}

// notYet is the Hold of waiting job w that has waited preempt_after but
// has no victims now: the running job that would rank behind it the
// soonest once it has run min_runtime, else none.
func notYet(in Input, pol Policy, w *job.Job, running map[job.ID]*job.Job, rank *Ranking) Hold {
	var soonest *job.Job
	for _, v := range running {
		if v.StartedAt.IsZero() || in.Now.Sub(v.StartedAt) >= pol.MinRuntime {
			continue
		}
		if _, ok := preemptible(v, w, rank, v.StartedAt.Add(pol.MinRuntime)); ok &&
			(soonest == nil || v.StartedAt.Before(soonest.StartedAt) || v.StartedAt.Equal(soonest.StartedAt) && v.ID < soonest.ID) {
			soonest = v
		}
	}
	if soonest == nil {
		return Hold{Job: w.ID, Ref: w.Ref(), Text: "no running job may be preempted for it: none preemptible ranks behind it, or their going leaves it no room"}
	}
	ran := in.Now.Sub(soonest.StartedAt)
	return Hold{Job: w.ID, Ref: w.Ref(), Setting: "min_runtime", Text: fmt.Sprintf("min_runtime: %s to go (job %s, which ranks behind it, has run %s of %s)",
		units.FormatDuration((pol.MinRuntime - ran).Round(time.Second)), soonest.Ref(), units.FormatDuration(ran.Round(time.Second)), units.FormatDuration(pol.MinRuntime.Round(time.Second)))}
}

// preemptible says whether running job v may be preempted for waiting job
// w at now, as rank orders them, and why it ranks behind w ("priority 4
// ranks ahead of 6", "fair-share: alice's score 0.30 ranks ahead of
// bob's 1.8"). Within a priority class (order: fairshare), w must rank
// ahead of v queued again now even once w's user is charged w's GPUs for
// MinRuntime: so that v does not outrank w again as soon as it may be
// preempted, and two users of one class do not take a GPU from each
// other every MinRuntime.
func preemptible(v, w *job.Job, rank *Ranking, now time.Time) (string, bool) {
	pol := rank.Policy()
	switch {
	case v.State != job.Running, !v.Spec.Preemptible, v.Spec.Interactive != nil, v.StartedAt.IsZero(),
		now.Sub(v.StartedAt) < pol.MinRuntime:
		return "", false
	case w.Spec.Priority < v.Spec.Priority:
		return fmt.Sprintf("priority %d ranks ahead of %d", w.Spec.Priority, v.Spec.Priority), true
	case pol.Order != OrderFair || w.Spec.Priority != v.Spec.Priority || w.User == v.User:
		return "", false
	}
	ws, vs := rank.Score(w.User), rank.Score(v.User)
	if pol.Weights.FairShareOnly() {
		if ws+pol.MinRuntime.Seconds()*float64(max(w.Spec.GPUs, 1))/pol.Weight(w.User) < vs {
			return fmt.Sprintf("fair-share: %s's score %s ranks ahead of %s's %s", w.User, ScoreText(ws), v.User, ScoreText(vs)), true
		}
		return "", false
	}
	again := *v // queued again now: its wait begins
	again.SubmittedAt, again.Runs, again.Spec.Begin = now, nil, time.Time{}
	charged := ws + rank.Charge(w, float64(max(w.Spec.GPUs, 1)), pol.MinRuntime)
	pw, pv := rank.Of(w, charged), rank.Of(&again, vs)
	if rank.Compare(pw, pv) < 0 {
		return fmt.Sprintf("%s's %s ranks ahead of %s's %s", w.User, FactorsText(pw, pol), v.User, FactorsText(pv, pol)), true
	}
	return "", false
}

// victimSet is one host's jobs whose going would let a waiting job start.
type victimSet struct {
	host string
	jobs []*job.Job    // youngest first
	lost time.Duration // run time × GPUs, summed over jobs
}

func (a victimSet) before(b victimSet) int {
	c := cmp.Or(cmp.Compare(len(a.jobs), len(b.jobs)), cmp.Compare(a.lost, b.lost), cmp.Compare(a.host, b.host))
	for i := 0; c == 0 && i < len(a.jobs); i++ {
		c = cmp.Compare(a.jobs[i].ID, b.jobs[i].ID)
	}
	return c
}

// chooseVictims finds the fewest of the candidates victims(n) gives on
// one host n whose going lets w fit on n, then the youngest, checked by
// planning again without them (see rebalance); nil when none does.
func chooseVictims(in Input, hosts []*node, w *job.Job, victims func(*node) []*job.Job, memo bool) *victimSet {
	want := wantOf(*w)
	want.quiet, want.wall = true, enforced(w, in.Policy)
	type cands struct {
		n  *node
		vs []*job.Job
	}
	var all []cands
	most := 0
	for _, n := range hosts {
		if vs := victims(n); len(vs) > 0 {
			all = append(all, cands{n, vs})
			most = max(most, len(vs))
		}
	}
	budget := maxVictimSets
	for k := 1; k <= most && budget > 0; k++ {
		var fits []victimSet
		for _, c := range all {
			if len(c.vs) < k {
				continue
			}
			combinations(len(c.vs), k, func(idx []int) bool {
				if budget--; budget < 0 {
					return false
				}
				gone := make(map[job.ID]bool, k)
				set := victimSet{host: c.n.Name, jobs: make([]*job.Job, k)}
				for i, x := range idx {
					v := c.vs[x]
					gone[v.ID], set.jobs[i] = true, v
					set.lost += in.Now.Sub(v.StartedAt) * time.Duration(max(len(v.Placement.GPUs), 1))
				}
				if !mayFit(c.n, want, gone) {
					return true
				}
				if _, why := feasible(c.n.whatIf(gone), want); why.ok() {
					fits = append(fits, set)
				}
				return true
			})
		}
		slices.SortFunc(fits, victimSet.before)
		for i := range min(len(fits), maxVerify) {
			if startsWithout(in, w.ID, fits[i].jobs, memo) {
				return &fits[i]
			}
		}
	}
	return nil
}

// startsWithout reports whether the plan of in, made again with the jobs
// gone taken to have ended, starts job id.
func startsWithout(in Input, id job.ID, gone []*job.Job, memo bool) bool {
	in.Rebalance, in.Policy.Rebalance, in.Explain, in.Terse = false, false, 0, true
	ended := make(map[job.ID]bool, len(gone))
	for _, v := range gone {
		ended[v.ID] = true
	}
	d := plan(in, memo, ended)
	return slices.ContainsFunc(d.Starts, func(s Start) bool { return s.Job == id })
}

// combinations calls f with each k-subset of 0..n-1, as ascending
// indexes, in lexicographic order, until f returns false.
func combinations(n, k int, f func([]int) bool) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		if !f(idx) {
			return
		}
		i := k - 1
		for i >= 0 && idx[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}
