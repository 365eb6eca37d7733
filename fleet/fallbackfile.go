package fleet

import (
	"time"
)

// FallbackFile is a probe.FallbackMemo kept in a JSON file (mode 0600), so that a host
// where the helper cannot run is not retried by every gssh process. Entries
// are keyed by host and helper sha256: a new helper is tried afresh. Write
// errors are ignored: the memo only saves work.
type FallbackFile struct {
	file memoFile[fallbackEntry]
	now  func() time.Time
}

type fallbackEntry struct {
	Host   string    `json:"host"`
	SHA256 string    `json:"helper_sha256"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until,omitzero"` // zero: until the helper changes
}

// NewFallbackFile returns a memo stored at path (e.g. ~/.cache/gssh/helper-fallback.json).
func NewFallbackFile(path string, now func() time.Time) *FallbackFile {
	return &FallbackFile{file: memoFile[fallbackEntry]{path: path}, now: now}
}

// Get returns the reason remembered for host and helper sha, if still valid.
func (m *FallbackFile) Get(host, sha string) (string, bool) {
	for _, e := range m.file.read() {
		if e.Host == host && e.SHA256 == sha && (e.Until.IsZero() || m.now().Before(e.Until)) {
			return e.Reason, true
		}
	}
	return "", false
}

// Put remembers reason for ttl (0 = until the helper changes), dropping
// entries of other helpers and expired ones.
func (m *FallbackFile) Put(host, sha, reason string, ttl time.Duration) {
	now := m.now()
	m.file.update(func(es []fallbackEntry) []fallbackEntry {
		keep := []fallbackEntry{}
		for _, e := range es {
			if e.SHA256 != sha || e.Host == host || (!e.Until.IsZero() && now.After(e.Until)) {
				continue
			}
			keep = append(keep, e)
		}
		e := fallbackEntry{Host: host, SHA256: sha, Reason: reason}
		if ttl > 0 {
			e.Until = now.Add(ttl).UTC()
		}
		return append(keep, e)
	})
}
