package control

import (
	"cmp"
	"slices"

	"github.com/gssh/gssh/job"
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
	// In step with them: their ids (a search reads no job), and the GPU
	// use of each of the others (job.Use, for fair-share).
	qids, rids []job.ID
	ruses      []heldUse
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

func useOf(j *job.Job) heldUse {
	u, ok := j.Use()
	return heldUse{u, ok}
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
	clear(a.queued)
	clear(a.running)
	clear(a.ruses)
	a.queued, a.running, a.qids, a.rids, a.ruses = a.queued[:0], a.running[:0], a.qids[:0], a.rids[:0], a.ruses[:0]
	for i := 1; i < len(all); i++ {
		if all[i-1].ID >= all[i].ID { // not the id order Store promises: put right
			all = slices.Clone(all)
			slices.SortStableFunc(all, func(x, y job.Job) int { return cmp.Compare(x.ID, y.ID) })
			break
		}
	}
	for i := range all {
		if j := &all[i]; j.State == job.Queued {
			a.queued, a.qids = append(a.queued, *j), append(a.qids, j.ID)
		} else {
			a.running, a.rids, a.ruses = append(a.running, *j), append(a.rids, j.ID), append(a.ruses, useOf(j))
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
			a.queued[i] = *u
			return
		}
		a.queued, a.qids = slices.Delete(a.queued, i, i+1), slices.Delete(a.qids, i, i+1)
	}
	if i, ok := find(a.rids, u.ID); ok {
		if !queued && !ended {
			a.running[i], a.ruses[i] = *u, useOf(u)
			return
		}
		a.running, a.rids, a.ruses = slices.Delete(a.running, i, i+1), slices.Delete(a.rids, i, i+1), slices.Delete(a.ruses, i, i+1)
	}
	switch {
	case ended:
	case queued:
		i, _ := find(a.qids, u.ID)
		a.queued, a.qids = slices.Insert(a.queued, i, *u), slices.Insert(a.qids, i, u.ID)
	default:
		i, _ := find(a.rids, u.ID)
		a.running, a.rids, a.ruses = slices.Insert(a.running, i, *u), slices.Insert(a.rids, i, u.ID), slices.Insert(a.ruses, i, useOf(u))
	}
}

// drop takes job id off the active jobs.
func (a *active) drop(id job.ID) {
	if i, ok := find(a.qids, id); ok {
		a.queued, a.qids = slices.Delete(a.queued, i, i+1), slices.Delete(a.qids, i, i+1)
	}
	if i, ok := find(a.rids, id); ok {
		a.running, a.rids, a.ruses = slices.Delete(a.running, i, i+1), slices.Delete(a.rids, i, i+1), slices.Delete(a.ruses, i, i+1)
	}
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
