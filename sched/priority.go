package sched

import (
	"cmp"
	"math"
	"time"

	"github.com/gssh/gssh/job"
)

// Weights weigh the factors of a job's multifactor priority within its
// priority class (order: fairshare), as Slurm's priority/multifactor
// does: each factor is in [0, 1], and the priority is their weighted sum.
// The zero value means DefaultWeights; fair-share alone is {1, 0, 0}.
type Weights struct {
	FairShare float64 `json:"fairshare"`
	Age       float64 `json:"age"`
	Size      float64 `json:"size"`
}

// FairShareOnly reports whether the order is fair-share alone (no age or
// size weight): jobs then go by their users' scores, exactly.
func (w Weights) FairShareOnly() bool { return w.Age == 0 && w.Size == 0 }

// Multifactor reports whether p orders by the multifactor priority
// (order fairshare, a weight beyond fair-share's): a job's own factors
// then count, not only its user's score.
func (p Policy) Multifactor() bool { return p.Order == OrderFair && !p.Weights.FairShareOnly() }

// Priority is a queued job's place in the queue's order, factor by
// factor: what Ranking.Of works out, and what the picker, preemption,
// gssh show and gssh usage read.
type Priority struct {
	Job   job.ID
	Class int // the job's --priority: 0 goes first
	// Score is the user's fair-share score: decayed usage over weight, in
	// GPU-seconds, with what this plan has started so far charged.
	Score float64
	// The factors, each in [0, 1], higher goes first: FairShare is
	// 2^(−Score / the fair score), Age the wait over MaxAge (capped at
	// 1), Size the job's GPU-hours on a log scale (see sizeFactor).
	FairShare, Age, Size float64
	// Value is the weighted sum of the factors (order: fairshare).
	Value float64
}

// Ranking works out jobs' priorities under one policy, at one time, from
// the users' usage. It is the one definition of the queue's order.
type Ranking struct {
	pol   Policy // with defaults
	now   time.Time
	usage map[string]float64
	// fair is the score every user would have if the usage were spread
	// by weight among the users with jobs: all usage over their weights,
	// at least one GPU-hour (so a queue that has used almost nothing is
	// not ordered by seconds); 0 until fairScore works it out from users.
	fair  float64
	users func(yield func(string) bool)
	// multifactor: pol.Multifactor(), read at every job (readsFactors).
	multifactor bool
}

// MinFairScore is the least fair score (see Ranking): one GPU-hour per
// unit of weight, in GPU-seconds.
const MinFairScore = 3600.0

// NewRanking is the ranking at now under pol of the jobs of users, whose
// fair-share usage (GPU-seconds, as Usage weighs them) is usage. users
// are the users with jobs queued or running: their weights share the
// usage out (the fair score is worked out when a factor is first asked
// for: under fair-share alone, or another order than fairshare, the order
// reads the scores only). A plan makes its ranking with nil users and
// its picker gives them, from the jobs it reads anyway.
func NewRanking(pol Policy, now time.Time, usage map[string]float64, users func(yield func(string) bool)) *Ranking {
	pol = pol.WithDefaults()
	return &Ranking{pol: pol, now: now, usage: usage, users: users, multifactor: pol.Multifactor()}
}

// fairScore is the fair score (see Ranking), worked out on first use.
func (r *Ranking) fairScore() float64 {
	if r.fair > 0 {
		return r.fair
	}
	var total, weights float64
	for _, u := range r.usage {
		total += u
	}
	seen := map[string]bool{}
	if r.users != nil {
		for u := range r.users {
			if !seen[u] {
				seen[u] = true
				weights += r.pol.Weight(u)
			}
		}
	}
	r.fair = MinFairScore
	if weights > 0 && total/weights > r.fair {
		r.fair = total / weights
	}
	return r.fair
}

// Policy is the ranking's policy, defaults filled in.
func (r *Ranking) Policy() Policy { return r.pol }

// Score is user's fair-share score: usage over weight, GPU-seconds.
func (r *Ranking) Score(user string) float64 { return r.usage[user] / r.pol.Weight(user) }

// FairShareFactor is 2^(−score / the fair score): 1 for a user who has
// used nothing, ½ for one who used exactly their share, less the more
// over it (Slurm's classic fair-share factor).
func (r *Ranking) FairShareFactor(score float64) float64 {
	return math.Exp2(-score / r.fairScore())
}

// Of is j's priority, its user's score taken as score (Score, plus what
// a plan charged); its factors are left 0 where the order reads the
// score alone.
func (r *Ranking) Of(j *job.Job, score float64) Priority {
	if !r.readsFactors() {
		return Priority{Job: j.ID, Class: j.Spec.Priority, Score: score} // as with(factors(j), score, 0)
	}
	return r.with(r.factors(j), score, r.shareOf(score))
}

// factors is j's priority without its user's part: its class, and its
// own factors (age and size) where the order reads them.
func (r *Ranking) factors(j *job.Job) Priority {
	p := Priority{Job: j.ID, Class: j.Spec.Priority}
	if r.readsFactors() {
		p.Age, p.Size = r.ageFactor(j), sizeFactor(j, r.pol)
	}
	return p
}

// readsFactors: the order is multifactor (fairshare, some weight beyond
// fair-share's), not the user's score alone.
func (r *Ranking) readsFactors() bool { return r.multifactor }

// shareOf is the fair-share factor of a user whose score is score where
// the order reads factors (FairShareFactor), else 0.
func (r *Ranking) shareOf(score float64) float64 {
	if !r.readsFactors() {
		return 0
	}
	return r.FairShareFactor(score)
}

// with is p (factors' or an earlier with's) with its user's score taken
// as score and the fair-share factor as share (shareOf(score)): the
// value worked out again, the job's own factors as they were. The picker
// calls it as a plan's charges raise a user's score, with the factor it
// keeps per user.
func (r *Ranking) with(p Priority, score, share float64) Priority {
	p.Score = score
	if !r.readsFactors() {
		return p // the order reads the score alone
	}
	p.FairShare = share
	p.Value = r.own(p) + r.pol.Weights.FairShare*share
	return p
}

// own is the part of p's value that is the job's own (age and size), not
// its user's: a user's jobs go in this order.
func (r *Ranking) own(p Priority) float64 {
	return r.pol.Weights.Age*p.Age + r.pol.Weights.Size*p.Size
}

// ageFactor is how long j has waited (since WaitingSince) over MaxAge,
// at most 1.
func (r *Ranking) ageFactor(j *job.Job) float64 {
	waited := r.now.Sub(WaitingSince(j))
	if waited <= 0 {
		return 0
	}
	return min(float64(waited)/float64(r.pol.MaxAge), 1)
}

// SizeScale is the GPU-hours of a job whose size factor is 1 (favouring
// large jobs) or 0 (favouring small ones): ten 8-GPU days and more.
const SizeScale = 1000.0

// sizeFactor is j's size, its GPUs times its walltime (or the backfill
// estimate) in GPU-hours, as log10(1 + size) / log10(1 + SizeScale),
// capped at 1: a 1-GPU hour is 0.10, 10 GPU-hours 0.35, 100 0.67. When
// the policy favours small jobs it is 1 less that.
func sizeFactor(j *job.Job, pol Policy) float64 {
	hours := float64(max(j.Spec.GPUs, 1)) * walltime(j, pol).Hours()
	f := min(math.Log10(1+hours)/math.Log10(1+SizeScale), 1)
	if pol.FavorLarge {
		return f
	}
	return 1 - f
}

// Compare orders two priorities of jobs of one queue: the class first
// (but under fifo), then under fairshare the user's score (fair-share
// alone: lowest first) or the value (highest first), then the job id
// (submit order).
func (r *Ranking) Compare(a, b Priority) int {
	if r.pol.Order == OrderFIFO {
		return cmp.Compare(a.Job, b.Job)
	}
	if c := cmp.Compare(a.Class, b.Class); c != 0 {
		return c
	}
	if r.pol.Order == OrderFair {
		if r.pol.Weights.FairShareOnly() {
			if c := cmp.Compare(a.Score, b.Score); c != 0 {
				return c
			}
		} else if c := cmp.Compare(b.Value, a.Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Job, b.Job)
}

// Charge is what j's user's score grows by once j starts on share whole
// GPUs, in GPU-seconds over the user's weight: the usage j will have
// accrued by its expected end, as Usage weighs it (share × the walltime
// under a window, at most the window; share × H/ln2 × (1 − 2^(−walltime/H))
// under a half-life H).
func (r *Ranking) Charge(j *job.Job, share float64, walltime time.Duration) float64 {
	fs := r.pol.FairShare
	var seconds float64
	if fs.Window > 0 {
		seconds = min(walltime, fs.Window).Seconds()
	} else {
		h := cmp.Or(fs.HalfLife, DefaultHalfLife).Seconds()
		seconds = h / math.Ln2 * (1 - math.Exp2(-walltime.Seconds()/h))
	}
	return share * seconds / r.pol.Weight(j.User)
}

// WaitingSince is when queued job j began to wait: its submit, its last
// requeue (the end of its last run), or its --begin, the latest.
func WaitingSince(j *job.Job) time.Time {
	t := j.SubmittedAt
	if n := len(j.Runs); n > 0 && j.Runs[n-1].Ended.After(t) {
		t = j.Runs[n-1].Ended
	}
	if j.Spec.Begin.After(t) {
		t = j.Spec.Begin
	}
	return t
}
