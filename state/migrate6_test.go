package state_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
)

// A job record of schema 5 has its durations in nanoseconds (timeout,
// signal_grace, grace_ns): a read of the file, not migrated, gets them
// right; the first write makes the file schema 6, and the record, once
// it changes, is written in seconds (timeout_s, ...), read back the same.
func TestSchema5RecordsReadInSeconds(t *testing.T) {
	s, path := openTemp(t)
	j, err := s.Submit(job.Job{User: "a", Spec: job.Spec{Argv: []string{"x"}, GPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	old := `{"id":1,"user":"a","state":"queued","submitted_at":"2026-01-02T03:04:05Z",
		"spec":{"argv":["x"],"host":"auto","gpus":1,"workdir":"~","priority":5,"timeout":5400500000000,"signal_grace":30000000000},
		"cancel_requested":{"by":"b","at":"2026-01-02T03:04:06Z","grace_ns":10000000000}}`
	putRecord(t, path, j.ID, []byte(old))
	setVersion(t, path, 5)
	check := func(when string) {
		t.Helper()
		got, err := s.Get(j.ID)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got.Spec.Timeout != 90*time.Minute+500*time.Millisecond || got.Spec.SignalGrace != 30*time.Second ||
			got.CancelRequested == nil || got.CancelRequested.Grace != 10*time.Second {
			t.Errorf("%s: timeout %v, grace %v, cancel %+v", when, got.Spec.Timeout, got.Spec.SignalGrace, got.CancelRequested)
		}
	}
	check("read of the schema-5 file")
	if v := schemaOf(t, path); v != 5 {
		t.Fatalf("a read migrated the file: schema %d", v)
	}
	if _, err := s.Update(j.ID, func(x *job.Job) error { x.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after a write: schema %d, want 6", v)
	}
	check("after the write")
	raw := rawRecord(t, path, j.ID)
	for _, want := range []string{`"timeout_s":5400.5`, `"signal_grace_s":30`, `"grace_s":10`} {
		if !strings.Contains(raw, want) {
			t.Errorf("record written after migration %s lacks %s", raw, want)
		}
	}
	if strings.Contains(raw, `"timeout":`) || strings.Contains(raw, `grace_ns`) {
		t.Errorf("record written after migration keeps nanoseconds: %s", raw)
	}
}

// setVersion writes the schema version key of the file at path.
func setVersion(t *testing.T, path string, v uint64) {
	t.Helper()
	setMeta(t, path, "version", binary.BigEndian.AppendUint64(nil, v))
}

// rawRecord is the jobs/ record of id in the file at path, as stored.
func rawRecord(t *testing.T, path string, id job.ID) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw string
	db.View(func(tx *bolt.Tx) error {
		raw = string(tx.Bucket([]byte("jobs")).Get(binary.BigEndian.AppendUint64(nil, uint64(id))))
		return nil
	})
	return raw
}
