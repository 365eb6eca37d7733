package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/health"
)

// Hosts returns every host record (hosts/ bucket) by host name; a host
// never contacted has none. A record that cannot be decoded is left out
// and reported with an error wrapping ErrBadRecord.
func (s *Bolt) Hosts() (map[string]health.Host, error) {
	out := map[string]health.Host{}
	var bad []string
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketHosts))
		return b.ForEach(func(k, v []byte) error {
			var h health.Host
			if err := json.Unmarshal(v, &h); err != nil {
				bad = append(bad, string(k))
				return nil
			}
			h.Name = string(k)
			out[string(k)] = h
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, badHosts(bad)
}

// UpdateHost loads host name's record (a new one when there is none),
// calls fn on it and stores the result, in one transaction, and returns
// it. fn must only change fields, never do I/O; an error from fn aborts
// the update and is returned unchanged. A record that cannot be decoded
// is replaced by a fresh one (it only holds counters and strays, which
// a later pass finds again on the worker).
func (s *Bolt) UpdateHost(name string, fn func(*health.Host) error) (health.Host, error) {
	var out health.Host
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketHosts))
		h := health.Host{}
		if v := b.Get([]byte(name)); v != nil {
			_ = json.Unmarshal(v, &h) // unreadable: start afresh (see above)
		}
		h.Name = name
		if err := fn(&h); err != nil {
			return err
		}
		h.Name = name
		data, err := json.Marshal(h)
		if err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
		out = h
		return b.Put([]byte(name), data)
	})
	return out, err
}

func badHosts(names []string) error {
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("hosts: %w: the records of %v cannot be decoded (the next contact with each writes it afresh)", ErrBadRecord, names)
}

// Hosts implements what Bolt.Hosts does, in memory.
func (m *Mem) Hosts() (map[string]health.Host, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]health.Host{}
	for _, k := range slices.Sorted(maps.Keys(m.hosts)) {
		var h health.Host
		if err := json.Unmarshal(m.hosts[k], &h); err != nil {
			return nil, err
		}
		out[k] = h
	}
	return out, nil
}

// UpdateHost implements what Bolt.UpdateHost does, in memory.
func (m *Mem) UpdateHost(name string, fn func(*health.Host) error) (health.Host, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := health.Host{}
	if v, ok := m.hosts[name]; ok {
		_ = json.Unmarshal(v, &h)
	}
	h.Name = name
	if err := fn(&h); err != nil {
		return health.Host{}, err
	}
	h.Name = name
	data, err := json.Marshal(h)
	if err != nil {
		return health.Host{}, err
	}
	if m.hosts == nil {
		m.hosts = map[string][]byte{}
	}
	m.hosts[name] = data
	return h, nil
}
