package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// RunKeeper runs the housekeeping suite (state.Keeper) as subtests of t,
// each on a new, empty store from newStore.
func RunKeeper(t *testing.T, newStore func(t *testing.T) state.Keeper) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s state.Keeper)
	}{
		{"TrimHistory", testTrimHistory},
		{"TrimUses", testTrimUses},
		{"DirsDue", testDirsDue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var k0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// kAt is k0 plus h hours.
func kAt(h float64) time.Time { return k0.Add(time.Duration(h * float64(time.Hour))) }

// ended submits a job of user that ran from start to end (hours after
// k0) on host h as its attempt 1, ended as st.
func ended(t *testing.T, s state.Store, user string, start, end float64, st job.State) job.Job {
	t.Helper()
	j := submit(t, s, simple(user, "x"))
	return update(t, s, j.ID, func(x *job.Job) {
		x.State, x.Attempt, x.AttemptHosts = st, 1, []string{"h"}
		x.Placement = job.Placement{Host: "h", GPUs: []string{"GPU-0"}, Indexes: []int{0}}
		x.Remote = job.Remote{Dir: "/home/u/.gssh/jobs/c-1.1", PID: 10}
		x.StartedAt, x.EndedAt = kAt(start), kAt(end)
	})
}

func trim(t *testing.T, s state.Keeper, b state.TrimBefore) state.Trimmed {
	t.Helper()
	got, err := s.Trim(b)
	if err != nil {
		t.Fatalf("Trim(%+v): %v", b, err)
	}
	return got
}

func list(t *testing.T, s state.Store, f state.Filter) []job.ID {
	t.Helper()
	got, err := s.List(f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return ids(got)
}

// Jobs that ended before the cutoff move to the history: they leave the
// queue's structures, but Get, List (with or without Since), Update and
// Uses read them as before.
func testTrimHistory(t *testing.T, s state.Keeper) {
	a := ended(t, s, "alice", 0, 1, job.Succeeded) // 1: ended at +1h
	b := ended(t, s, "bob", 0, 3, job.Failed)      // 2: ended at +3h
	run := submit(t, s, simple("alice", "run"))    // 3: running
	setState(t, s, run.ID, job.Running)
	q := submit(t, s, simple("bob", "q"))          // 4: queued
	c := ended(t, s, "alice", 1, 2, job.Cancelled) // 5: ended at +2h
	usesBefore, err := s.Uses(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := trim(t, s, state.TrimBefore{Jobs: kAt(2.5)}); got != (state.Trimmed{Moved: 2}) {
		t.Errorf("Trim before +2.5h = %+v, want 2 moved (jobs 1 and 5)", got)
	}
	if got := trim(t, s, state.TrimBefore{Jobs: kAt(2.5)}); got != (state.Trimmed{}) {
		t.Errorf("Trim again = %+v, want nothing", got)
	}
	sameJob(t, "Get of a job in the history", get(t, s, a.ID), a)
	sameJob(t, "Get of another", get(t, s, c.ID), c)
	for _, tc := range []struct {
		name string
		f    state.Filter
		want []job.ID
	}{
		{"all", state.Filter{}, []job.ID{1, 2, 3, 4, 5}},
		{"newest 2", state.Filter{Limit: 2}, []job.ID{4, 5}},
		{"newest 4", state.Filter{Limit: 4}, []job.ID{2, 3, 4, 5}},
		{"user", state.Filter{User: "alice"}, []job.ID{1, 3, 5}},
		{"ended states", state.Filter{States: []job.State{job.Succeeded, job.Cancelled}}, []job.ID{1, 5}},
		{"active", state.Filter{States: []job.State{job.Queued, job.Running}}, []job.ID{3, 4}},
		{"since before all", state.Filter{Since: kAt(-1)}, []job.ID{1, 2, 3, 4, 5}},
		{"since an end (inclusive)", state.Filter{Since: kAt(1)}, []job.ID{1, 2, 3, 4, 5}},
		{"since +1.5h", state.Filter{Since: kAt(1.5)}, []job.ID{2, 3, 4, 5}},
		{"since +2.5h: the history is not needed", state.Filter{Since: kAt(2.5)}, []job.ID{2, 3, 4}},
		{"since after every end", state.Filter{Since: kAt(9)}, []job.ID{3, 4}},
		{"since, newest 2", state.Filter{Since: kAt(0), Limit: 2}, []job.ID{4, 5}},
		{"since, user", state.Filter{Since: kAt(1.5), User: "alice"}, []job.ID{3, 5}},
		{"since, states", state.Filter{Since: kAt(0), States: []job.State{job.Failed, job.Succeeded}}, []job.ID{1, 2}},
		{"oldest 2: from the history and the queue", state.Filter{First: 2}, []job.ID{1, 2}},
		{"oldest 2 after 1", state.Filter{First: 2, After: 1}, []job.ID{2, 3}},
		{"oldest 3 after 3", state.Filter{First: 3, After: 3}, []job.ID{4, 5}},
		{"oldest active after 3", state.Filter{States: []job.State{job.Queued, job.Running}, First: 1, After: 3}, []job.ID{4}},
		{"since, oldest 2", state.Filter{Since: kAt(0), First: 2}, []job.ID{1, 2}},
	} {
		if got := list(t, s, tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("List %s = %v, want %v", tc.name, got, tc.want)
		}
	}
	act, err := s.Active()
	if err != nil || !slices.Equal(ids(act), []job.ID{run.ID, q.ID}) {
		t.Errorf("Active = %v %v, want [3 4]", ids(act), err)
	}
	// A record in the history may still change, but not its state.
	u := update(t, s, a.ID, func(x *job.Job) { x.Reason = "read later" })
	sameJob(t, "Update in the history", get(t, s, a.ID), u)
	if _, err := s.Update(a.ID, func(x *job.Job) error { x.State = job.Queued; return nil }); !errors.Is(err, state.ErrTerminal) {
		t.Errorf("requeue of a job in the history: %v, want ErrTerminal", err)
	}
	usesAfter, err := s.Uses(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	SameUses(t, "Uses after the move", usesAfter, usesBefore)
	// Newer jobs keep their ids after the history's.
	if n := submit(t, s, simple("carol", "new")); n.ID != 6 {
		t.Errorf("next id %d, want 6", n.ID)
	}
	if got := trim(t, s, state.TrimBefore{Jobs: kAt(9)}); got.Moved != 1 {
		t.Errorf("Trim before +9h moved %d, want 1 (job 2)", got.Moved)
	}
	if got := list(t, s, state.Filter{Since: kAt(2.5)}); !slices.Equal(got, []job.ID{b.ID, run.ID, q.ID, 6}) {
		t.Errorf("List since +2.5h after job 2 moved = %v, want [2 3 4 6]", got)
	}
}

// The ledger forgets uses that ended before the cutoff; later ones, and
// Uses since the cutoff, are as before.
func testTrimUses(t *testing.T, s state.Keeper) {
	ended(t, s, "alice", 0, 1, job.Succeeded)
	b := ended(t, s, "bob", 0, 3, job.Succeeded)
	// A requeued job: its first run ended at +0.5h, the second runs.
	r := submit(t, s, simple("carol", "r"))
	update(t, s, r.ID, func(x *job.Job) {
		x.Runs = []job.Use{{User: "carol", Started: kAt(0), Ended: kAt(0.5), Share: 1}}
		x.State, x.StartedAt = job.Running, kAt(1)
	})
	since := kAt(2)
	want, err := s.Uses(since)
	if err != nil {
		t.Fatal(err)
	}
	if got := trim(t, s, state.TrimBefore{Uses: since}); got != (state.Trimmed{Pruned: 2}) {
		t.Errorf("Trim of the uses before +2h = %+v, want 2 pruned", got)
	}
	all, err := s.Uses(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	SameUses(t, "every use after the prune", all, want)
	u, _ := b.Use()
	SameUses(t, "Uses since the cutoff", want, []job.Use{u})
	if got := trim(t, s, state.TrimBefore{Uses: since}); got != (state.Trimmed{}) {
		t.Errorf("Trim again = %+v, want nothing", got)
	}
	// The records are all there.
	if got := list(t, s, state.Filter{}); len(got) != 3 {
		t.Errorf("List = %v, want 3 jobs", got)
	}
}

// DirsDue finds the ended jobs launched at least once whose directories
// housekeeping has not dealt with, by end, in the history too, until
// MarkHousekept records what became of them.
func testDirsDue(t *testing.T, s state.Keeper) {
	late := ended(t, s, "alice", 0, 2, job.Succeeded) // 1: ended +2h
	early := ended(t, s, "bob", 0, 1, job.Failed)     // 2: ended +1h
	never := submit(t, s, simple("bob", "never"))     // 3: cancelled before it ran
	update(t, s, never.ID, func(x *job.Job) { x.State, x.EndedAt = job.Cancelled, kAt(0) })
	run := submit(t, s, simple("alice", "run")) // 4: running, launched
	update(t, s, run.ID, func(x *job.Job) { x.State, x.Attempt = job.Running, 1 })
	recent := ended(t, s, "carol", 0, 5, job.Succeeded) // 5: ended +5h
	due := func(before time.Time, limit int) []job.ID {
		t.Helper()
		got, err := s.DirsDue(before, limit)
		if err != nil {
			t.Fatalf("DirsDue: %v", err)
		}
		return ids(got)
	}
	if got := due(kAt(4), 10); !slices.Equal(got, []job.ID{early.ID, late.ID}) {
		t.Errorf("DirsDue before +4h = %v, want [2 1] (by end)", got)
	}
	if got := due(kAt(4), 1); !slices.Equal(got, []job.ID{early.ID}) {
		t.Errorf("DirsDue limit 1 = %v, want [2]", got)
	}
	if got := due(kAt(2), 10); !slices.Equal(got, []job.ID{early.ID}) {
		t.Errorf("DirsDue before +2h (exclusive) = %v, want [2]", got)
	}
	at := kAt(6)
	marked, err := s.MarkHousekept(map[job.ID]job.Housekept{early.ID: {At: at, Removed: 1, Bytes: 4096}, run.ID: {At: at}})
	if err != nil || !slices.Equal(ids(marked), []job.ID{early.ID}) {
		t.Fatalf("MarkHousekept = %v %v, want [2] (the running job left out)", ids(marked), err)
	}
	if h := get(t, s, early.ID).Housekept; h == nil || h.Removed != 1 || h.Bytes != 4096 || !h.At.Equal(at) {
		t.Errorf("job 2's Housekept = %+v", h)
	}
	if get(t, s, run.ID).Housekept != nil {
		t.Error("a running job was marked housekept")
	}
	if got := due(kAt(9), 10); !slices.Equal(got, []job.ID{late.ID, recent.ID}) {
		t.Errorf("DirsDue after the mark = %v, want [1 5]", got)
	}
	// Marked already: left as it is.
	if marked, err := s.MarkHousekept(map[job.ID]job.Housekept{early.ID: {At: at.Add(time.Hour), Kept: "again"}}); err != nil || len(marked) != 0 {
		t.Errorf("a second mark = %v %v, want none", ids(marked), err)
	}
	if _, err := s.MarkHousekept(map[job.ID]job.Housekept{99: {At: at}}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("mark of a missing job: %v, want ErrNotFound", err)
	}
	// In the history, a job is still due until marked.
	trim(t, s, state.TrimBefore{Jobs: kAt(9)})
	if got := due(kAt(9), 10); !slices.Equal(got, []job.ID{late.ID, recent.ID}) {
		t.Errorf("DirsDue of jobs in the history = %v, want [1 5]", got)
	}
	if marked, err := s.MarkHousekept(map[job.ID]job.Housekept{late.ID: {At: at, Kept: "its host h is no longer in the inventory"}}); err != nil || len(marked) != 1 {
		t.Fatalf("mark in the history = %v %v", ids(marked), err)
	}
	if h := get(t, s, late.ID).Housekept; h == nil || h.Kept == "" {
		t.Errorf("job 1 in the history: Housekept %+v", h)
	}
	if got := due(kAt(9), 10); !slices.Equal(got, []job.ID{recent.ID}) {
		t.Errorf("DirsDue at last = %v, want [5]", got)
	}
}
