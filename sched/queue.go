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
	share float64   // the user's fair-share factor, at score
	n     int       // how many jobs (while the picker is made)
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

// newPicker orders queue by rank, in buf's room (nil: its own); the
// picker is buf's until the next call. A rank made without its users
// gets those of queue and running (see NewRanking), for as long.
func newPicker(queue, running []job.Job, rank *Ranking, buf *pickerBuf) *picker {
	if buf == nil {
		buf = new(pickerBuf)
	}
	pol := rank.Policy()
	buf.picked = slices.Grow(buf.picked[:0], len(queue))
	p := &buf.picker
	*p = picker{rank: rank, picked: buf.picked}
	jobs := byClass(queue, pol.Order != OrderFIFO, &buf.jobs, &buf.spare)
	if pol.Order != OrderFair {
		p.static = jobs
		return p
	}
	if buf.entries == nil {
		buf.entries = map[string][]*userEntry{}
	}
	clear(buf.entries)
	p.entries = buf.entries
	all := slices.Grow(buf.ranked[:0], len(jobs))[:len(jobs)] // the users' jobs, each user's together
	buf.ranked = all
	buf.users = buf.users[:0]
	byUser := buf.byUser
	if byUser == nil {
		byUser = map[string]*userEntry{}
		buf.byUser = byUser
	}
	own := pol.Multifactor() // each user's jobs go by their own factors too
	classes := buf.classes[:0]
	bounds := buf.bounds[:0]                                     // each class's end in jobs, and its first entry in buf.users
	owners := slices.Grow(buf.owners[:0], len(jobs))[:len(jobs)] // each job's entry
	buf.owners = owners
	for i := 0; i < len(jobs); {
		k := i
		for k < len(jobs) && jobs[k].Spec.Priority == jobs[i].Spec.Priority {
			k++
		}
		clear(byUser)
		h := buf.heap(len(classes))
		bounds = append(bounds, [2]int{k, len(buf.users)})
		for x, j := range jobs[i:k] { // how many jobs each user has in the class
			e := byUser[j.User]
			if e == nil {
				e = buf.entry()
				*e = userEntry{user: j.User, score: rank.Score(j.User), heap: h, index: h.Len()}
				byUser[j.User] = e
				p.entries[j.User] = append(p.entries[j.User], e)
				h.entries = append(h.entries, e)
			}
			e.n++
			owners[i+x] = e
		}
		classes = append(classes, h)
		i = k
	}
	buf.bounds = bounds
	if rank.users == nil {
		rank.users = buf.usersWith(running) // the users with jobs, without reading every job again
	}
	at := 0
	for c, h := range classes {
		for _, e := range h.entries { // each user's room in all, in turn
			e.jobs, at = all[at:at:at+e.n], at+e.n
			e.share = rank.shareOf(e.score)
		}
		first := 0
		if c > 0 {
			first = bounds[c-1][0]
		}
		for x, j := range jobs[first:bounds[c][0]] {
			e := owners[first+x]
			e.jobs = append(e.jobs, ranked{Job: j, Priority: rank.with(rank.factors(j), e.score, e.share)})
		}
		for _, e := range h.entries {
			if own {
				// Mostly in order already (submit order is age order):
				// a check costs one comparison a job.
				byPriority := func(a, b ranked) int { return rank.Compare(a.Priority, b.Priority) }
				if !slices.IsSortedFunc(e.jobs, byPriority) {
					slices.SortStableFunc(e.jobs, byPriority)
				}
			}
			e.head = e.jobs[0].Priority
		}
		heap.Init(h)
	}
	buf.classes = classes
	p.classes = classes
	return p
}

// pickerBuf is the room a picker is made in, kept by a Planner from one
// plan to the next.
type pickerBuf struct {
	picker
	picked  []ranked
	jobs    []*job.Job
	spare   []*job.Job
	ranked  []ranked
	users   []*userEntry // the entries handed out, in turn
	store   []*userEntry
	heaps   []userHeap
	classes []*userHeap
	bounds  [][2]int
	owners  []*userEntry // each job's entry, as jobs
	entries map[string][]*userEntry
	byUser  map[string]*userEntry
	running []job.Job // usersWith's
}

// usersWith yields the users of b's entries, in the order they were
// made, then those of running: the users a ranking's fair score shares
// the usage among.
func (b *pickerBuf) usersWith(running []job.Job) func(func(string) bool) {
	b.running = running
	return func(yield func(string) bool) {
		for _, e := range b.users {
			if !yield(e.user) {
				return
			}
		}
		for i := range b.running {
			if !yield(b.running[i].User) {
				return
			}
		}
	}
}

// entry is a new user entry of b's: its entries are kept from one
// picker to the next, each where it was (a heap points to them).
func (b *pickerBuf) entry() *userEntry {
	if len(b.users) == len(b.store) {
		b.store = append(b.store, new(userEntry))
	}
	e := b.store[len(b.users)]
	b.users = append(b.users, e)
	return e
}

// heap is b's i-th class heap, empty.
func (b *pickerBuf) heap(i int) *userHeap {
	if i == len(b.heaps) {
		b.heaps = append(b.heaps, userHeap{})
	}
	h := &b.heaps[i]
	*h = userHeap{rank: b.rank, entries: h.entries[:0]}
	return h
}

// byClass is queue's jobs by priority class (0 first) when classes, else
// as one, each class by id, in *room (spare: scratch).
func byClass(queue []job.Job, classes bool, room, spare *[]*job.Job) []*job.Job {
	jobs := slices.Grow((*room)[:0], len(queue))[:len(queue)]
	*room = jobs
	sorted := true
	for i := range queue {
		jobs[i] = &queue[i]
		sorted = sorted && (i == 0 || queue[i-1].ID < queue[i].ID)
	}
	if !sorted {
		slices.SortFunc(jobs, func(a, b *job.Job) int { return cmp.Compare(a.ID, b.ID) })
	}
	if !classes {
		return jobs
	}
	// A queue has a few classes: each is gathered in turn, in id order.
	var cs [8]int
	distinct := cs[:0]
	for _, j := range jobs {
		if !slices.Contains(distinct, j.Spec.Priority) {
			if len(distinct) == len(cs) {
				// Many classes: by class, then id (ids are unique, so
				// this is the stable order without a stable sort's cost).
				slices.SortFunc(jobs, func(a, b *job.Job) int {
					return cmp.Or(cmp.Compare(a.Spec.Priority, b.Spec.Priority), cmp.Compare(a.ID, b.ID))
				})
				return jobs
			}
			distinct = append(distinct, j.Spec.Priority)
		}
	}
	if len(distinct) == 1 {
		return jobs
	}
	slices.Sort(distinct)
	out := slices.Grow((*spare)[:0], len(jobs))
	for _, c := range distinct {
		for _, j := range jobs {
			if j.Spec.Priority == c {
				out = append(out, j)
			}
		}
	}
	*spare, *room = jobs, out
	return out
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
		e.head = p.rank.with(e.jobs[0].Priority, e.score, e.share)
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
		e.share = p.rank.shareOf(e.score)
		if e.heap != nil {
			e.head = p.rank.with(e.jobs[0].Priority, e.score, e.share)
			heap.Fix(e.heap, e.index)
		}
	}
}
