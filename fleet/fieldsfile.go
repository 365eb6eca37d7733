package fleet

import (
	"time"

	"github.com/gssh/gssh/probe"
)

// FieldsFile is a probe.FieldMemo kept in a JSON file (mode 0600, e.g.
// ~/.cache/gssh/smi-fields.json): per host, the nvidia-smi --query-gpu
// fields its driver rejects and the driver version that rejected them, so
// that every gssh process asks such a host the right query at once.
// probe.SMIMemo checks each entry against the driver version of every
// answer; an entry also expires after the ttl it was put with
// (probe.FieldsRecheck). Write errors are ignored: the memo only saves
// work.
type FieldsFile struct {
	file memoFile[fieldsEntry]
	now  func() time.Time
}

type fieldsEntry struct {
	Host string `json:"host"`
	probe.SMIFields
	Until time.Time `json:"until"`
}

// NewFieldsFile returns a memo stored at path.
func NewFieldsFile(path string, now func() time.Time) *FieldsFile {
	return &FieldsFile{file: memoFile[fieldsEntry]{path: path}, now: now}
}

// Fields returns what is remembered for host, if not expired.
func (m *FieldsFile) Fields(host string) (probe.SMIFields, bool) {
	for _, e := range m.file.read() {
		if e.Host == host && m.now().Before(e.Until) {
			return e.SMIFields, true
		}
	}
	return probe.SMIFields{}, false
}

// PutFields remembers f for host for ttl, dropping expired entries.
func (m *FieldsFile) PutFields(host string, f probe.SMIFields, ttl time.Duration) {
	now := m.now()
	m.edit(host, func(keep []fieldsEntry) []fieldsEntry {
		return append(keep, fieldsEntry{Host: host, SMIFields: f, Until: now.Add(ttl).UTC()})
	})
}

// ForgetFields drops host's entry.
func (m *FieldsFile) ForgetFields(host string) {
	m.edit(host, func(keep []fieldsEntry) []fieldsEntry { return keep })
}

// edit rewrites the file without host's entry and expired ones, then
// with what add appends.
func (m *FieldsFile) edit(host string, add func([]fieldsEntry) []fieldsEntry) {
	now := m.now()
	m.file.update(func(es []fieldsEntry) []fieldsEntry {
		keep := []fieldsEntry{}
		for _, e := range es {
			if e.Host != host && now.Before(e.Until) {
				keep = append(keep, e)
			}
		}
		return add(keep)
	})
}
