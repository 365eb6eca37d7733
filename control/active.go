package control

import (
	"cmp"
	"slices"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// ChangeFeed is a Store that says which job records were written since
// an earlier read (Options.Changes; the simulator's store and *state.Mem
// are ones). A controller then keeps the active jobs it read from one
// pass to the next, queued ones and the others apart, and reads again
// only the records written since: a pass over a queue of thousands that
// barely moved copies a few jobs, not the queue.
type ChangeFeed interface {
	// Mark is how far the store's writes have come: Changed(Mark()),
	// called later, returns at least every record written after this
	// call.
	Mark() uint64
	// Changed returns, in id order, the record of each job submitted or
	// updated since mark was given (by Mark or Changed) as Get would
	// return it now, ended ones included, and the mark of now. ok false
	// says the store cannot tell (a mark it did not give, changes it no
	// longer keeps: another reader took them, or a record it cannot
	// read): the caller reads Store.Active instead. The slice is the
	// caller's until its next call.
	Changed(mark uint64) (jobs []job.Job, next uint64, ok bool)
}

// active are the non-terminal jobs as a pass knows them: the queued ones
// and the others (launching, running, preempting, unknown, or a state
// this gssh does not know), each in id order. The controller keeps them
// from one pass to the next, and the pass changes them as it records
// changes (set, drop): a job is replaced by the record a store write
// returned, or dropped when that record ended.
type active struct {
	queued, running []job.Job
	// In step with them: their ids (a search reads no job); for each of
	// the others, its GPU use (job.Use, for fair-share) and the place of
	// its host in hosts (−1: not placed).
	qids, rids []job.ID
	ruses      []heldUse
	rhost      []int32
	hosts      hostTable
	marks      marks
	// reasons are the queued jobs' pending reasons, one string for each
	// text: the planner gives thousands of jobs one reason of kilobytes
	// (every host and why not), which a pass compares with each job's.
	reasons map[string]string
	// mark is the feed's (ChangeFeed) as of the last read, when kept is
	// set: the next read asks only what changed since.
	mark uint64
	kept bool
}

// heldUse is a job's GPU use, and whether it has one (job.Job.Use).
type heldUse struct {
	use job.Use
	ok  bool
}

// hostTable numbers the hosts jobs were placed on, in the order first
// seen, and keeps them in name order too.
type hostTable struct {
	names []string
	at    map[string]int32
	order []int32 // the places of names in name order; short of names: to sort again
}

// place is host's place in t, −1 for "" (not placed).
func (t *hostTable) place(host string) int32 {
	if host == "" {
		return -1
	}
	if k, ok := t.at[host]; ok {
		return k
	}
	if t.at == nil {
		t.at = map[string]int32{}
	}
	k := int32(len(t.names))
	t.at[host], t.names = k, append(t.names, host)
	return k
}

// sorted are the places of t's hosts in name order.
func (t *hostTable) sorted() []int32 {
	if len(t.order) < len(t.names) {
		t.order = t.order[:0]
		for k := range t.names {
			t.order = append(t.order, int32(k))
		}
		slices.SortFunc(t.order, func(x, y int32) int { return cmp.Compare(t.names[x], t.names[y]) })
	}
	return t.order
}

// readActive brings c.act up to the store: from what the feed says
// changed since the last read when it can, else from Store.Active (the
// jobs it could read, with its error). The feed's mark is taken before
// a whole read, so a write racing the read is read again next time.
func (c *Controller) readActive() error {
	a := &c.act
	if c.feed != nil && a.kept {
		if jobs, next, ok := c.feed.Changed(a.mark); ok {
			for i := range jobs {
				a.set(&jobs[i])
			}
			a.mark = next
			return nil
		}
	}
	a.kept = false
	var mark uint64
	if c.feed != nil {
		mark = c.feed.Mark()
	}
	all, err := c.store.Active()
	for i := 1; i < len(all); i++ {
		if all[i-1].ID >= all[i].ID { // not the id order Store promises: put right
			all = slices.Clone(all)
			slices.SortStableFunc(all, func(x, y job.Job) int { return cmp.Compare(x.ID, y.ID) })
			break
		}
	}
	clear(a.queued)
	clear(a.running)
	clear(a.ruses)
	a.queued, a.qids = a.queued[:0], a.qids[:0]
	a.running, a.rids, a.ruses, a.rhost = a.running[:0], a.rids[:0], a.ruses[:0], a.rhost[:0]
	a.marks = marks{}
	clear(a.reasons)
	for i := range all {
		if j := &all[i]; j.State == job.Queued {
			a.insertQueued(len(a.queued), j)
		} else {
			a.insertRunning(len(a.running), j)
		}
	}
	a.kept, a.mark = c.feed != nil && err == nil, mark // a store with bad records is read whole each pass: each reports them
	return err
}

// find is the place of job id in ids (ascending), and whether it is
// there.
func find(ids []job.ID, id job.ID) (int, bool) {
	return slices.BinarySearch(ids, id)
}

// has reports whether job id is among the active jobs.
func (a *active) has(id job.ID) bool {
	_, q := find(a.qids, id)
	_, r := find(a.rids, id)
	return q || r
}

// set records u, as the store has it now: in its place among the queued
// or the other jobs, or gone when it ended.
func (a *active) set(u *job.Job) {
	queued, ended := u.State == job.Queued, u.State.Terminal()
	if i, ok := find(a.qids, u.ID); ok {
		if queued {
			a.replaceQueued(i, u)
			return
		}
		a.deleteQueued(i)
	}
	if i, ok := find(a.rids, u.ID); ok {
		if !queued && !ended {
			a.replaceRunning(i, u)
			return
		}
		a.deleteRunning(i)
	}
	switch {
	case ended:
	case queued:
		i, _ := find(a.qids, u.ID)
		a.insertQueued(i, u)
	default:
		i, _ := find(a.rids, u.ID)
		a.insertRunning(i, u)
	}
}

// intern makes queued job j's reason the string a.reasons has for its
// text, and its code the planner's constant (sched.Known). The strings of reasons no job has any more go when there are
// more of them than jobs.
func (a *active) intern(j *job.Job) {
	if c, ok := sched.Known(j.ReasonCode); ok {
		j.ReasonCode = string(c) // the plan's own string: compared at once
	}
	if len(j.Reason) < internMin {
		return // short: as quick to compare as to look up
	}
	if r, ok := a.reasons[j.Reason]; ok {
		j.Reason = r
		return
	}
	if len(a.reasons) > 2*len(a.queued)+64 {
		clear(a.reasons) // the next reads put those still in use back
	}
	if a.reasons == nil {
		a.reasons = map[string]string{}
	}
	a.reasons[j.Reason] = j.Reason
}

// internMin is the shortest reason interned.
const internMin = 64

// drop takes job id off the active jobs.
func (a *active) drop(id job.ID) {
	if i, ok := find(a.qids, id); ok {
		a.deleteQueued(i)
	}
	if i, ok := find(a.rids, id); ok {
		a.deleteRunning(i)
	}
}

// The changes of the active jobs, each of one job at place i of the
// queued ones or of the others, and of what is kept in step with it.

func (a *active) insertQueued(i int, j *job.Job) {
	a.queued, a.qids = slices.Insert(a.queued, i, *j), slices.Insert(a.qids, i, j.ID)
	a.intern(&a.queued[i])
	a.marks.count(j, true, 1)
}

func (a *active) replaceQueued(i int, j *job.Job) {
	a.marks.count(&a.queued[i], true, -1)
	a.queued[i] = *j
	a.intern(&a.queued[i])
	a.marks.count(j, true, 1)
}

func (a *active) deleteQueued(i int) {
	a.marks.count(&a.queued[i], true, -1)
	a.queued, a.qids = slices.Delete(a.queued, i, i+1), slices.Delete(a.qids, i, i+1)
}

func (a *active) insertRunning(i int, j *job.Job) {
	a.running, a.rids = slices.Insert(a.running, i, *j), slices.Insert(a.rids, i, j.ID)
	a.ruses, a.rhost = slices.Insert(a.ruses, i, useOf(j)), slices.Insert(a.rhost, i, a.hosts.place(j.Placement.Host))
	a.marks.count(j, false, 1)
}

func (a *active) replaceRunning(i int, j *job.Job) {
	a.marks.count(&a.running[i], false, -1)
	a.running[i], a.ruses[i], a.rhost[i] = *j, useOf(j), a.hosts.place(j.Placement.Host)
	a.marks.count(j, false, 1)
}

func (a *active) deleteRunning(i int) {
	a.marks.count(&a.running[i], false, -1)
	a.running, a.rids = slices.Delete(a.running, i, i+1), slices.Delete(a.rids, i, i+1)
	a.ruses, a.rhost = slices.Delete(a.ruses, i, i+1), slices.Delete(a.rhost, i, i+1)
}

// marks count the active jobs a pass has a step for, so that a pass
// whose jobs have none reads none of them for it: a cancel asked for
// (cancelRequested), launched by some user's gssh (Remote.By:
// endedElsewhere), queued for a gssh run (dropOrphanedRuns).
type marks struct{ cancels, remote, runs int }

// count adds d for each mark j (queued or not) has.
func (m *marks) count(j *job.Job, queued bool, d int) {
	if j.CancelRequested != nil {
		m.cancels += d
	}
	if j.Remote.By != "" {
		m.remote += d
	}
	if queued && j.Spec.Interactive != nil {
		m.runs += d
	}
}

func useOf(j *job.Job) heldUse {
	u, ok := j.Use()
	return heldUse{u, ok}
}

// each calls fn with every active job in id order, queued or not: fn
// only reads.
func (a *active) each(fn func(*job.Job)) {
	q, r := 0, 0
	for q < len(a.qids) || r < len(a.rids) {
		if r == len(a.rids) || q < len(a.qids) && a.qids[q] < a.rids[r] {
			fn(&a.queued[q])
			q++
		} else {
			fn(&a.running[r])
			r++
		}
	}
}

// uses appends the GPU uses of the others (not queued) to buf, as
// appendUses would from a.running.
func (a *active) uses(buf []job.Use) []job.Use {
	for _, u := range a.ruses {
		if u.ok {
			buf = append(buf, u.use)
		}
	}
	return buf
}
