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
