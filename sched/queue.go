package sched

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
)

// ranked is a queued job and its priority when it was picked.
type ranked struct {
	*job.Job
	Priority
}

// picker hands out the queue's jobs in the order they are offered GPUs
// under a policy (Ranking.Compare), leaving the queue as it is. Under
// OrderFIFO that is submit order; under OrderPriority the priority class
// (0 first), then submit order. Under OrderFair it is the priority class,
// then the multifactor priority (fair-share, age and size, weighted), and
// the order is worked out as the plan goes: each job started in the plan
// charges its user the usage it will have accrued by its expected end
// (Ranking.Charge), so a user whose queue is long does not take every
// free GPU in one pass. Ties end in submit order: job ids are the store's
// sequence, so they sort by submit time.
type picker struct {
	rank   *Ranking
	static []*job.Job // FIFO and priority: the whole order
	// OrderFair: per priority class, ascending, a heap of users with
	// jobs in it; a user's entries in every class, for charges.
	classes []*userHeap
	entries map[string][]*userEntry
	// picked is what next returned so far, in order (rank texts read it).
	picked []ranked
}

// userEntry is one user's queued jobs of one priority class. The user's
// fair-share factor is common to them, so they go in the order of their
// own factors (age and size), and the user in the order of the first.
type userEntry struct {
	user  string
	score float64   // the user's, charges included
	jobs  []ranked  // by priority; the entry leaves its heap when none is left
	heap  *userHeap // its class's
	index int       // in heap
	head  Priority  // jobs[0]'s, at score
}

type userHeap struct {
	rank    *Ranking
	entries []*userEntry
}

func (h userHeap) Len() int { return len(h.entries) }
func (h userHeap) Less(i, j int) bool {
	return h.rank.Compare(h.entries[i].head, h.entries[j].head) < 0
}
func (h userHeap) Swap(i, j int) {
	e := h.entries
	e[i], e[j] = e[j], e[i]
	e[i].index, e[j].index = i, j
}
func (h *userHeap) Push(x any) {
	e := x.(*userEntry)
	e.index = len(h.entries)
	h.entries = append(h.entries, e)
}
func (h *userHeap) Pop() any {
	old := h.entries
	e := old[len(old)-1]
	h.entries = old[:len(old)-1]
	return e
}

// newPicker orders queue by rank.
func newPicker(queue []job.Job, rank *Ranking) *picker {
	pol := rank.Policy()
	p := &picker{rank: rank, picked: make([]ranked, 0, len(queue))}
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
	own := !pol.Weights.FairShareOnly()
	for i := 0; i < len(jobs); {
		k := i
		for k < len(jobs) && jobs[k].Spec.Priority == jobs[i].Spec.Priority {
			k++
		}
		class := jobs[i:k] // by id
		byUser := map[string]*userEntry{}
		h := &userHeap{rank: rank}
		for _, j := range class {
			e := byUser[j.User]
			if e == nil {
				e = &userEntry{user: j.User, score: rank.Score(j.User), heap: h, index: h.Len()}
				byUser[j.User] = e
				p.entries[j.User] = append(p.entries[j.User], e)
				h.entries = append(h.entries, e)
			}
			e.jobs = append(e.jobs, ranked{Job: j, Priority: rank.Of(j, e.score)})
		}
		for _, e := range h.entries {
			if own {
				slices.SortStableFunc(e.jobs, func(a, b ranked) int { return rank.Compare(a.Priority, b.Priority) })
			}
			e.head = e.jobs[0].Priority
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
		j := p.static[len(p.picked)]
		r := ranked{Job: j, Priority: p.rank.Of(j, 0)} // no score: these orders read none
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
	e := h.entries[0]
	r := ranked{Job: e.jobs[0].Job, Priority: e.head}
	if e.jobs = e.jobs[1:]; len(e.jobs) == 0 {
		heap.Pop(h)
		e.heap = nil
	} else {
		e.head = p.rank.rescore(e.jobs[0].Priority, e.score)
		heap.Fix(h, 0)
	}
	p.picked = append(p.picked, r)
	return r, true
}

// charge adds to j's user the fair-share usage j will have accrued by its
// expected end (Ranking.Charge), when j starts on share whole GPUs in the
// plan: it counts from then on, not from the next pass.
func (p *picker) charge(j *job.Job, share float64, walltime time.Duration) {
	if p.rank.Policy().Order != OrderFair || share <= 0 {
		return
	}
	add := p.rank.Charge(j, share, walltime)
	for _, e := range p.entries[j.User] {
		e.score += add
		if e.heap != nil {
			e.head = p.rank.rescore(e.jobs[0].Priority, e.score)
			heap.Fix(e.heap, e.index)
		}
	}
}
