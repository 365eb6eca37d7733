package sched

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
)

// ranked is a queued job and the score it was ordered by.
type ranked struct {
	*job.Job
	score float64 // fair-share score when it was picked: usage / weight (OrderFair)
}

// picker hands out the queue's jobs in the order they are offered GPUs
// under a policy, leaving the queue as it is. Under OrderFIFO that is
// submit order; under OrderPriority the priority class (0 first), then
// submit order. Under OrderFair it is the priority class, then the user's
// fair-share score (usage / weight, lowest first), then submit order, and
// the order is worked out as the plan goes: each job started in the plan
// charges its user the usage it will have accrued by its expected end
// (see charge), so a user whose queue is long does not take every free
// GPU in one pass. Ties end in submit order: job ids are the store's
// sequence, so they sort by submit time.
type picker struct {
	pol    Policy
	static []*job.Job // FIFO and priority: the whole order
	// OrderFair: per priority class, ascending, a heap of users with
	// jobs in it; a user's entries in every class, for charges.
	classes []*userHeap
	entries map[string][]*userEntry
	// picked is what next returned so far, in order (rank texts read it).
	picked []ranked
}

// userEntry is one user's queued jobs of one priority class.
type userEntry struct {
	user  string
	score float64
	jobs  []*job.Job // by id; the entry leaves its heap when none is left
	heap  *userHeap  // its class's
	index int        // in heap
}

type userHeap []*userEntry

func (h userHeap) Len() int { return len(h) }
func (h userHeap) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h[i].score, h[j].score), cmp.Compare(h[i].jobs[0].ID, h[j].jobs[0].ID)) < 0
}
func (h userHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index, h[j].index = i, j }
func (h *userHeap) Push(x any)   { e := x.(*userEntry); e.index = len(*h); *h = append(*h, e) }
func (h *userHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newPicker(queue []job.Job, pol Policy, usage map[string]float64) *picker {
	p := &picker{pol: pol, picked: make([]ranked, 0, len(queue))}
	jobs := make([]*job.Job, len(queue))
	for i := range queue {
		jobs[i] = &queue[i]
	}
	slices.SortFunc(jobs, func(a, b *job.Job) int {
		if pol.Order != OrderFIFO {
			if c := cmp.Compare(a.Spec.Priority, b.Spec.Priority); c != 0 {
				return c // 0 is the highest priority
			}
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if pol.Order != OrderFair {
		p.static = jobs
		return p
	}
	p.entries = map[string][]*userEntry{}
	for i := 0; i < len(jobs); {
		k := i
		for k < len(jobs) && jobs[k].Spec.Priority == jobs[i].Spec.Priority {
			k++
		}
		class := jobs[i:k] // by id
		byUser := map[string]*userEntry{}
		h := &userHeap{}
		for _, j := range class {
			e := byUser[j.User]
			if e == nil {
				e = &userEntry{user: j.User, score: usage[j.User] / pol.Weight(j.User), heap: h, index: h.Len()}
				byUser[j.User] = e
				p.entries[j.User] = append(p.entries[j.User], e)
				*h = append(*h, e)
			}
			e.jobs = append(e.jobs, j)
		}
		heap.Init(h)
		p.classes = append(p.classes, h)
		i = k
	}
	return p
}

// next returns the next job, or false when none is left.
func (p *picker) next() (ranked, bool) {
	if p.static != nil || p.classes == nil {
		if len(p.picked) == len(p.static) {
			return ranked{}, false
		}
		r := ranked{Job: p.static[len(p.picked)]}
		p.picked = append(p.picked, r)
		return r, true
	}
	for len(p.classes) > 0 && p.classes[0].Len() == 0 {
		p.classes = p.classes[1:]
	}
	if len(p.classes) == 0 {
		return ranked{}, false
	}
	h := p.classes[0]
	e := (*h)[0]
	r := ranked{Job: e.jobs[0], score: e.score}
	if e.jobs = e.jobs[1:]; len(e.jobs) == 0 {
		heap.Pop(h)
		e.heap = nil
	} else {
		heap.Fix(h, 0)
	}
	p.picked = append(p.picked, r)
	return r, true
}

// charge adds to j's user the fair-share usage j will have accrued by its
// expected end, as Usage weighs it: share × the walltime under a window
// (at most the window), share × H/ln2 × (1 − 2^(−walltime/H)) under a
// half-life H. A job started by the plan counts from then on, not from
// the next pass.
func (p *picker) charge(j *job.Job, share float64, walltime time.Duration) {
	if p.pol.Order != OrderFair || share <= 0 {
		return
	}
	fs := p.pol.FairShare
	var seconds float64
	if fs.Window > 0 {
		seconds = min(walltime, fs.Window).Seconds()
	} else {
		h := cmp.Or(fs.HalfLife, DefaultHalfLife).Seconds()
		seconds = h / math.Ln2 * (1 - math.Exp2(-walltime.Seconds()/h))
	}
	add := share * seconds / p.pol.Weight(j.User)
	for _, e := range p.entries[j.User] {
		e.score += add
		if e.heap != nil {
			heap.Fix(e.heap, e.index)
		}
	}
}
