package state_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

type drainStore interface {
	Drains() (map[string]sched.Drain, error)
	UpdateDrains(func(map[string]sched.Drain) error) (map[string]sched.Drain, error)
}

// Drains round-trip; an update is all or nothing (fn's error changes no
// host); a file of schema 4 reads none and takes them after its
// migration; an unreadable record stands for a drain in force.
func TestDrains(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b, path := openTemp(t)
	// Schema 4: no drains/ bucket.
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("drains")); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("version"), binary.BigEndian.AppendUint64(nil, 4))
	})
	if ds, err := b.Drains(); err != nil || len(ds) != 0 {
		t.Fatalf("Drains of a schema-4 file = %v, %v", ds, err)
	}
	for name, s := range map[string]drainStore{"bolt": b, "mem": state.NewMem()} {
		t.Run(name, func(t *testing.T) {
			d := sched.Drain{By: "bob", At: t0, From: t0.Add(time.Hour), Reason: "driver upgrade"}
			got, err := s.UpdateDrains(func(ds map[string]sched.Drain) error {
				ds["a"], ds["b"] = d, d
				return nil
			})
			if err != nil || len(got) != 2 || got["a"] != d {
				t.Fatalf("UpdateDrains = %v, %v", got, err)
			}
			boom := errors.New("boom")
			if _, err := s.UpdateDrains(func(ds map[string]sched.Drain) error {
				delete(ds, "a")
				ds["c"] = d
				return boom
			}); !errors.Is(err, boom) {
				t.Fatalf("UpdateDrains with a failing fn = %v, want boom", err)
			}
			if _, err := s.UpdateDrains(func(ds map[string]sched.Drain) error { delete(ds, "b"); return nil }); err != nil {
				t.Fatal(err)
			}
			ds, err := s.Drains()
			if err != nil || len(ds) != 1 || !ds["a"].From.Equal(d.From) || ds["a"].By != "bob" || ds["a"].Reason != "driver upgrade" {
				t.Fatalf("Drains = %v, %v; want a alone, as drained", ds, err)
			}
		})
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("schema-4 file after a drain: schema %d, want 6", v)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("drains")).Put([]byte("x"), []byte("{garbage")) })
	ds, err := b.Drains()
	if !errors.Is(err, state.ErrBadRecord) || len(ds) != 2 || !ds["x"].InForce(t0) || ds["x"].Reason == "" {
		t.Fatalf("Drains with a spoiled record = %v, %v; want x drained and ErrBadRecord", ds, err)
	}
	// An update that leaves it is no rewrite of it; one that resumes the
	// host deletes it.
	if _, err := b.UpdateDrains(func(ds map[string]sched.Drain) error { delete(ds, "a"); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Drains(); !errors.Is(err, state.ErrBadRecord) {
		t.Errorf("the spoiled record was rewritten: %v", err)
	}
	if _, err := b.UpdateDrains(func(ds map[string]sched.Drain) error { delete(ds, "x"); return nil }); err != nil {
		t.Fatal(err)
	}
	if ds, err := b.Drains(); err != nil || len(ds) != 0 {
		t.Errorf("after resuming every host: %v, %v", ds, err)
	}
}
