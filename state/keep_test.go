package state_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/state/storetest"
)

// TestBoltKept: a store whose file a Keep keeps open is a Store as any.
func TestBoltKept(t *testing.T) {
	storetest.Run(t, func(t *testing.T) state.Store {
		path := filepath.Join(t.TempDir(), "state.db")
		k := &state.Keep{}
		t.Cleanup(k.Close)
		s, err := state.Open(path, state.Options{Timeout: 10 * time.Second, Keep: k})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestKeep: many goroutines' submits through stores sharing a Keep get
// distinct ids and are all stored; meanwhile another process's store
// (one without the Keep: its own lock) waits for the file, and gets it
// once the Keep's Idle has passed with no operation; a file renamed over
// the kept one (gssh state restore) is the one the next operation uses.
func TestKeep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	k := &state.Keep{Idle: 50 * time.Millisecond}
	defer k.Close()
	open := func(keep *state.Keep, timeout time.Duration) *state.Bolt {
		s, err := state.Open(path, state.Options{Timeout: timeout, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	open(k, time.Second)
	const n = 64
	ids := make(chan job.ID, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			s := open(k, 10*time.Second)
			j, err := s.Submit(job.Job{User: "ann", Spec: job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "/"}})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- j.ID
		})
	}
	wg.Wait()
	close(ids)
	seen := map[job.ID]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("id %d given twice", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d ids, want %d", len(seen), n)
	}

	// Kept open now (an operation just ended): another store's one try
	// finds it busy; after the Idle, it gets it.
	kept := open(k, time.Second)
	if _, err := kept.Get(1); err != nil {
		t.Fatal(err)
	}
	other, err := state.Open(path, state.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err) // it waited for the Idle
	}
	js, err := other.List(state.Filter{})
	if err != nil || len(js) != n {
		t.Fatalf("another store lists %d jobs (%v), want %d", len(js), err, n)
	}
	if _, err := kept.Get(1); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Open(path, state.Options{Timeout: -1}); !errors.Is(err, state.ErrBusy) {
		t.Errorf("one try while it is kept: %v, want busy", err)
	}

	// A fresh file renamed over the kept one: the next operation opens it.
	time.Sleep(100 * time.Millisecond)
	fresh := filepath.Join(filepath.Dir(path), "fresh.db")
	if _, err := state.Open(fresh, state.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Get(1); err != nil { // kept open again
		t.Fatal(err)
	}
	if err := os.Rename(fresh, path); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Get(1); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("job 1 after the file was replaced: %v, want none (the fresh file's)", err)
	}
}

// TestUpdateEach: one transaction updates each job; a job that is not
// there, or that fn refuses, is left as it was and has its error, and the
// others are written all the same.
func TestUpdateEach(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []job.ID
	for range 3 {
		j, err := s.Submit(job.Job{User: "ann", Spec: job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "/"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	refused := errors.New("no")
	out, errs, err := s.UpdateEach([]job.ID{ids[0], 99, ids[1], ids[2]}, func(i int, x *job.Job) error {
		if x.ID == ids[1] {
			return refused
		}
		x.Reason = "reason " + string(rune('a'+i))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[1], state.ErrNotFound) || !errors.Is(errs[2], refused) || errs[0] != nil || errs[3] != nil {
		t.Errorf("errors %v", errs)
	}
	for id, want := range map[job.ID]string{ids[0]: "reason a", ids[1]: "", ids[2]: "reason d"} {
		if j, _ := s.Get(id); j.Reason != want {
			t.Errorf("job %d: reason %q, want %q", id, j.Reason, want)
		}
	}
	if out[3].Reason != "reason d" {
		t.Errorf("result %+v", out[3])
	}
}

// TestKeepActiveCache: with a Keep, Active's unchanged records come
// from its cache as copies of their own, a changed one is decoded again,
// and one no longer active is forgotten.
func TestKeepActiveCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	k := &state.Keep{}
	defer k.Close()
	s, err := state.Open(path, state.Options{Keep: k})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := s.Submit(job.Job{User: "u", Spec: job.Spec{Argv: []string{name}, Labels: []string{"l"}, GPUs: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Active()
	if err != nil || len(first) != 2 {
		t.Fatalf("Active = %v, %v", first, err)
	}
	first[0].Spec.Labels[0] = "changed by a caller"
	second, _ := s.Active()
	if second[0].Spec.Labels[0] != "l" {
		t.Errorf("a caller's change of what Active returned reached the next Active: %q", second[0].Spec.Labels[0])
	}
	if _, err := s.Update(1, func(j *job.Job) error { j.Spec.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(2, func(j *job.Job) error { j.State = job.Cancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	third, _ := s.Active()
	if len(third) != 1 || third[0].Spec.Name != "renamed" {
		t.Errorf("after an update and an end: %+v", third)
	}
}
