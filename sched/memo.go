package sched

// shapeMemo maps job shapes to answers during one plan. A plan asks of a
// handful of shapes, so the first few are kept in a list searched in
// order (comparing two shapes costs less than hashing one); the rest go
// to a map.
type shapeMemo[V any] struct {
	list []memoEntry[V]
	more map[shape]V
}

type memoEntry[V any] struct {
	key shape
	val V
}

// memoList is how many shapes a shapeMemo keeps in its list.
const memoList = 8

func (m *shapeMemo[V]) get(k shape) (V, bool) {
	for i := range m.list {
		if m.list[i].key == k {
			return m.list[i].val, true
		}
	}
	v, ok := m.more[k]
	return v, ok
}

func (m *shapeMemo[V]) put(k shape, v V) {
	for i := range m.list {
		if m.list[i].key == k {
			m.list[i].val = v
			return
		}
	}
	if _, ok := m.more[k]; ok || len(m.list) >= memoList {
		if m.more == nil {
			m.more = map[shape]V{}
		}
		m.more[k] = v
		return
	}
	m.list = append(m.list, memoEntry[V]{k, v})
}

func (m *shapeMemo[V]) clear() {
	clear(m.list) // let go of what the answers point to
	m.list = m.list[:0]
	clear(m.more)
}

// isTrue is the value of a shapeMemo[bool] lookup: false when not there.
func isTrue(v, ok bool) bool { return v && ok }
