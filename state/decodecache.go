package state

import (
	"bytes"
	"reflect"
	"sync"

	"github.com/gssh/gssh/job"
)

// decodeCache keeps the active jobs' records as last decoded, with the
// bytes they were decoded from: a read whose record's bytes are the same
// takes a deep copy of the decoded job instead of decoding it again. A
// scheduling pass reads every active job; with thousands queued, the
// JSON decode was most of a pass's CPU (gssh serve, many submits a
// second). The bytes compared are the record itself, so the cache is
// right whoever wrote the file. Kept with a Keep (gssh serve's open
// state); sweep forgets the jobs no longer active.
type decodeCache struct {
	mu sync.Mutex
	m  map[job.ID]decoded
}

type decoded struct {
	raw []byte
	j   job.Job
}

// get is id's record v decoded, from the cache when v is the bytes it
// holds; seen collects the ids read (for sweep).
func (c *decodeCache) get(id job.ID, v []byte, seen map[job.ID]bool) (job.Job, error) {
	seen[id] = true
	c.mu.Lock()
	d, ok := c.m[id]
	c.mu.Unlock()
	if ok && bytes.Equal(d.raw, v) {
		return cloneJob(d.j), nil
	}
	j, err := decode(id, v)
	if err != nil {
		return j, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[job.ID]decoded{}
	}
	c.m[id] = decoded{raw: bytes.Clone(v), j: cloneJob(j)}
	c.mu.Unlock()
	return j, nil
}

// sweep forgets the jobs not in seen (no longer active).
func (c *decodeCache) sweep(seen map[job.ID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !seen[id] {
			delete(c.m, id)
		}
	}
}

// cloneJob is a deep copy of j: its slices, maps and pointers its own
// (time.Time's location, immutable, is shared).
func cloneJob(j job.Job) job.Job {
	var out job.Job
	deepCopy(reflect.ValueOf(&out).Elem(), reflect.ValueOf(j))
	return out
}

var timeType = reflect.TypeOf(job.Job{}.SubmittedAt)

// deepCopy sets dst (settable, of src's type) to a deep copy of src.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Struct:
		if src.Type() == timeType {
			dst.Set(src)
			return
		}
		dst.Set(src) // the unexported fields, as they are
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default:
		dst.Set(src)
	}
}
