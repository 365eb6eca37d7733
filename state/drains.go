package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/sched"
)

// unreadableDrain stands for a drain record that cannot be decoded: the
// host is taken to be drained (an administrator asked for something
// there, and placing jobs on it could run into their maintenance) until
// gssh drain or gssh resume writes it afresh.
var unreadableDrain = sched.Drain{Reason: "its drain record in the state file cannot be read; gssh resume or gssh drain writes it afresh"}

// Drains returns every host drained with gssh drain (drains/ bucket), by
// host name; an undrained host has none. A record that cannot be decoded
// is returned as a drain in force since ever (sched.Drain with a zero
// From and a Reason saying so) and reported with an error wrapping
// ErrBadRecord. A file older than schema 5 (read, not migrated) has no
// drains.
func (s *Bolt) Drains() (map[string]sched.Drain, error) {
	var out map[string]sched.Drain
	var bad []string
	err := s.view(func(tx *bolt.Tx) error {
		out, bad = readDrains(tx.Bucket([]byte(bucketDrains)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, badDrains(bad)
}

// UpdateDrains loads every host's drain, calls fn on them (by host name:
// fn adds, changes and deletes entries) and stores what fn leaves, in one
// transaction: every host changes, or none. It returns the drains as
// stored. fn must only change the map, never do I/O; an error from fn
// aborts the update and is returned unchanged. An unreadable record that
// fn leaves as it got it is left as it is in the file.
func (s *Bolt) UpdateDrains(fn func(map[string]sched.Drain) error) (map[string]sched.Drain, error) {
	var out map[string]sched.Drain
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketDrains)) // a write migrated the file: it is there
		was, _ := readDrains(b)
		now := maps.Clone(was)
		if err := fn(now); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(was)) {
			if _, kept := now[name]; !kept {
				if err := b.Delete([]byte(name)); err != nil {
					return err
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(now)) {
			d := now[name]
			if old, ok := was[name]; ok && sameDrain(old, d) {
				continue
			}
			if name == "" {
				return fmt.Errorf("drain: empty host name")
			}
			data, err := json.Marshal(d)
			if err != nil {
				return fmt.Errorf("drain of host %s: %w", name, err)
			}
			if err := b.Put([]byte(name), data); err != nil {
				return err
			}
		}
		out = now
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readDrains decodes bucket b (nil: none), naming the records it could not.
func readDrains(b *bolt.Bucket) (map[string]sched.Drain, []string) {
	out := map[string]sched.Drain{}
	var bad []string
	if b == nil {
		return out, nil
	}
	_ = b.ForEach(func(k, v []byte) error {
		var d sched.Drain
		if err := json.Unmarshal(v, &d); err != nil {
			d, bad = unreadableDrain, append(bad, string(k))
		}
		out[string(k)] = d
		return nil
	})
	return out, bad
}

// sameDrain reports whether a and b say the same (times by their instant).
func sameDrain(a, b sched.Drain) bool {
	return a.By == b.By && a.Reason == b.Reason && a.At.Equal(b.At) && a.From.Equal(b.From)
}

func badDrains(names []string) error {
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("drains: %w: the drain records of %v cannot be decoded: those hosts are taken to be drained (gssh resume or gssh drain writes each afresh)", ErrBadRecord, names)
}

// Drains implements what Bolt.Drains does, in memory.
func (m *Mem) Drains() (map[string]sched.Drain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decodeDrains()
}

// UpdateDrains implements what Bolt.UpdateDrains does, in memory.
func (m *Mem) UpdateDrains(fn func(map[string]sched.Drain) error) (map[string]sched.Drain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ds, err := m.decodeDrains()
	if err != nil {
		return nil, err
	}
	if err := fn(ds); err != nil {
		return nil, err
	}
	next := make(map[string][]byte, len(ds))
	for name, d := range ds {
		if name == "" {
			return nil, fmt.Errorf("drain: empty host name")
		}
		data, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		next[name] = data
	}
	m.drains = next
	return m.decodeDrains()
}

func (m *Mem) decodeDrains() (map[string]sched.Drain, error) {
	out := map[string]sched.Drain{}
	for k, v := range m.drains {
		var d sched.Drain
		if err := json.Unmarshal(v, &d); err != nil {
			return nil, err
		}
		out[k] = d
	}
	return out, nil
}
