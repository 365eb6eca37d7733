package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// store is the simulator's job queue: control.Store over Go values, with
// the semantics of state.Mem (ids from 1, copies in and out, the active
// index, the terminal rule, a usage ledger ordered by end) but without
// the JSON round trips, which would cost a simulated week minutes.
type store struct {
	jobs []job.Job // by id − 1
	adds []sampled // what each job adds to a sample (sampledOf), by id − 1
	cur  job.Job   // the copy Update's fn changes
	// eachOut and eachErr are what UpdateEach returns, filled anew each call.
	eachOut []job.Job
	eachErr []error
	sm      sampler
	buf     []job.Job // what Active and Changed return, filled anew each call
	active  []job.ID  // non-terminal jobs, ascending
	uses    []job.Use // ended jobs' uses, by end (the clock only moves on)
	// written are the ids written since the mark written0 (the count of
	// writes before written[0]), for Changed.
	written  []job.ID
	written0 uint64
	// decayed is, per user, the half-life usage of the ended jobs at the
	// reference time ref, under halfLife: the usage at t is decayed ×
	// 2^(−(t−ref)/halfLife), so each pass costs a map copy, not the ledger.
	halfLife time.Duration
	ref      time.Time
	decayed  map[string]float64
}

// newStore returns an empty store with room for n jobs.
func newStore(n int) *store {
	return &store{jobs: make([]job.Job, 0, n), adds: make([]sampled, 0, n)}
}

// Submit stores j, queued unless it says otherwise, under the next id.
func (s *store) Submit(j job.Job) (job.Job, error) {
	j.ID = job.ID(len(s.jobs) + 1)
	if j.State == "" {
		j.State = job.Queued
	}
	s.jobs, s.adds = append(s.jobs, j), append(s.adds, sampledOf(&j))
	s.active = append(s.active, j.ID)
	s.written = append(s.written, j.ID)
	return j, nil
}

// Get implements control.Store.
func (s *store) Get(id job.ID) (job.Job, error) {
	if id < 1 || int(id) > len(s.jobs) {
		return job.Job{}, fmt.Errorf("%w %d", state.ErrNotFound, id)
	}
	return s.jobs[id-1], nil
}

// Active implements control.Store: the non-terminal jobs in id order.
// The slice is the store's, filled anew by the next call (a pass reads
// it once): a simulated week is not a million copies of the queue.
func (s *store) Active() ([]job.Job, error) {
	clear(s.buf)
	s.buf = slices.Grow(s.buf[:0], len(s.active))
	for _, id := range s.active {
		s.buf = append(s.buf, s.jobs[id-1])
	}
	return s.buf, nil
}

// sample is the lab as the active jobs show it at at (sampleOf).
func (s *store) sample(at time.Duration) Sample {
	for _, id := range s.active {
		s.sm.add(&s.adds[id-1])
	}
	return s.sm.sample(at)
}

// UpdateEach is Update of each job: its results are the store's own
// buffers, good until the next call (the pass copies what it keeps).
func (s *store) UpdateEach(ids []job.ID, fn func(i int, x *job.Job) error) ([]job.Job, []error, error) {
	s.eachOut, s.eachErr = slices.Grow(s.eachOut[:0], len(ids))[:len(ids)], slices.Grow(s.eachErr[:0], len(ids))[:len(ids)]
	for i, id := range ids {
		s.eachOut[i], s.eachErr[i] = s.Update(id, func(x *job.Job) error { return fn(i, x) })
	}
	return s.eachOut, s.eachErr, nil
}

// Update implements control.Store, as state.Mem does: fn changes a copy;
// an error leaves the job as it was; an ended job keeps its state.
func (s *store) Update(id job.ID, fn func(*job.Job) error) (job.Job, error) {
	j, err := s.Get(id)
	if err != nil {
		return job.Job{}, err
	}
	s.cur = j // fn's copy: the store's room, not one allocated per update
	cur := &s.cur
	was := cur.State
	if err := fn(cur); err != nil {
		return job.Job{}, err
	}
	switch {
	case cur.ID != id:
		return job.Job{}, fmt.Errorf("update: job %d: id changed to %d", id, cur.ID)
	case was.Terminal() && cur.State != was:
		return job.Job{}, fmt.Errorf("update: job %d: %s -> %s: %w", id, was, cur.State, state.ErrTerminal)
	}
	s.jobs[id-1], s.adds[id-1] = *cur, sampledOf(cur)
	s.written = append(s.written, id)
	if cur.State.Terminal() && !was.Terminal() {
		s.close(id)
		if u, ok := cur.Use(); ok {
			s.uses = append(s.uses, u)
			s.decay(u)
			if n := len(s.uses); n > 1 && s.uses[n-1].Ended.Before(s.uses[n-2].Ended) {
				slices.SortStableFunc(s.uses, func(a, b job.Use) int { return a.Ended.Compare(b.Ended) })
			}
		}
	}
	return *cur, nil
}

// close takes id off the active index.
func (s *store) close(id job.ID) {
	if i, ok := slices.BinarySearch(s.active, id); ok {
		s.active = slices.Delete(s.active, i, i+1)
	}
}

// Mark implements control.ChangeFeed: what Changed returns later is
// what was written after this call.
func (s *store) Mark() uint64 { return s.forget() }

// Changed implements control.ChangeFeed: the records written since mark,
// in id order, ended ones included, and the mark of now. The slice is
// the store's, filled anew by the next call of Changed or Active; one
// reader at a time gets the changes (each call forgets what it gave).
func (s *store) Changed(mark uint64) ([]job.Job, uint64, bool) {
	if mark < s.written0 || mark > s.written0+uint64(len(s.written)) {
		return nil, 0, false
	}
	ids := s.written[mark-s.written0:]
	slices.Sort(ids)
	ids = slices.Compact(ids)
	clear(s.buf)
	s.buf = s.buf[:0]
	for _, id := range ids {
		s.buf = append(s.buf, s.jobs[id-1])
	}
	return s.buf, s.forget(), true
}

// forget drops the ids written so far and returns the mark of now.
func (s *store) forget() uint64 {
	s.written0 += uint64(len(s.written))
	s.written = s.written[:0]
	return s.written0
}

// Uses implements control.Store: the uses of the jobs that ended at or
// after since, oldest end first.
func (s *store) Uses(since time.Time) ([]job.Use, error) {
	i := sort.Search(len(s.uses), func(k int) bool { return !s.uses[k].Ended.Before(since) })
	return slices.Clone(s.uses[i:]), nil
}

// UsageAt implements control.UsageStore: sched.Usage over the ended jobs'
// uses, kept up to date as jobs end under a half-life; under a window (or
// on the first call, or with another half-life) worked out from the
// ledger.
func (s *store) UsageAt(now time.Time, fs sched.FairShare) (map[string]float64, error) {
	if fs.Window > 0 {
		uses, _ := s.Uses(now.Add(-sched.Horizon(fs)))
		return sched.Usage(uses, now, fs), nil
	}
	h := cmp.Or(fs.HalfLife, sched.DefaultHalfLife)
	if h != s.halfLife || s.decayed == nil {
		s.halfLife, s.ref, s.decayed = h, now, map[string]float64{}
		for _, u := range s.uses {
			s.decay(u)
		}
	}
	out := make(map[string]float64, len(s.decayed))
	f := math.Exp2(-now.Sub(s.ref).Seconds() / h.Seconds())
	for user, v := range s.decayed {
		out[user] = v * f
	}
	return out, nil
}

// decay adds ended use u to the decayed sums: u counts share × h/ln2 ×
// (2^(−(t−end)/h) − 2^(−(t−start)/h)) at t, that is 2^(−(t−ref)/h) times
// share × h/ln2 × (2^((end−ref)/h) − 2^((start−ref)/h)). When that factor
// grows large the sums are moved to a later reference time.
func (s *store) decay(u job.Use) {
	if s.decayed == nil || !(u.Share > 0) || !u.Started.Before(u.Ended) {
		return
	}
	h := s.halfLife.Seconds()
	if e := u.Ended.Sub(s.ref).Seconds() / h; e > 500 {
		f := math.Exp2(-e)
		for user := range s.decayed {
			s.decayed[user] *= f
		}
		s.ref = u.Ended
	}
	s.decayed[u.User] += u.Share * h / math.Ln2 * (math.Exp2(u.Ended.Sub(s.ref).Seconds()/h) - math.Exp2(u.Started.Sub(s.ref).Seconds()/h))
}
