package fleet

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FallbackFile is a probe.FallbackMemo kept in a JSON file (mode 0600), so that a host
// where the helper cannot run is not retried by every gssh process. Entries
// are keyed by host and helper sha256: a new helper is tried afresh. Write
// errors are ignored: the memo only saves work.
type FallbackFile struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
}

type fallbackEntry struct {
	Host   string    `json:"host"`
	SHA256 string    `json:"helper_sha256"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until,omitzero"` // zero: until the helper changes
}

// NewFallbackFile returns a memo stored at path (e.g. ~/.cache/gssh/helper-fallback.json).
func NewFallbackFile(path string, now func() time.Time) *FallbackFile {
	return &FallbackFile{path: path, now: now}
}

func (m *FallbackFile) load() []fallbackEntry {
	b, err := os.ReadFile(m.path)
	if err != nil {
		return nil
	}
	var es []fallbackEntry
	if json.Unmarshal(b, &es) != nil {
		return nil // a damaged memo is as good as none
	}
	return es
}

// Get returns the reason remembered for host and helper sha, if still valid.
func (m *FallbackFile) Get(host, sha string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.load() {
		if e.Host == host && e.SHA256 == sha && (e.Until.IsZero() || m.now().Before(e.Until)) {
			return e.Reason, true
		}
	}
	return "", false
}

// Put remembers reason for ttl (0 = until the helper changes), dropping
// entries of other helpers and expired ones.
func (m *FallbackFile) Put(host, sha, reason string, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	keep := []fallbackEntry{}
	for _, e := range m.load() {
		if e.SHA256 != sha || e.Host == host || (!e.Until.IsZero() && now.After(e.Until)) {
			continue
		}
		keep = append(keep, e)
	}
	e := fallbackEntry{Host: host, SHA256: sha, Reason: reason}
	if ttl > 0 {
		e.Until = now.Add(ttl).UTC()
	}
	keep = append(keep, e)
	b, err := json.MarshalIndent(keep, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(m.path), ".memo-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Chmod(tmp.Name(), 0o600) != nil || os.Rename(tmp.Name(), m.path) != nil {
		os.Remove(tmp.Name())
	}
}
