package state

import (
	"slices"

	"github.com/gssh/gssh/job"
)

// Mark says how far m's writes have come: Changed(Mark()), called later,
// returns the records written after this call (control.ChangeFeed). The
// ids written before are forgotten: a reader that kept an older mark
// reads every active job again.
func (m *Mem) Mark() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.forget()
}

// Changed returns, in id order, the records of the jobs submitted or
// updated since mark (from Mark or Changed) as Get would return them,
// ended ones included, and the mark of now (control.ChangeFeed); ok is
// false for a mark m no longer knows (one taken before another reader's
// Mark or Changed), or a record it cannot decode. Only one reader at a
// time gets the changes: each call forgets what it returned.
func (m *Mem) Changed(mark uint64) (jobs []job.Job, next uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mark < m.written0 || mark > m.written0+uint64(len(m.written)) {
		return nil, 0, false
	}
	ids := slices.Clone(m.written[mark-m.written0:])
	slices.Sort(ids)
	ids = slices.Compact(ids)
	jobs = make([]job.Job, 0, len(ids))
	for _, id := range ids {
		j, err := decode(id, m.jobs[id])
		if err != nil {
			return nil, 0, false
		}
		jobs = append(jobs, j)
	}
	return jobs, m.forget(), true
}

// forget drops the ids written so far and returns the mark of now; m.mu
// is held.
func (m *Mem) forget() uint64 {
	m.written0 += uint64(len(m.written))
	clear(m.written)
	m.written = m.written[:0]
	return m.written0
}
