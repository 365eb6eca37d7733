package control_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// remover is a fake control.DirRemover: it records each call, answers
// each directory as removed (4 KiB), and fails where told.
type remover struct {
	mu    sync.Mutex
	calls map[string][][]job.WorkerDir // by host, one entry per call
	err   map[string]error             // RemoveDirs on that host fails
	fail  map[job.WorkerDir]string     // that directory could not be removed
	gone  map[job.WorkerDir]bool       // that directory was not there
}

func (r *remover) RemoveDirs(_ context.Context, host string, dirs []job.WorkerDir) ([]job.DirRemoval, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host] = append(r.calls[host], slices.Clone(dirs))
	if err := r.err[host]; err != nil {
		return nil, err
	}
	out := make([]job.DirRemoval, len(dirs))
	for i, d := range dirs {
		switch {
		case r.fail[d] != "":
			out[i].Err = r.fail[d]
		case r.gone[d]:
			out[i].Gone = true
		default:
			out[i].Bytes = 4096
		}
	}
	return out, nil
}

// noContact is what launch.Workers returns for a host that did not answer.
type noContact struct{}

func (noContact) Error() string { return "ssh: connect: timeout" }
func (noContact) Is(err error) bool {
	return err == job.ErrNoContact
}

// keepRig is a pass over a Mem store, hosts a and b (and gone, which is
// not in the inventory), fake workers and a fake remover, on a clock the
// test moves: keep_job_dirs 1h, keep_jobs 10h.
type keepRig struct {
	*rig
	rm  *remover
	now time.Time
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newKeepRig(t *testing.T) *keepRig {
	t.Helper()
	k := &keepRig{rig: &rig{store: state.NewMem(), lab: &lab{hosts: []sched.Host{a100x4("a"), a100x4("b")}}, workers: newWorkers(), events: &events{}},
		rm: &remover{calls: map[string][][]job.WorkerDir{}, err: map[string]error{}, fail: map[job.WorkerDir]string{}, gone: map[job.WorkerDir]bool{}}, now: t0}
	ctl, err := control.New(control.Options{Store: k.store, Keeper: k.store, Jobs: k.store, Snapshots: k.lab, Workers: k.workers, Events: k.events, Remover: k.rm,
		Now: func() time.Time { return k.now }, Known: func(h string) bool { return h != "gone" },
		Keep: job.Keep{JobDirs: time.Hour, Jobs: 10 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	k.ctl = ctl
	return k
}

// ended stores a job that ran on hosts (its attempts' hosts, in order)
// and ended at end.
func (k *keepRig) ended(t *testing.T, end time.Time, hosts ...string) job.Job {
	t.Helper()
	j := k.submit(t, 5, "true")
	u, err := k.store.Update(j.ID, func(x *job.Job) error {
		last := hosts[len(hosts)-1]
		x.State, x.Attempt, x.AttemptHosts = job.Succeeded, len(hosts), hosts
		x.Placement = job.Placement{Host: last, GPUs: []string{"GPU-3"}, Indexes: []int{3}}
		x.Remote = job.Remote{Dir: fmt.Sprintf("/home/u/.gssh/jobs/c-%d.%d", x.ID, len(hosts)), PID: 99}
		x.StartedAt, x.EndedAt = end.Add(-time.Minute), end
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// running stores a job running on host (so that every pass polls it).
func (k *keepRig) running(t *testing.T, host string) job.Job {
	t.Helper()
	j := k.submit(t, 5, "sleep", "100000")
	u, err := k.store.Update(j.ID, func(x *job.Job) error {
		x.State, x.Attempt, x.StartedAt = job.Running, 1, k.now
		x.Placement = job.Placement{Host: host, GPUs: []string{"GPU-0"}, Indexes: []int{0}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	k.workers.status[j.ID] = job.Status{State: job.Running}
	return u
}

func (k *keepRig) calls(host string) [][]job.WorkerDir {
	k.rm.mu.Lock()
	defer k.rm.mu.Unlock()
	return slices.Clone(k.rm.calls[host])
}

// A pass removes the directories of the jobs that ended keep_job_dirs
// ago on the hosts it reached, one call per host, each attempt's
// directory (the current one as recorded, earlier ones by their default
// names on their own hosts), records it in the job, and never again;
// a job with a directory on a host the pass did not reach waits, and one
// on a host gone from the inventory is recorded kept without a call.
func TestHousekeepDirs(t *testing.T) {
	k := newKeepRig(t)
	two := k.ended(t, t0, "b", "a") // 1: attempt 1 on b, attempt 2 on a
	one := k.ended(t, t0, "a")      // 2
	late := k.ended(t, t0.Add(50*time.Minute), "a")
	lost := k.ended(t, t0, "gone") // 4: its host left the inventory
	k.running(t, "a")

	k.now = t0.Add(30 * time.Minute)
	if res := k.pass(t); res.Housekeeping.Did() || len(k.calls("a")) != 0 {
		t.Fatalf("before keep_job_dirs: %+v, calls %v", res.Housekeeping, k.calls("a"))
	}
	k.now = t0.Add(61 * time.Minute)
	res := k.pass(t) // polls a only: nothing queued, no probe
	if got := k.calls("a"); len(got) != 1 || !slices.Equal(got[0], []job.WorkerDir{{Job: one.ID, Attempt: 1, Dir: one.Remote.Dir, User: one.User}}) {
		t.Errorf("calls on a = %v, want one call for job 2's directory", got)
	}
	if len(k.calls("b")) != 0 {
		t.Errorf("b was not reached by the pass, yet called: %v", k.calls("b"))
	}
	hk := res.Housekeeping
	if want := []control.HostDirs{{Host: "a", Jobs: 1, Removed: 1, Bytes: 4096}}; !slices.Equal(hk.Dirs, want) {
		t.Errorf("Housekeeping.Dirs = %+v, want %+v", hk.Dirs, want)
	}
	if len(hk.Kept) != 1 || hk.Kept[0].ID != lost.ID || !strings.Contains(hk.Kept[0].Housekept.Kept, "its host gone is no longer in the inventory") {
		t.Errorf("Housekeeping.Kept = %+v", hk.Kept)
	}
	if h := k.get(t, one.ID).Housekept; h == nil || h.Removed != 1 || h.Bytes != 4096 || !h.At.Equal(k.now) || h.Kept != "" {
		t.Errorf("job 2's Housekept = %+v", h)
	}
	if k.get(t, two.ID).Housekept != nil || k.get(t, late.ID).Housekept != nil {
		t.Error("a job was marked that was not done")
	}
	if len(res.Errors) != 0 {
		t.Errorf("errors: %v", res.Errors)
	}

	// Again: nothing new for a; job 1 still waits for b.
	k.now = t0.Add(62 * time.Minute)
	if res := k.pass(t); res.Housekeeping.Did() || len(k.calls("a")) != 1 {
		t.Errorf("second pass: %+v, calls on a %v", res.Housekeeping, k.calls("a"))
	}
	// A queued job makes the pass probe every host: b is reached.
	k.now = t0.Add(2 * time.Hour)
	k.submitSpec(t, job.Spec{Argv: []string{"true"}, Host: "nowhere", GPUs: 1, Workdir: "~"})
	res = k.pass(t)
	if got := k.calls("b"); len(got) != 1 || !slices.Equal(got[0], []job.WorkerDir{{Job: two.ID, Attempt: 1, User: two.User}}) {
		t.Errorf("calls on b = %v, want job 1's attempt 1 by its default name", got)
	}
	got := k.calls("a")
	if want := []job.WorkerDir{{Job: two.ID, Attempt: 2, Dir: two.Remote.Dir, User: two.User}, {Job: late.ID, Attempt: 1, Dir: late.Remote.Dir, User: late.User}}; len(got) != 2 || !slices.Equal(got[1], want) {
		t.Errorf("calls on a = %v, want a second one with %v", got, want)
	}
	if h := k.get(t, two.ID).Housekept; h == nil || h.Removed != 2 || h.Bytes != 8192 {
		t.Errorf("job 1's Housekept = %+v, want both attempts' directories", h)
	}
	if want := []control.HostDirs{{Host: "a", Jobs: 2, Removed: 2, Bytes: 8192}, {Host: "b", Jobs: 1, Removed: 1, Bytes: 4096}}; !slices.Equal(res.Housekeeping.Dirs, want) {
		t.Errorf("Housekeeping.Dirs = %+v, want %+v", res.Housekeeping.Dirs, want)
	}
}

// One pass removes at most MaxDirsPerHost directories on a host, the
// oldest first; the next pass the rest.
func TestHousekeepBound(t *testing.T) {
	k := newKeepRig(t)
	n := control.MaxDirsPerHost + 20
	for i := range n {
		k.ended(t, t0.Add(time.Duration(i)*time.Second), "a")
	}
	k.running(t, "a")
	k.now = t0.Add(2 * time.Hour)
	if res := k.pass(t); len(res.Housekeeping.Dirs) != 1 || res.Housekeeping.Dirs[0].Removed != control.MaxDirsPerHost {
		t.Errorf("first pass: %+v", res.Housekeeping.Dirs)
	}
	if got := k.calls("a"); len(got) != 1 || got[0][0].Job != 1 || len(got[0]) != control.MaxDirsPerHost {
		t.Errorf("first call: %d calls", len(got))
	}
	if res := k.pass(t); len(res.Housekeeping.Dirs) != 1 || res.Housekeeping.Dirs[0].Removed != 20 {
		t.Errorf("second pass: %+v", res.Housekeeping.Dirs)
	}
	if res := k.pass(t); res.Housekeeping.Did() || len(k.calls("a")) != 2 {
		t.Errorf("third pass: %+v, %d calls", res.Housekeeping, len(k.calls("a")))
	}
}

// A host that stops answering mid-pass keeps its jobs' directories for a
// later pass, quietly; any other failure is reported, and also retried;
// a directory that cannot be removed, or was gone, is recorded so.
func TestHousekeepFailures(t *testing.T) {
	k := newKeepRig(t)
	j := k.ended(t, t0, "a")
	k.running(t, "a")
	k.now = t0.Add(2 * time.Hour)
	k.rm.err["a"] = fmt.Errorf("remove job directories on a: %w", noContact{})
	if res := k.pass(t); res.Housekeeping.Did() || len(res.Errors) != 0 || k.get(t, j.ID).Housekept != nil {
		t.Errorf("no contact: %+v %v", res.Housekeeping, res.Errors)
	}
	k.rm.err["a"] = errors.New("remove job directories on a: sh: du: not found")
	if res := k.pass(t); len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "du: not found") || k.get(t, j.ID).Housekept != nil {
		t.Errorf("failure: %v", res.Errors)
	}
	delete(k.rm.err, "a")
	k.rm.fail[job.WorkerDir{Job: j.ID, Attempt: 1, Dir: j.Remote.Dir, User: j.User}] = "rm -rf could not remove it (permissions?)"
	g := k.ended(t, t0, "a")
	k.rm.gone[job.WorkerDir{Job: g.ID, Attempt: 1, Dir: g.Remote.Dir, User: g.User}] = true
	res := k.pass(t)
	if h := k.get(t, j.ID).Housekept; h == nil || h.Removed != 0 || h.Kept != "attempt 1 on a: rm -rf could not remove it (permissions?)" {
		t.Errorf("failed removal: Housekept %+v", h)
	}
	if h := k.get(t, g.ID).Housekept; h == nil || h.Removed != 0 || h.Kept != "" {
		t.Errorf("gone: Housekept %+v", h)
	}
	if len(res.Housekeeping.Dirs) != 0 || len(res.Housekeeping.Kept) != 1 {
		t.Errorf("Housekeeping = %+v", res.Housekeeping)
	}
}

// The records of jobs that ended keep_jobs ago move to the history, and
// are read as before; the pass reports how many.
func TestHousekeepHistory(t *testing.T) {
	k := newKeepRig(t)
	old := k.ended(t, t0, "a")
	recent := k.ended(t, t0.Add(5*time.Hour), "a")
	k.now = t0.Add(11 * time.Hour)
	res := k.pass(t)
	if res.Housekeeping.Moved != 1 {
		t.Errorf("moved %d, want 1", res.Housekeeping.Moved)
	}
	if got := k.get(t, old.ID); got.State != job.Succeeded {
		t.Errorf("job in the history: %+v", got)
	}
	if res := k.pass(t); res.Housekeeping.Moved != 0 {
		t.Errorf("moved again: %d", res.Housekeeping.Moved)
	}
	all, err := k.store.List(state.Filter{Since: t0.Add(time.Hour)})
	if err != nil || len(all) != 1 || all[0].ID != recent.ID {
		t.Errorf("List since +1h = %v %v", ids(all), err)
	}
}
