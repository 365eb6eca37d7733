package state

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/job"
)

// Mem is an in-memory Store with the semantics of Bolt (ids from 1, JSON
// copies in and out, the active index, the terminal rule), for tests of
// other packages. It is safe for concurrent use.
type Mem struct {
	mu        sync.Mutex
	clusterID string
	now       func() time.Time
	seq       job.ID
	jobs      map[job.ID][]byte // JSON records, as Bolt stores them
	ids       []job.ID          // every id, ascending
	active    map[job.ID]struct{}
	hosts     map[string][]byte // health.Host records by host name, as JSON
	drains    map[string][]byte // sched.Drain records by host name, as JSON
	// history are the jobs Trim moved to the history (Mem keeps their
	// records where they were: only Trim's counts tell); pruned the usage
	// keys Trim took out of the ledger Bolt would keep (until the job's
	// record is written again, as Bolt's putJob writes them again).
	history map[job.ID]bool
	pruned  map[string]bool
	// ledger are the uses of every record (what Bolt's ledger would hold
	// but for the pruned ones), in key order, and usesOf each job's, as
	// put last wrote them: Uses reads no record.
	ledger []keyedUse
	usesOf map[job.ID][]keyedUse
	// written are the ids put wrote since the mark written0 (the count
	// of writes before written[0]), for Changed.
	written  []job.ID
	written0 uint64
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store with a random cluster id.
func NewMem() *Mem {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand, Go >= 1.24)
	return &Mem{
		clusterID: hex.EncodeToString(raw[:]),
		now:       time.Now,
		jobs:      make(map[job.ID][]byte),
		active:    make(map[job.ID]struct{}),
	}
}

// ClusterID implements Store.
func (m *Mem) ClusterID() (string, error) { return m.clusterID, nil }

// Submit implements Store.
func (m *Mem) Submit(j job.Job) (job.Job, error) {
	out, err := m.SubmitAll([]job.Job{j}, nil)
	if err != nil {
		return job.Job{}, err
	}
	return out[0], nil
}

// SubmitAll implements Store.
func (m *Mem) SubmitAll(jobs []job.Job, stamp func(job.ID, []job.Job)) ([]job.Job, error) {
	js := make([]job.Job, len(jobs))
	for i, j := range jobs {
		p, err := prepareSubmit(j, m.now)
		if err != nil {
			return nil, err
		}
		js[i] = p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range js {
		js[i].ID = m.seq + 1 + job.ID(i)
	}
	if stamp != nil && len(js) > 0 {
		stamp(js[0].ID, js)
	}
	out := make([]job.Job, len(js))
	data := make([][]byte, len(js))
	for i, j := range js {
		d, back, err := encode(j)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		data[i], out[i] = d, back
	}
	for i, j := range out {
		m.seq = j.ID
		m.ids = append(m.ids, j.ID)
		m.put(j.ID, data[i], j.State)
	}
	return out, nil
}

// Get implements Store.
func (m *Mem) Get(id job.ID) (job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.jobs[id]
	if !ok {
		return job.Job{}, notFound(id)
	}
	j, err := decode(id, data)
	if err != nil {
		return job.Job{}, fmt.Errorf("get: %w", err)
	}
	return j, nil
}

// Update implements Store.
func (m *Mem) Update(id job.ID, fn func(*job.Job) error) (job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.jobs[id]
	if !ok {
		return job.Job{}, notFound(id)
	}
	j, newData, err := applyUpdate(id, data, fn)
	if err != nil {
		return job.Job{}, err
	}
	m.put(id, newData, j.State)
	return j, nil
}

// UpdateEach is Bolt.UpdateEach.
func (m *Mem) UpdateEach(ids []job.ID, fn func(i int, x *job.Job) error) ([]job.Job, []error, error) {
	out, errs := make([]job.Job, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		out[i], errs[i] = m.Update(id, func(x *job.Job) error { return fn(i, x) })
	}
	return out, errs, nil
}

// unprune takes j's ledger keys out of m.pruned, as Bolt's putJob writes
// them again when a record in jobs/ is written; m.mu is held.
func (m *Mem) unprune(j job.Job) {
	if len(m.pruned) == 0 || m.history[j.ID] {
		return
	}
	var set useSet
	set.add(j, time.Time{})
	for _, e := range set {
		delete(m.pruned, string(e.key))
	}
}

// Active implements Store.
func (m *Mem) Active() ([]job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []job.Job
	var errs []error
	for _, id := range m.ids {
		if _, ok := m.active[id]; !ok {
			continue
		}
		j, err := decode(id, m.jobs[id])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, j)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("active: %w: %w", ErrBadRecord, errors.Join(errs...))
	}
	return out, nil
}

// List implements Store.
func (m *Mem) List(f Filter) ([]job.Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []job.Job
	var errs []error
	for n := range len(m.ids) {
		if f.full(len(out)) {
			break
		}
		i := len(m.ids) - 1 - n // newest first, unless First asks for the oldest
		if f.First > 0 {
			i = n
		}
		id := m.ids[i]
		j, err := decode(id, m.jobs[id])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if f.match(j) {
			out = append(out, j)
		}
	}
	if f.First == 0 {
		slices.Reverse(out)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("list: %w: %w", ErrBadRecord, errors.Join(errs...))
	}
	return out, nil
}

// Uses implements Store, from the uses of the job records (Mem keeps no
// ledger on disk: what Bolt's would hold is kept as the records are
// written).
func (m *Mem) Uses(since time.Time) ([]job.Use, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cut := usageKey(since, 0) // a use that ended at or after since has a key at or after it
	var out []job.Use
	for _, e := range m.ledger[m.ledgerAt(cut):] {
		if !e.use.Ended.Before(since) && !m.pruned[string(e.key)] {
			out = append(out, e.use)
		}
	}
	return out, nil
}

// ledgerAt is the place of the first use in m.ledger whose key is not
// before key; m.mu is held.
func (m *Mem) ledgerAt(key []byte) int {
	i, _ := slices.BinarySearchFunc(m.ledger, key, func(e keyedUse, k []byte) int {
		if bytes.Compare(e.key, k) < 0 {
			return -1
		}
		return 1 // the first not before key
	})
	return i
}

// keepUses makes m.ledger hold j's uses, as recorded now, in place of
// those its record had; m.mu is held.
func (m *Mem) keepUses(j job.Job) {
	for _, e := range m.usesOf[j.ID] {
		i := m.ledgerAt(e.key)
		k := i
		for k < len(m.ledger) && bytes.Equal(m.ledger[k].key, e.key) {
			k++
		}
		m.ledger = slices.Delete(m.ledger, i, k) // every use under a key is its job's
	}
	var set useSet
	set.add(j, time.Time{})
	for _, e := range set {
		i := m.ledgerAt(e.key)
		for i < len(m.ledger) && bytes.Equal(m.ledger[i].key, e.key) {
			i++ // after those of the same key: in the record's order
		}
		m.ledger = slices.Insert(m.ledger, i, e)
	}
	if len(set) == 0 {
		delete(m.usesOf, j.ID)
		return
	}
	if m.usesOf == nil {
		m.usesOf = map[job.ID][]keyedUse{}
	}
	m.usesOf[j.ID] = set
}

// put stores a record and keeps the active index, the uses and the
// ids written (Changed) in step; m.mu is held.
func (m *Mem) put(id job.ID, data []byte, st job.State) {
	m.jobs[id] = data
	m.written = append(m.written, id)
	if j, err := decode(id, data); err == nil {
		m.unprune(j)
		m.keepUses(j)
	}
	if st.Terminal() {
		delete(m.active, id)
	} else {
		m.active[id] = struct{}{}
	}
}

var _ Keeper = (*Mem)(nil)

// Trim implements Keeper, all at once (More is never set).
func (m *Mem) Trim(b TrimBefore) (Trimmed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out Trimmed
	var set useSet
	for _, id := range m.ids {
		j, err := decode(id, m.jobs[id])
		if err != nil {
			continue
		}
		if !b.Jobs.IsZero() && j.State.Terminal() && !m.history[id] && EndedOf(j).Before(b.Jobs) {
			if m.history == nil {
				m.history = map[job.ID]bool{}
			}
			m.history[id] = true
			out.Moved++
		}
		if !b.Uses.IsZero() {
			set.add(j, time.Time{})
		}
	}
	cut := usageKey(b.Uses, 0)
	for _, e := range set {
		if k := string(e.key); bytes.Compare(e.key, cut) < 0 && !m.pruned[k] {
			if m.pruned == nil {
				m.pruned = map[string]bool{}
			}
			m.pruned[k] = true
			out.Pruned++
		}
	}
	return out, nil
}

// DirsDue implements Keeper.
func (m *Mem) DirsDue(before time.Time, limit int) ([]job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []job.Job
	var errs []error
	cut := usageKey(before, 0)
	for _, id := range m.ids {
		j, err := decode(id, m.jobs[id])
		switch {
		case err != nil:
			errs = append(errs, err)
		case dirsPending(j) && bytes.Compare(endKey(j), cut) < 0:
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b job.Job) int { return bytes.Compare(endKey(a), endKey(b)) })
	if len(out) > limit {
		out = out[:limit]
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("jobs due for housekeeping: %w: %w", ErrBadRecord, errors.Join(errs...))
	}
	return out, nil
}

// MarkHousekept implements Keeper.
func (m *Mem) MarkHousekept(marks map[job.ID]job.Housekept) ([]job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(marks))
	type change struct {
		j    job.Job
		data []byte
	}
	var changes []change
	for _, id := range ids {
		data, ok := m.jobs[id]
		if !ok {
			return nil, notFound(id)
		}
		j, newData, err := applyUpdate(id, data, func(x *job.Job) error { return markHousekept(x, marks[id]) })
		switch {
		case errors.Is(err, errMarked):
			continue
		case err != nil:
			return nil, err
		}
		changes = append(changes, change{j, newData})
	}
	var out []job.Job
	for _, c := range changes {
		m.put(c.j.ID, c.data, c.j.State)
		out = append(out, c.j)
	}
	return out, nil
}
