// Package storetest is the conformance suite every state.Store passes, in
// the style of Nomad's testDB and restic's backend Suite: run it from the
// implementation's tests with a constructor of fresh, empty stores.
package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// Run runs the suite as subtests of t. newStore must return a new, empty
// store for each call (it may register cleanups on the t it is given).
func Run(t *testing.T, newStore func(t *testing.T) state.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s state.Store)
	}{
		{"ClusterID", testClusterID},
		{"SubmitOrder", testSubmitOrder},
		{"SubmitDefaults", testSubmitDefaults},
		{"SubmitRejectsID", testSubmitRejectsID},
		{"SubmitAll", testSubmitAll},
		{"RoundTrip", testRoundTrip},
		{"CopiesOut", testCopiesOut},
		{"GetNotFound", testGetNotFound},
		{"Update", testUpdate},
		{"UpdateAbort", testUpdateAbort},
		{"UpdateInvariants", testUpdateInvariants},
		{"TerminalRefusal", testTerminalRefusal},
		{"ActiveIndex", testActiveIndex},
		{"ListFilters", testListFilters},
		{"ListLimit", testListLimit},
		{"ConcurrentSubmit", testConcurrentSubmit},
		{"Uses", testUses},
		{"UsesOrder", testUsesOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func submit(t *testing.T, s state.Store, j job.Job) job.Job {
	t.Helper()
	got, err := s.Submit(j)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return got
}

func get(t *testing.T, s state.Store, id job.ID) job.Job {
	t.Helper()
	got, err := s.Get(id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return got
}

func setState(t *testing.T, s state.Store, id job.ID, st job.State) job.Job {
	t.Helper()
	got, err := s.Update(id, func(j *job.Job) error { j.State = st; return nil })
	if err != nil {
		t.Fatalf("Update(%d) to %s: %v", id, st, err)
	}
	return got
}

func simple(user, name string) job.Job {
	return job.Job{User: user, Spec: job.Spec{Argv: []string{"true"}, Name: name, Host: "auto", GPUs: 1, Priority: 5}}
}

func ids(js []job.Job) []job.ID {
	out := make([]job.ID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// sameJob compares jobs field by field, times with Equal.
func sameJob(t *testing.T, what string, got, want job.Job) {
	t.Helper()
	for _, p := range []struct{ g, w time.Time }{
		{got.SubmittedAt, want.SubmittedAt}, {got.StartedAt, want.StartedAt}, {got.EndedAt, want.EndedAt},
	} {
		if !p.g.Equal(p.w) {
			t.Errorf("%s: time %v, want %v", what, p.g, p.w)
		}
	}
	got.SubmittedAt, got.StartedAt, got.EndedAt = time.Time{}, time.Time{}, time.Time{}
	want.SubmittedAt, want.StartedAt, want.EndedAt = time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testClusterID(t *testing.T, s state.Store) {
	id, err := s.ClusterID()
	if err != nil {
		t.Fatalf("ClusterID: %v", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("ClusterID = %q, want 32 lowercase hex characters", id)
	}
	again, err := s.ClusterID()
	if err != nil || again != id {
		t.Errorf("ClusterID changed: %q then %q (%v)", id, again, err)
	}
}

func testSubmitOrder(t *testing.T, s state.Store) {
	var got []job.ID
	for i := range 5 {
		got = append(got, submit(t, s, simple("alice", fmt.Sprint(i))).ID)
	}
	if want := []job.ID{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	all, err := s.List(state.Filter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.Equal(ids(all), got) {
		t.Errorf("List ids = %v, want %v", ids(all), got)
	}
	for i, j := range all {
		if j.Spec.Name != fmt.Sprint(i) {
			t.Errorf("job %d name = %q, want %q", j.ID, j.Spec.Name, fmt.Sprint(i))
		}
	}
}

func testSubmitDefaults(t *testing.T, s state.Store) {
	before := time.Now().Add(-time.Second)
	a := submit(t, s, simple("alice", "a"))
	if a.State != job.Queued {
		t.Errorf("default State = %q, want queued", a.State)
	}
	if a.SubmittedAt.Before(before) || a.SubmittedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("default SubmittedAt = %v, want about now", a.SubmittedAt)
	}
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	b := simple("bob", "b")
	b.SubmittedAt, b.State = at, job.Running
	gotB := submit(t, s, b)
	if !gotB.SubmittedAt.Equal(at) || gotB.State != job.Running {
		t.Errorf("given SubmittedAt/State changed: %v %s", gotB.SubmittedAt, gotB.State)
	}
	sameJob(t, "Get after Submit", get(t, s, a.ID), a)
	sameJob(t, "Get after Submit", get(t, s, gotB.ID), gotB)
}

func testSubmitRejectsID(t *testing.T, s state.Store) {
	j := simple("alice", "x")
	j.ID = 42
	if _, err := s.Submit(j); err == nil {
		t.Fatal("Submit of a job with an id: no error")
	}
	if all, _ := s.List(state.Filter{}); len(all) != 0 {
		t.Errorf("refused Submit stored %d jobs", len(all))
	}
}

func testRoundTrip(t *testing.T, s state.Store) {
	code := 3
	in := job.Job{
		User: "alice",
		Spec: job.Spec{
			Argv: []string{"python", "train.py", "--lr", "it's \"quoted\""}, Name: "train",
			Host: "gpu01", Labels: []string{"a100", "nvlink"}, GPUs: 2, MemPerGPU: 40 << 30,
			Workdir: "/home/alice/x", Env: []job.EnvVar{{Key: "A", Value: "1"}, {Key: "B", Value: "x y"}},
			Timeout: 90 * time.Minute, Priority: 3, Extra: map[string]string{"k": "v"},
		},
		State:     job.Running,
		Reason:    "",
		Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-a", "GPU-b"}, Indexes: []int{0, 3}},
		Remote:    job.Remote{Dir: "/home/alice/.gssh/jobs/x-1", PID: 4242, StartTicks: 123456},
		ExitCode:  &code,
		Signal:    "KILL",

		SubmittedAt: time.Date(2024, 5, 1, 12, 0, 0, 5, time.UTC),
		StartedAt:   time.Date(2024, 5, 1, 12, 0, 1, 0, time.UTC),
		EndedAt:     time.Date(2024, 5, 1, 13, 0, 1, 0, time.UTC),
	}
	got := submit(t, s, in)
	want := in
	want.ID = got.ID
	sameJob(t, "Submit result", got, want)
	sameJob(t, "Get", get(t, s, got.ID), want)
}

func testCopiesOut(t *testing.T, s state.Store) {
	in := simple("alice", "a")
	in.Spec.Argv = []string{"echo", "hi"}
	got := submit(t, s, in)
	in.Spec.Argv[0] = "changed-input"
	got.Spec.Argv[1] = "changed-output"
	g := get(t, s, got.ID)
	g.Spec.Argv[0] = "changed-get"
	if g2 := get(t, s, got.ID); !slices.Equal(g2.Spec.Argv, []string{"echo", "hi"}) {
		t.Errorf("stored Argv = %q: a caller's copy aliases the store", g2.Spec.Argv)
	}
	var kept *job.Job
	if _, err := s.Update(got.ID, func(j *job.Job) error { kept = j; return nil }); err != nil {
		t.Fatal(err)
	}
	kept.Spec.Argv[0] = "changed-after-update"
	if g3 := get(t, s, got.ID); g3.Spec.Argv[0] != "echo" {
		t.Errorf("stored Argv = %q: Update's fn argument aliases the store", g3.Spec.Argv)
	}
}

func testGetNotFound(t *testing.T, s state.Store) {
	_, err := s.Get(99)
	if !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get(99) error = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "no job 99") {
		t.Errorf("Get(99) error = %q, want it to say \"no job 99\"", err)
	}
	_, err = s.Update(99, func(*job.Job) error { return nil })
	if !errors.Is(err, state.ErrNotFound) || !strings.Contains(err.Error(), "no job 99") {
		t.Errorf("Update(99) error = %v, want ErrNotFound \"no job 99\"", err)
	}
}

func testUpdate(t *testing.T, s state.Store) {
	j := submit(t, s, simple("alice", "a"))
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	got, err := s.Update(j.ID, func(j *job.Job) error {
		if j.State != job.Queued {
			return fmt.Errorf("fn saw state %s", j.State)
		}
		j.State = job.Launching
		j.Placement = job.Placement{Host: "gpu01", GPUs: []string{"GPU-1"}, Indexes: []int{1}}
		j.StartedAt = start
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got.State != job.Launching || got.Placement.Host != "gpu01" || !got.StartedAt.Equal(start) {
		t.Errorf("Update result = %+v", got)
	}
	sameJob(t, "Get after Update", get(t, s, j.ID), got)
	setState(t, s, j.ID, job.Running)
	if g := get(t, s, j.ID); g.State != job.Running || g.Placement.Host != "gpu01" {
		t.Errorf("after second Update: %+v", g)
	}
}

func testUpdateAbort(t *testing.T, s state.Store) {
	j := submit(t, s, simple("alice", "a"))
	boom := errors.New("boom")
	_, err := s.Update(j.ID, func(j *job.Job) error {
		j.State = job.Running
		j.Reason = "should not stick"
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want fn's error", err)
	}
	sameJob(t, "after aborted Update", get(t, s, j.ID), j)
	act, err := s.Active()
	if err != nil || !slices.Equal(ids(act), []job.ID{j.ID}) {
		t.Errorf("Active after aborted Update = %v, %v", ids(act), err)
	}
}

func testUpdateInvariants(t *testing.T, s state.Store) {
	j := submit(t, s, simple("alice", "a"))
	if _, err := s.Update(j.ID, func(j *job.Job) error { j.ID = 7; return nil }); err == nil {
		t.Error("Update changing the id: no error")
	}
	if _, err := s.Update(j.ID, func(j *job.Job) error { j.State = ""; return nil }); err == nil {
		t.Error("Update emptying the state: no error")
	}
	sameJob(t, "after refused Updates", get(t, s, j.ID), j)
	if _, err := s.Get(7); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(7) after refused id change: %v", err)
	}
}

func testTerminalRefusal(t *testing.T, s state.Store) {
	for _, end := range []job.State{job.Succeeded, job.Failed, job.Cancelled, job.Timeout, job.Lost} {
		t.Run(string(end), func(t *testing.T) {
			j := submit(t, s, simple("alice", string(end)))
			setState(t, s, j.ID, job.Running)
			ended := setState(t, s, j.ID, end)
			for _, to := range []job.State{job.Queued, job.Running, job.Succeeded, job.Lost} {
				if to == end {
					continue
				}
				_, err := s.Update(j.ID, func(j *job.Job) error { j.State = to; j.Reason = "x"; return nil })
				if !errors.Is(err, state.ErrTerminal) {
					t.Errorf("%s -> %s: error %v, want ErrTerminal", end, to, err)
				}
			}
			sameJob(t, "after refused transitions", get(t, s, j.ID), ended)
			// Other fields of an ended job may still change.
			got, err := s.Update(j.ID, func(j *job.Job) error { j.Reason = "exit status 3"; return nil })
			if err != nil || got.Reason != "exit status 3" || got.State != end {
				t.Errorf("Update of an ended job's reason: %+v, %v", got, err)
			}
		})
	}
}

func testActiveIndex(t *testing.T, s state.Store) {
	check := func(want ...job.ID) {
		t.Helper()
		act, err := s.Active()
		if err != nil {
			t.Fatalf("Active: %v", err)
		}
		if !slices.Equal(ids(act), want) && !(len(act) == 0 && len(want) == 0) {
			t.Errorf("Active = %v, want %v", ids(act), want)
		}
		for _, j := range act {
			if j.State.Terminal() {
				t.Errorf("Active returned job %d in state %s", j.ID, j.State)
			}
		}
	}
	check()
	for i := range 6 {
		submit(t, s, simple("alice", fmt.Sprint(i)))
	}
	check(1, 2, 3, 4, 5, 6)
	setState(t, s, 2, job.Launching)
	setState(t, s, 3, job.Running)
	setState(t, s, 3, job.Succeeded)
	setState(t, s, 5, job.Cancelled)
	check(1, 2, 4, 6)
	setState(t, s, 2, job.Running)
	setState(t, s, 2, job.Queued) // requeued
	setState(t, s, 6, job.Lost)
	check(1, 2, 4)
	ended := job.Job{User: "bob", State: job.Failed}
	f := submit(t, s, ended) // submitted already ended: never indexed
	check(1, 2, 4)
	if g := get(t, s, f.ID); g.State != job.Failed {
		t.Errorf("job %d state = %s", f.ID, g.State)
	}
	running := submit(t, s, job.Job{User: "bob", State: job.Running})
	check(1, 2, 4, running.ID)
}

func testListFilters(t *testing.T, s state.Store) {
	type row struct {
		user string
		st   job.State
	}
	rows := []row{
		{"alice", job.Queued}, {"bob", job.Running}, {"alice", job.Succeeded}, {"carol", job.Failed},
		{"bob", job.Queued}, {"alice", job.Running}, {"bob", job.Cancelled}, {"alice", job.Launching},
	}
	for i, r := range rows {
		j := submit(t, s, simple(r.user, fmt.Sprint(i)))
		if r.st == job.Queued {
			continue
		}
		if r.st.Terminal() {
			setState(t, s, j.ID, job.Running)
		}
		setState(t, s, j.ID, r.st)
	}
	for _, tc := range []struct {
		name string
		f    state.Filter
		want []job.ID
	}{
		{"all", state.Filter{}, []job.ID{1, 2, 3, 4, 5, 6, 7, 8}},
		{"user", state.Filter{User: "alice"}, []job.ID{1, 3, 6, 8}},
		{"no such user", state.Filter{User: "dave"}, nil},
		{"queued", state.Filter{States: []job.State{job.Queued}}, []job.ID{1, 5}},
		{"active states", state.Filter{States: []job.State{job.Running, job.Launching}}, []job.ID{2, 6, 8}},
		{"ended states", state.Filter{States: []job.State{job.Succeeded, job.Failed, job.Cancelled}}, []job.ID{3, 4, 7}},
		{"mixed states", state.Filter{States: []job.State{job.Queued, job.Cancelled}}, []job.ID{1, 5, 7}},
		{"user and states", state.Filter{User: "bob", States: []job.State{job.Queued, job.Running}}, []job.ID{2, 5}},
		{"state nobody has", state.Filter{States: []job.State{job.Timeout}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(tc.f)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.f, err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, ids(got), tc.want)
			}
			for _, j := range got {
				if j.User != rows[j.ID-1].user || j.State != rows[j.ID-1].st {
					t.Errorf("job %d = %s/%s, want %s/%s", j.ID, j.User, j.State, rows[j.ID-1].user, rows[j.ID-1].st)
				}
			}
		})
	}
}

func testListLimit(t *testing.T, s state.Store) {
	if got, err := s.List(state.Filter{Limit: 3}); err != nil || len(got) != 0 {
		t.Errorf("List on an empty store = %v, %v", ids(got), err)
	}
	for i := range 10 {
		user := "alice"
		if i%2 == 1 {
			user = "bob"
		}
		submit(t, s, simple(user, fmt.Sprint(i)))
	}
	setState(t, s, 10, job.Running)
	setState(t, s, 10, job.Succeeded)
	for _, tc := range []struct {
		name string
		f    state.Filter
		want []job.ID
	}{
		{"newest 3", state.Filter{Limit: 3}, []job.ID{8, 9, 10}},
		{"limit 1", state.Filter{Limit: 1}, []job.ID{10}},
		{"limit above count", state.Filter{Limit: 50}, []job.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"limit with user", state.Filter{User: "alice", Limit: 2}, []job.ID{7, 9}},
		{"limit with states", state.Filter{States: []job.State{job.Queued}, Limit: 2}, []job.ID{8, 9}},
		{"limit with user and states", state.Filter{User: "bob", States: []job.State{job.Queued}, Limit: 3}, []job.ID{4, 6, 8}},
		{"oldest 3", state.Filter{First: 3}, []job.ID{1, 2, 3}},
		{"oldest 2 of alice's after 3", state.Filter{User: "alice", First: 2, After: 3}, []job.ID{5, 7}},
		{"oldest queued after 8", state.Filter{States: []job.State{job.Queued}, First: 5, After: 8}, []job.ID{9}},
		{"after 8", state.Filter{After: 8}, []job.ID{9, 10}},
		{"newest 2 after 5", state.Filter{Limit: 2, After: 5}, []job.ID{9, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(tc.f)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.f, err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, ids(got), tc.want)
			}
		})
	}
	if _, err := s.List(state.Filter{Limit: -1}); err == nil {
		t.Error("List with a negative limit: no error")
	}
	if _, err := s.List(state.Filter{Limit: 1, First: 1}); err == nil {
		t.Error("List with a limit of the newest and of the oldest: no error")
	}
}

func testConcurrentSubmit(t *testing.T, s state.Store) {
	const workers, each = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	got := make(chan job.ID, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				j, err := s.Submit(simple(fmt.Sprintf("u%d", w), fmt.Sprint(i)))
				if err != nil {
					errs <- err
					return
				}
				got <- j.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	close(got)
	for err := range errs {
		t.Errorf("Submit: %v", err)
	}
	var all []job.ID
	for id := range got {
		all = append(all, id)
	}
	slices.Sort(all)
	want := make([]job.ID, workers*each)
	for i := range want {
		want[i] = job.ID(i + 1)
	}
	if !slices.Equal(all, want) {
		t.Errorf("ids = %v, want 1..%d once each", all, workers*each)
	}
	listed, err := s.List(state.Filter{})
	if err != nil || !slices.Equal(ids(listed), want) {
		t.Errorf("List = %v, %v; want 1..%d", ids(listed), err, workers*each)
	}
}

// SameUses reports unless got and want hold the same uses, field by
// field, times compared with Equal.
func SameUses(t *testing.T, what string, got, want []job.Use) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.User == w.User && g.Share == w.Share && g.Started.Equal(w.Started) && g.Ended.Equal(w.Ended)
	}
	if !ok {
		t.Errorf("%s:\n got %s\nwant %s", what, fmtUses(got), fmtUses(want))
	}
}

func fmtUses(us []job.Use) string {
	var b strings.Builder
	b.WriteString("[")
	for i, u := range us {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "{%s %s..%s x%g}", u.User, u.Started.UTC().Format(time.RFC3339Nano), u.Ended.UTC().Format(time.RFC3339Nano), u.Share)
	}
	b.WriteString("]")
	return b.String()
}

// usesFromRecords is what Uses(since) must return, worked out from the job
// records (List): the uses of the ended jobs that started, ended at or
// after since, by end time, then id.
func usesFromRecords(t *testing.T, s state.Store, since time.Time) []job.Use {
	t.Helper()
	all, err := s.List(state.Filter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []job.Use
	for _, j := range all {
		for _, u := range j.Runs {
			if !u.Ended.Before(since) {
				out = append(out, u)
			}
		}
		if !j.State.Terminal() {
			continue
		}
		if u, ok := j.Use(); ok && !u.Ended.Before(since) {
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(a, b job.Use) int { return a.Ended.Compare(b.Ended) })
	return out
}

func update(t *testing.T, s state.Store, id job.ID, fn func(*job.Job)) job.Job {
	t.Helper()
	got, err := s.Update(id, func(j *job.Job) error { fn(j); return nil })
	if err != nil {
		t.Fatalf("Update(%d): %v", id, err)
	}
	return got
}

func testUses(t *testing.T, s state.Store) {
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	check := func(since time.Time, want ...job.Use) {
		t.Helper()
		got, err := s.Uses(since)
		if err != nil {
			t.Fatalf("Uses(%v): %v", since, err)
		}
		SameUses(t, fmt.Sprintf("Uses(%v)", since), got, want)
		SameUses(t, fmt.Sprintf("Uses(%v) against the records", since), got, usesFromRecords(t, s, since))
	}
	check(time.Time{}) // an empty store

	// A job that never started used nothing, ended or not.
	never := submit(t, s, simple("alice", "never"))
	check(time.Time{})
	update(t, s, never.ID, func(j *job.Job) { j.State, j.EndedAt = job.Cancelled, at(5) })
	check(time.Time{})

	// Launching and running: not ended, so not in Uses (Active has them).
	b := submit(t, s, simple("bob", "b"))
	update(t, s, b.ID, func(j *job.Job) {
		j.State, j.StartedAt = job.Launching, at(0)
		j.Placement = job.Placement{Host: "gpu01", GPUs: []string{"GPU-a", "GPU-b"}, Indexes: []int{0, 1}}
	})
	check(time.Time{})
	setState(t, s, b.ID, job.Running)
	check(time.Time{})
	update(t, s, b.ID, func(j *job.Job) { j.State, j.EndedAt = job.Succeeded, at(60) })
	ub := job.Use{User: "bob", Started: at(0), Ended: at(60), Share: 2} // no share recorded: one per GPU
	check(time.Time{}, ub)

	// Oldest end first, not submit order.
	c := submit(t, s, simple("carol", "c"))
	update(t, s, c.ID, func(j *job.Job) {
		j.State, j.StartedAt = job.Running, at(10)
		j.Placement = job.Placement{Host: "gpu02", GPUs: []string{"GPU-c"}, Indexes: []int{0}, Share: 0.5}
	})
	update(t, s, c.ID, func(j *job.Job) { j.State, j.EndedAt = job.Failed, at(30) })
	uc := job.Use{User: "carol", Started: at(10), Ended: at(30), Share: 0.5}
	check(time.Time{}, uc, ub)

	// Submitted already ended (another zone's clock): in Uses from Submit
	// on; the same end as bob's, so after it (id order).
	zone := time.FixedZone("UTC+2", 2*3600)
	submit(t, s, job.Job{User: "dave", State: job.Succeeded, Spec: job.Spec{GPUs: 1},
		Placement: job.Placement{Host: "gpu03", GPUs: []string{"GPU-d"}, Indexes: []int{0}, Share: 1},
		StartedAt: at(20).In(zone), EndedAt: at(60).In(zone)})
	ud := job.Use{User: "dave", Started: at(20), Ended: at(60), Share: 1}
	check(time.Time{}, uc, ub, ud)

	// Ended without a recorded end: it counts nothing (Ended = Started).
	e := submit(t, s, simple("erin", "e"))
	update(t, s, e.ID, func(j *job.Job) {
		j.State, j.StartedAt = job.Running, at(40)
		j.Placement = job.Placement{Host: "gpu01", GPUs: []string{"GPU-e"}, Indexes: []int{2}}
	})
	setState(t, s, e.ID, job.Lost)
	ue := job.Use{User: "erin", Started: at(40), Ended: at(40), Share: 1}
	check(time.Time{}, uc, ue, ub, ud)

	// since: ended at or after it.
	check(at(30), uc, ue, ub, ud)
	check(at(30).Add(time.Nanosecond), ue, ub, ud)
	check(at(60).In(zone), ub, ud)
	check(at(60).Add(time.Nanosecond))
	check(at(24 * 60))

	// Requeued after running: still no use.
	f := submit(t, s, simple("frank", "f"))
	update(t, s, f.ID, func(j *job.Job) {
		j.State, j.StartedAt = job.Running, at(50)
		j.Placement = job.Placement{Host: "gpu02", GPUs: []string{"GPU-f"}, Indexes: []int{1}}
	})
	update(t, s, f.ID, func(j *job.Job) { j.State, j.StartedAt, j.Placement = job.Queued, time.Time{}, job.Placement{} })
	check(time.Time{}, uc, ue, ub, ud)

	// An ended job's other fields change: its one use stays.
	update(t, s, b.ID, func(j *job.Job) { j.Reason = "exit status 0" })
	check(time.Time{}, uc, ue, ub, ud)
	// Its end changes: the use moves (none is left at the old end).
	update(t, s, b.ID, func(j *job.Job) { j.EndedAt = at(35) })
	ub.Ended = at(35)
	check(time.Time{}, uc, ub, ue, ud)
	check(at(60), ud)
	// Its share changes: the use follows.
	update(t, s, c.ID, func(j *job.Job) { j.Placement.Share = 0.25 })
	uc.Share = 0.25
	check(time.Time{}, uc, ub, ue, ud)

	// Aborted and refused updates leave the uses as they were.
	boom := errors.New("boom")
	if _, err := s.Update(b.ID, func(j *job.Job) error { j.EndedAt = at(90); return boom }); !errors.Is(err, boom) {
		t.Fatalf("aborted Update: %v", err)
	}
	if _, err := s.Update(c.ID, func(j *job.Job) error { j.State, j.EndedAt = job.Running, time.Time{}; return nil }); !errors.Is(err, state.ErrTerminal) {
		t.Fatalf("refused Update: %v, want ErrTerminal", err)
	}
	check(time.Time{}, uc, ub, ue, ud)

	// A requeue records the run it ended (Runs): it counts at once, and
	// still when the job ends after its next run, beside that run.
	g := submit(t, s, simple("gina", "g"))
	run1 := job.Use{User: "gina", Started: at(100), Ended: at(110), Share: 1}
	update(t, s, g.ID, func(j *job.Job) { j.Runs = []job.Use{run1} })
	check(time.Time{}, uc, ub, ue, ud, run1)
	update(t, s, g.ID, func(j *job.Job) {
		j.State, j.StartedAt = job.Running, at(120)
		j.Placement = job.Placement{Host: "gpu01", GPUs: []string{"GPU-g"}, Indexes: []int{3}, Share: 1}
	})
	update(t, s, g.ID, func(j *job.Job) { j.State, j.EndedAt = job.Succeeded, at(130) })
	run2 := job.Use{User: "gina", Started: at(120), Ended: at(130), Share: 1}
	check(time.Time{}, uc, ub, ue, ud, run1, run2)
	check(at(111), run2)
}

// testUsesOrder: many ends out of submit order, with ties, come back by
// end time, then id.
func testUsesOrder(t *testing.T, s state.Store) {
	t0 := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	const n = 40
	end := map[string]time.Time{}
	for i := range n {
		j := submit(t, s, simple(fmt.Sprintf("u%02d", i+1), fmt.Sprint(i)))
		if i%5 == 4 { // some never end
			setState(t, s, j.ID, job.Running)
			continue
		}
		end[j.User] = t0.Add(time.Duration(i*7%11) * time.Hour)
		update(t, s, j.ID, func(j *job.Job) {
			j.State, j.StartedAt, j.EndedAt = job.Running, t0.Add(-time.Hour), end[j.User]
			j.Placement = job.Placement{Host: "h", GPUs: []string{"GPU-" + j.User}, Indexes: []int{0}}
		})
		setState(t, s, j.ID, job.Succeeded)
	}
	for _, since := range []time.Time{{}, t0, t0.Add(3 * time.Hour), t0.Add(10 * time.Hour), t0.Add(11 * time.Hour)} {
		got, err := s.Uses(since)
		if err != nil {
			t.Fatalf("Uses: %v", err)
		}
		want := 0
		for _, e := range end {
			if !e.Before(since) {
				want++
			}
		}
		if len(got) != want {
			t.Errorf("Uses(%v): %d uses, want %d", since, len(got), want)
		}
		for i, u := range got {
			if !u.Ended.Equal(end[u.User]) || u.Ended.Before(since) {
				t.Errorf("Uses(%v)[%d] = %s ended %v, want its end %v, at or after since", since, i, u.User, u.Ended, end[u.User])
			}
			if i > 0 {
				p := got[i-1]
				if c := p.Ended.Compare(u.Ended); c > 0 || c == 0 && p.User >= u.User {
					t.Errorf("Uses(%v): %s (%v) before %s (%v): not by end, then id", since, p.User, p.Ended, u.User, u.Ended)
				}
			}
		}
		SameUses(t, "Uses against the records", got, usesFromRecords(t, s, since))
	}
}

// SubmitAll: consecutive ids after the ones before, in order, stamped
// before they are written; all or none.
func testSubmitAll(t *testing.T, s state.Store) {
	first := submit(t, s, simple("u", "before"))
	jobs := make([]job.Job, 1000)
	for i := range jobs {
		jobs[i] = simple("u", "task")
	}
	var stamped job.ID
	got, err := s.SubmitAll(jobs, func(id job.ID, js []job.Job) {
		stamped = id
		for i := range js {
			js[i].Spec.Extra = map[string]string{"first": strconv.FormatUint(uint64(id), 10)}
		}
	})
	if err != nil {
		t.Fatalf("SubmitAll: %v", err)
	}
	if len(got) != 1000 || stamped != first.ID+1 || got[0].ID != first.ID+1 || got[999].ID != first.ID+1000 {
		t.Fatalf("SubmitAll: %d jobs, stamped %d, ids %d..%d", len(got), stamped, got[0].ID, got[len(got)-1].ID)
	}
	for i, j := range got {
		back := get(t, s, j.ID)
		if back.State != job.Queued || back.SubmittedAt.IsZero() || back.Spec.Extra["first"] != strconv.FormatUint(uint64(stamped), 10) || j.ID != first.ID+1+job.ID(i) {
			t.Fatalf("job %d: %+v", j.ID, back)
		}
	}
	if next := submit(t, s, simple("u", "after")); next.ID != first.ID+1001 {
		t.Errorf("next id %d, want %d", next.ID, first.ID+1001)
	}
	// One bad job: nothing is stored.
	bad := []job.Job{simple("u", "ok"), {ID: 7}}
	if _, err := s.SubmitAll(bad, nil); err == nil {
		t.Error("SubmitAll took a job with an id")
	}
	if _, err := s.Get(first.ID + 1002); err == nil {
		t.Error("a refused SubmitAll stored a job")
	}
}
