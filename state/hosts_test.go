package state_test

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

type hostStore interface {
	Hosts() (map[string]health.Host, error)
	UpdateHost(string, func(*health.Host) error) (health.Host, error)
}

// Host records round-trip, an error from fn changes nothing, and a
// schema-3 file (hosts/ reserved, empty) takes them after its migration.
func TestHostRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b, path := openTemp(t)
	downgrade(t, path, 3)
	for name, s := range map[string]hostStore{"bolt": b, "mem": state.NewMem()} {
		t.Run(name, func(t *testing.T) {
			if hs, err := s.Hosts(); err != nil || len(hs) != 0 {
				t.Fatalf("Hosts of a new store = %v, %v", hs, err)
			}
			j := job.Job{ID: 7, Attempt: 2, State: job.Running, Placement: job.Placement{Host: "h1"}}
			u, err := s.UpdateHost("h1", func(h *health.Host) error {
				*h = h.Failed(t0, "connect: timeout", health.Rules{}).AddStray(j, t0, "lost")
				return nil
			})
			if err != nil || u.Name != "h1" || u.Failures != 1 || !u.HasStray(7, 2) {
				t.Fatalf("UpdateHost = %+v, %v", u, err)
			}
			boom := errors.New("boom")
			if _, err := s.UpdateHost("h1", func(h *health.Host) error { h.Failures = 99; return boom }); !errors.Is(err, boom) {
				t.Fatalf("UpdateHost with a failing fn = %v, want boom", err)
			}
			hs, err := s.Hosts()
			if err != nil {
				t.Fatal(err)
			}
			got := hs["h1"]
			if len(hs) != 1 || got.Failures != 1 || got.LastError != "connect: timeout" || !got.FailingSince.Equal(t0) || len(got.Strays) != 1 || got.Strays[0].Job.Placement.Host != "h1" {
				t.Fatalf("Hosts = %+v", hs)
			}
		})
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("schema-3 file after a host write: schema %d, want 6", v)
	}
	// A record spoiled by hand is reported, the others read, and the next
	// write replaces it.
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("hosts")).Put([]byte("h2"), []byte("{garbage")) })
	hs, err := b.Hosts()
	if !errors.Is(err, state.ErrBadRecord) || len(hs) != 1 {
		t.Fatalf("Hosts with a spoiled record = %v, %v; want h1 and ErrBadRecord", hs, err)
	}
	if _, err := b.UpdateHost("h2", func(h *health.Host) error { *h = h.Answered(t0); return nil }); err != nil {
		t.Fatal(err)
	}
	if hs, err := b.Hosts(); err != nil || len(hs) != 2 {
		t.Fatalf("Hosts after rewriting the spoiled record = %v, %v", hs, err)
	}
}
