package control_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

const GiB = 1 << 30

func ptr[T any](v T) *T { return &v }

// a100x4 is a host like the a100x4 fixture: GPUs 0-2 busy with other
// people's processes, GPU 3 idle; 80 GiB each, 10% reserve.
func a100x4(name string) sched.Host {
	var gs []gpuinfo.GPU
	for i := range 4 {
		g := gpuinfo.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Health: gpuinfo.HealthOK, ProcsKnown: true,
			MemTotal: ptr(uint64(80 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(80 * GiB)), Procs: []gpuinfo.Proc{}}
		if i < 3 {
			g.Procs = []gpuinfo.Proc{{PID: 100 + i, Name: "python", User: "someone", GPUUUID: g.UUID}}
			*g.MemUsed, *g.MemFree = 20*GiB, 60*GiB
		}
		gs = append(gs, g)
	}
	return sched.Host{Name: name, ReservePct: 10, Snapshot: gpuinfo.Snapshot{Host: name, State: gpuinfo.HostOK, GPUs: gs}}
}

// lab is a fixed set of hosts; it counts how often it was asked.
type lab struct {
	mu    sync.Mutex
	hosts []sched.Host
	asked int
	onAsk func() // called while probing (a Ctrl-C midway)
}

func (l *lab) Hosts(context.Context) ([]sched.Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked++
	if l.onAsk != nil {
		l.onAsk()
	}
	return l.hosts, nil
}

// workers simulates the worker side on the clock of the test: a job's
// command "sleep N" runs N seconds, "exit N" ends at once with status N;
// anything else runs until cancelled.
type workers struct {
	mu       sync.Mutex
	jobs     map[job.ID]*simJob
	startErr error // every Start fails with it
	// With a startErr wrapping job.ErrOutcomeUnknown: what the lost launch
	// left on the worker: "" nothing, "dir" a directory without pid, "run"
	// a running job.
	unknownLeft string
	onStart     func(job.Job)    // called as Start begins, without the lock (a cancel racing the launch)
	onStarted   func(job.Job)    // called once Start made the job run, before it returns
	onAbandoned func()           // called after an Abandon, without the lock (a pass racing a cancel)
	polls       int              // Poll calls
	pollErr     map[string]error // Poll of that host fails
	status      map[job.ID]job.Status
	cancelled   []string // "id grace"
	abandons    []string // "id attempt outcome"
	attempts    []int    // the attempt of every Start
	restarts    []int    // the Restarts of every Start
	// ignoreTerm are jobs that go on after a preemption's SIGTERM (they
	// checkpoint, or hang) until a Stop that kills.
	ignoreTerm map[job.ID]bool
	preempts   int // Stops for a preemption (SIGTERM only)
}

type simJob struct {
	j         job.Job
	started   time.Time
	runFor    time.Duration // < 0: until cancelled
	exit      int
	ended     bool
	pending   bool // directory made, no pid yet (a launch cut short)
	abandoned bool
}

func newWorkers() *workers {
	return &workers{jobs: map[job.ID]*simJob{}, pollErr: map[string]error{}, status: map[job.ID]job.Status{}}
}

func (w *workers) Start(_ context.Context, j job.Job) (job.Remote, error) {
	if w.onStart != nil {
		w.onStart(j)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts = append(w.attempts, j.Attempt)
	w.restarts = append(w.restarts, j.Restarts)
	if s, ok := w.jobs[j.ID]; ok && s.j.Attempt == j.Attempt {
		return job.Remote{}, errors.New("launch on ctl: job directory exists already")
	}
	if w.startErr != nil {
		switch {
		case !errors.Is(w.startErr, job.ErrOutcomeUnknown), w.unknownLeft == "":
		case w.unknownLeft == "dir":
			w.jobs[j.ID] = &simJob{j: j, pending: true, runFor: -1}
		default:
			w.jobs[j.ID] = &simJob{j: j, started: time.Now(), runFor: -1}
		}
		return job.Remote{}, w.startErr
	}
	s := &simJob{j: j, started: time.Now(), runFor: -1}
	if a := j.Spec.Argv; len(a) == 2 {
		n, _ := strconv.Atoi(a[1])
		switch a[0] {
		case "sleep":
			s.runFor = time.Duration(n) * time.Second
		case "exit":
			s.runFor, s.exit = 0, n
		}
	}
	w.jobs[j.ID] = s
	if w.onStarted != nil {
		w.mu.Unlock()
		w.onStarted(j)
		w.mu.Lock()
	}
	return job.Remote{Dir: fmt.Sprintf("/home/u/.gssh/jobs/c-%d.%d", j.ID, j.Attempt), PID: 1000 + int(j.ID)}, nil
}

func (w *workers) Poll(_ context.Context, host string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	if err := w.pollErr[host]; err != nil {
		return nil, err
	}
	out := map[job.ID]job.Status{}
	for _, j := range jobs {
		if st, ok := w.status[j.ID]; ok {
			out[j.ID] = st
			continue
		}
		s, ok := w.jobs[j.ID]
		switch {
		case !ok:
			out[j.ID] = job.Status{State: job.Lost, Missing: true, Reason: "the job directory is gone from the worker"}
		case s.abandoned:
			out[j.ID] = job.Status{State: job.Lost, Abandoned: true}
		case s.pending:
			out[j.ID] = job.Status{State: job.Launching}
		case s.ended:
			out[j.ID] = job.Status{State: job.Cancelled, Reason: "cancelled"}
		case s.runFor >= 0 && time.Since(s.started) >= s.runFor:
			code := s.exit
			st := job.Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0", EndedAt: s.started.Add(s.runFor), Runtime: s.runFor}
			if code != 0 {
				st.State, st.Reason = job.Failed, fmt.Sprintf("exit status %d", code)
			}
			out[j.ID] = st
		default:
			out[j.ID] = job.Status{State: job.Running, PID: 1000 + int(j.ID)}
		}
	}
	return out, nil
}

func (w *workers) Abandon(_ context.Context, j job.Job) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.jobs[j.ID]
	if !ok || s.j.Attempt != j.Attempt {
		s, ok = &simJob{j: j}, false
		w.jobs[j.ID] = s
	}
	outcome := "started"
	if s.pending || s.abandoned || !ok {
		s.pending, s.abandoned, outcome = false, true, "abandoned"
	}
	w.abandons = append(w.abandons, fmt.Sprintf("%d %d %s", j.ID, j.Attempt, outcome))
	if hook := w.onAbandoned; hook != nil {
		w.onAbandoned = nil
		w.mu.Unlock()
		hook()
		w.mu.Lock()
	}
	return outcome == "abandoned", nil
}

// Stop implements control.Workers as launch's end gate does: a job
// whose command has ended on its own (its runFor is over) is reported
// ended, not stopped; so is one whose status says the worker's walltime
// stop ended it (Timeout).
func (w *workers) Stop(_ context.Context, j job.Job, grace time.Duration, why job.State) (job.Stopped, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancelled = append(w.cancelled, fmt.Sprintf("%d %s", j.ID, grace))
	if why == job.Preempting {
		w.preempts++
		if w.ignoreTerm[j.ID] {
			return job.Stopped{Signalled: 1}, nil
		}
	}
	s, ok := w.jobs[j.ID]
	if st, set := w.status[j.ID]; why != "" && set && st.State == job.Timeout && why != job.Timeout {
		delete(w.status, j.ID)
		return job.Stopped{Ended: &st}, nil
	}
	if why != "" && ok && !s.ended && s.runFor >= 0 && time.Since(s.started) >= s.runFor {
		code := s.exit
		st := job.Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0", Runtime: s.runFor}
		if code != 0 {
			st.State, st.Reason = job.Failed, fmt.Sprintf("exit status %d", code)
		}
		s.ended = true
		return job.Stopped{Ended: &st}, nil
	}
	if ok {
		s.ended = true
	}
	delete(w.status, j.ID)
	return job.Stopped{Signalled: 1}, nil
}

// events records what the pass reports.
type events struct {
	mu   sync.Mutex
	seen []string // "kind id state"
}

func (e *events) Emit(ev control.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, fmt.Sprintf("%s %d %s", ev.Kind, ev.Job.ID, ev.Job.State))
}

type rig struct {
	store   *state.Mem
	lab     *lab
	workers *workers
	events  *events
	ctl     *control.Controller
}

func newRig(t *testing.T, policy sched.Policy, hosts ...sched.Host) *rig {
	t.Helper()
	r := &rig{store: state.NewMem(), lab: &lab{hosts: hosts}, workers: newWorkers(), events: &events{}}
	ctl, err := control.New(control.Options{Store: r.store, Changes: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Events: r.events, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	return r
}

func (r *rig) submit(t *testing.T, prio int, argv ...string) job.Job {
	t.Helper()
	return r.submitSpec(t, job.Spec{Argv: argv, Host: "auto", GPUs: 1, Workdir: "~", Priority: prio})
}

func (r *rig) submitSpec(t *testing.T, s job.Spec) job.Job {
	t.Helper()
	j, err := r.store.Submit(job.Job{User: "u", Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (r *rig) pass(t *testing.T) control.Result {
	t.Helper()
	res, err := r.ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ctl.CheckActive(); err != nil {
		t.Errorf("after the pass, the active jobs the controller keeps are not the store's: %v", err)
	}
	return res
}

func (r *rig) get(t *testing.T, id job.ID) job.Job {
	t.Helper()
	j, err := r.store.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func ids(js []job.Job) []job.ID {
	out := []job.ID{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// Priority then submit order; pending reasons from the planner; the next
// pass records the end and starts the next job.
func TestPassOrderAndPendingReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		a := r.submit(t, 5, "sleep", "1")
		b := r.submit(t, 0, "sleep", "1") // first despite its later id
		c := r.submit(t, 5, "sleep", "1")
		res := r.pass(t)
		if !slices.Equal(ids(res.Started), []job.ID{b.ID}) || res.Started[0].Placement.Indexes[0] != 3 || res.Started[0].State != job.Running {
			t.Fatalf("started %+v", res.Started)
		}
		if !res.Started[0].StartedAt.Equal(time.Now()) {
			t.Errorf("started at %v, want the pass's now %v", res.Started[0].StartedAt, time.Now())
		}
		for _, id := range []job.ID{a.ID, c.ID} {
			if j := r.get(t, id); j.State != job.Queued || !strings.Contains(j.Reason, "ctl: 0/4 GPUs free") || j.ReasonCode != string(sched.CodeForeign) {
				t.Errorf("job %d: %s %q (%s)", id, j.State, j.Reason, j.ReasonCode)
			}
		}
		if !slices.Equal(ids(res.Pending), []job.ID{a.ID, c.ID}) {
			t.Errorf("pending %v", ids(res.Pending))
		}

		time.Sleep(2 * time.Second) // the started job ends (virtual time)
		res = r.pass(t)
		if !slices.Equal(ids(res.Finished), []job.ID{b.ID}) || res.Finished[0].State != job.Succeeded || !slices.Equal(ids(res.Started), []job.ID{a.ID}) {
			t.Errorf("second pass: finished %+v started %+v", res.Finished, res.Started)
		}
		if got := r.get(t, b.ID); !got.EndedAt.Equal(got.StartedAt.Add(time.Second)) {
			t.Errorf("ended %v, started %v: want the worker's end", got.EndedAt, got.StartedAt)
		}
		want := []string{"job_start 2 running", "job_end 2 succeeded", "job_start 1 running"}
		if !slices.Equal(r.events.seen, want) {
			t.Errorf("events %q, want %q", r.events.seen, want)
		}
	})
}

// A pass writes a pending reason only when it changed.
func TestPassPendingReasonWrittenOnce(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	r.submit(t, 5, "sleep", "100")
	j := r.submit(t, 5, "sleep", "100")
	r.pass(t)
	first := r.get(t, j.ID)
	counting := &countingStore{Mem: r.store}
	ctl, _ := control.New(control.Options{Store: counting, Keeper: counting, Jobs: counting, Snapshots: r.lab, Workers: r.workers})
	res, err := ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if counting.updates != 0 || r.get(t, j.ID).Reason != first.Reason || len(res.Pending) != 0 || res.Queued != 1 {
		t.Errorf("%d updates for an unchanged reason; pending %v, %d queued", counting.updates, ids(res.Pending), res.Queued)
	}
}

// countingStore counts updates; failReason makes reason writes fail.
type countingStore struct {
	*state.Mem
	updates    int
	failReason bool
}

func (s *countingStore) Update(id job.ID, fn func(*job.Job) error) (job.Job, error) {
	s.updates++
	if s.failReason {
		return job.Job{}, errors.New("disk full")
	}
	return s.Mem.Update(id, fn)
}

// UpdateEach counts and fails each job's update as Update does (a pass
// writes its pending reasons through it).
func (s *countingStore) UpdateEach(ids []job.ID, fn func(int, *job.Job) error) ([]job.Job, []error, error) {
	out, errs := make([]job.Job, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		out[i], errs[i] = s.Update(id, func(x *job.Job) error { return fn(i, x) })
	}
	return out, errs, nil
}

// A store error while writing a pending reason is reported, not dropped.
func TestPassReportsReasonWriteError(t *testing.T) {
	r := newRig(t, sched.Policy{}, sched.Host{Name: "down", Snapshot: gpuinfo.Snapshot{State: gpuinfo.HostUnreachable}})
	j := r.submit(t, 5, "true")
	failing := &countingStore{Mem: r.store, failReason: true}
	ctl, _ := control.New(control.Options{Store: failing, Keeper: failing, Jobs: failing, Snapshots: r.lab, Workers: r.workers})
	res, err := ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), fmt.Sprintf("job %d: record the pending reason: disk full", j.ID)) {
		t.Errorf("errors %v", res.Errors)
	}
}

// A job claimed (launching) whose launch never reached the worker is queued
// again and started by the same pass.
func TestPassRequeuesLostClaim(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "sleep", "2")
	r.store.Update(j.ID, func(x *job.Job) error {
		x.State, x.Placement = job.Launching, job.Placement{Host: "ctl", GPUs: []string{"GPU-3"}, Indexes: []int{3}}
		return nil
	})
	res := r.pass(t)
	if len(res.Started) != 1 || res.Started[0].ID != j.ID || res.Started[0].State != job.Running {
		t.Fatalf("started %+v, errors %v", res.Started, res.Errors)
	}
	want := []string{"job_requeue 1 queued", "job_start 1 running"}
	if !slices.Equal(r.events.seen, want) {
		t.Errorf("events %q, want %q", r.events.seen, want)
	}
}

// A launch that fails on the worker puts the job back in the queue with
// the reason; nothing is left in launching.
func TestPassLaunchFailureRequeues(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	r.workers.startErr = errors.New("launch on ctl: mkdir: cannot create directory '/dev/null/home': Not a directory")
	j := r.submit(t, 5, "true")
	res := r.pass(t)
	got := r.get(t, j.ID)
	if len(res.Started) != 0 || len(res.Errors) != 1 || got.State != job.Queued || got.Placement.Host != "" ||
		got.Reason != "launch failed: launch on ctl: mkdir: cannot create directory '/dev/null/home': Not a directory; the job stays queued" || got.ReasonCode != "launch_failed" {
		t.Errorf("state %s reason %q, errors %v", got.State, got.Reason, res.Errors)
	}
	if !slices.Equal(ids(res.Pending), []job.ID{j.ID}) {
		t.Errorf("pending %v", ids(res.Pending))
	}
	if a := got.Attempts; len(a) != 1 || a[0].N != 1 || a[0].Host != "ctl" || a[0].State != "" || a[0].Ended != job.AttemptLaunchFailed || !a[0].StartedAt.IsZero() {
		t.Errorf("attempts %+v: want attempt 1 on ctl, never started, launch_failed", a)
	}
	if _, ok := got.LastRun(); ok {
		t.Errorf("a job whose only launch failed has a last run")
	}
}

// A launch that finds the attempt's directory on the worker already (the
// state was put back from an older copy) fails the job, saying why and
// what to do: launched again under another attempt it might run twice.
func TestPassLaunchDirExistsFails(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	r.workers.startErr = fmt.Errorf("wrapped: %w", job.ErrDirExists)
	j := r.submit(t, 5, "true")
	res := r.pass(t)
	got := r.get(t, j.ID)
	if got.State != job.Failed || got.ReasonCode != "dir_exists" || got.EndedAt.IsZero() || len(res.Errors) != 1 || !slices.Equal(ids(res.Finished), []job.ID{j.ID}) || len(res.Pending) != 0 {
		t.Fatalf("job %s (%s) %q; finished %v, pending %v, errors %v", got.State, got.ReasonCode, got.Reason, ids(res.Finished), ids(res.Pending), res.Errors)
	}
	for _, want := range []string{"not started: wrapped: its job directory exists already", "job id 1 was handed out before", "Resubmit it", "gssh state restore"} {
		if !strings.Contains(got.Reason, want) {
			t.Errorf("reason %q does not say %q", got.Reason, want)
		}
	}
	r.workers.startErr = nil
	if res := r.pass(t); len(res.Started) != 0 || r.get(t, j.ID).Attempt != 1 {
		t.Errorf("launched again: %+v", res.Started)
	}
	if want := []string{"job_end 1 failed"}; !slices.Equal(r.events.seen, want) {
		t.Errorf("events %q, want %q", r.events.seen, want)
	}
}

// A job past its walltime is stopped with the walltime grace and marked
// timeout; one within it goes on.
func TestPassWalltime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		j := r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: "auto", GPUs: 1, MemPerGPU: GiB, Timeout: time.Minute, Priority: 5})
		r.pass(t)
		time.Sleep(59 * time.Second)
		if res := r.pass(t); len(res.Finished) != 0 {
			t.Fatalf("stopped within its walltime: %+v", res.Finished)
		}
		time.Sleep(2 * time.Second)
		res := r.pass(t)
		if len(res.Finished) != 1 || res.Finished[0].State != job.Timeout || res.Finished[0].Reason != "ran past its walltime of 1m0s: stopped" {
			t.Fatalf("finished %+v", res.Finished)
		}
		if want := []string{fmt.Sprintf("%d %s", j.ID, control.DefaultGrace)}; !slices.Equal(r.workers.cancelled, want) {
			t.Errorf("cancelled %q, want %q", r.workers.cancelled, want)
		}
		if got := r.get(t, j.ID); !got.EndedAt.Equal(time.Now()) {
			t.Errorf("ended %v, want now", got.EndedAt)
		}
	})
}

// default_timeout is the walltime of a job without --timeout; a job's own
// --timeout wins.
func TestPassDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{DefaultTimeout: time.Minute}, a100x4("ctl"))
		bare := r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: "auto", GPUs: 1, MemPerGPU: GiB, Priority: 5})
		own := r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: "auto", GPUs: 1, MemPerGPU: GiB, Timeout: time.Hour, Priority: 5})
		if res := r.pass(t); len(res.Started) != 2 {
			t.Fatalf("started %v", ids(res.Started))
		}
		time.Sleep(61 * time.Second)
		res := r.pass(t)
		if len(res.Finished) != 1 || res.Finished[0].ID != bare.ID || res.Finished[0].State != job.Timeout ||
			res.Finished[0].Reason != "ran past the default walltime of 1m0s (policy default_timeout): stopped" {
			t.Fatalf("finished %+v", res.Finished)
		}
		if got := r.get(t, own.ID); got.State != job.Running {
			t.Errorf("the job with its own walltime: %s", got.State)
		}
	})
}

// Fair-share in a pass: the user who used the GPUs least goes first,
// whoever submitted first; usage comes from the store's ended jobs and
// the running ones.
func TestPassFairShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl")) // one GPU free for an exclusive job
		submit := func(user string, argv ...string) job.Job {
			j, err := r.store.Submit(job.Job{User: user, Spec: job.Spec{Argv: argv, Host: "auto", GPUs: 1, Workdir: "~", Priority: 5}})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		// ann ran an hour on the GPU; it ended half an hour ago.
		hour := submit("ann", "sleep", "3600")
		r.pass(t)
		time.Sleep(90 * time.Minute)
		if res := r.pass(t); len(res.Finished) != 1 || !r.get(t, hour.ID).EndedAt.Equal(r.get(t, hour.ID).StartedAt.Add(time.Hour)) {
			t.Fatalf("the hour-long job: %+v", r.get(t, hour.ID))
		}
		first := submit("ann", "sleep", "60")
		second := submit("bob", "sleep", "60")
		res := r.pass(t)
		if !slices.Equal(ids(res.Started), []job.ID{second.ID}) {
			t.Fatalf("started %v, want bob's job %d", ids(res.Started), second.ID)
		}
		u, err := r.ctl.Usage(nil, time.Now())
		if err != nil || u["ann"] < 3000 || u["ann"] > 3600 || u["bob"] != 0 {
			t.Errorf("usage %v, %v", u, err)
		}
		if p := r.get(t, first.ID); !strings.Contains(p.Reason, fmt.Sprintf("GPU 3: in use by gssh jobs (bob: job %d)", second.ID)) {
			t.Errorf("ann's job waits: %s %s", p.ReasonCode, p.Reason)
		}
	})
}

// A lost job whose leftover processes still run: they are reaped with the
// orphan grace before the job's GPUs are freed.
func TestPassReapsOrphans(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.pass(t)
	r.workers.status[j.ID] = job.Status{State: job.Lost, Orphans: 2, Reason: "the job's main process is gone"}
	res := r.pass(t)
	if len(res.Finished) != 1 || res.Finished[0].State != job.Lost || res.Finished[0].Reason != "the job's main process is gone; its 1 leftover processes were killed" {
		t.Fatalf("finished %+v", res.Finished)
	}
	if want := []string{fmt.Sprintf("%d %s", j.ID, control.DefaultOrphanGrace)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("cancelled %q", r.workers.cancelled)
	}
}

// A host that cannot be polled keeps its jobs as they are; the error is
// reported and the rest of the pass goes on.
func TestPassPollErrorKeepsJobs(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("a"), a100x4("b"))
	ja := r.submitSpec(t, job.Spec{Argv: []string{"exit", "0"}, Host: "a", GPUs: 1, Priority: 5})
	jb := r.submitSpec(t, job.Spec{Argv: []string{"exit", "0"}, Host: "b", GPUs: 1, Priority: 5})
	r.pass(t)
	r.workers.pollErr["a"] = errors.New("poll on a: host unreachable")
	res := r.pass(t)
	if len(res.Errors) != 1 || !slices.Equal(ids(res.Finished), []job.ID{jb.ID}) {
		t.Errorf("errors %v finished %v", res.Errors, ids(res.Finished))
	}
	if got := r.get(t, ja.ID); got.State != job.Running {
		t.Errorf("job on the unpollable host: %s", got.State)
	}
}

// Nothing queued: the pass does not probe the hosts.
func TestPassProbesOnlyForQueuedJobs(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	r.pass(t)
	if r.lab.asked != 0 {
		t.Errorf("probed %d times with an empty queue", r.lab.asked)
	}
	r.submit(t, 5, "sleep", "10")
	r.pass(t) // starts it
	r.pass(t) // only a running job left
	if r.lab.asked != 1 {
		t.Errorf("probed %d times, want 1", r.lab.asked)
	}
}

// badRecords returns Active's jobs with an ErrBadRecord error, as Bolt
// does when one record cannot be decoded.
type badRecords struct{ *state.Mem }

func (s badRecords) Active() ([]job.Job, error) {
	js, _ := s.Mem.Active()
	return js, fmt.Errorf("active: %w: job 99: decode: unexpected end of JSON input", state.ErrBadRecord)
}

// One corrupt job record does not stop every pass: the others are
// scheduled and the bad one is reported.
func TestPassGoesOnPastABadRecord(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "sleep", "10")
	bad := badRecords{r.store}
	ctl, _ := control.New(control.Options{Store: bad, Keeper: bad, Jobs: bad, Snapshots: r.lab, Workers: r.workers})
	res, err := ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(res.Started), []job.ID{j.ID}) || len(res.Errors) != 1 || !errors.Is(res.Errors[0], state.ErrBadRecord) {
		t.Errorf("started %v errors %v", ids(res.Started), res.Errors)
	}
}

// The policy reaches the planner: under backfill none, a job that does not
// fit holds the ones behind it.
func TestPassPolicy(t *testing.T) {
	for _, tt := range []struct {
		backfill sched.Backfill
		started  []job.ID
	}{
		{sched.BackfillSkip, []job.ID{2}},
		{sched.BackfillNone, []job.ID{}},
	} {
		r := newRig(t, sched.Policy{Weights: sched.FairShareAlone, Backfill: tt.backfill}, a100x4("ctl")) // the big job first
		r.submitSpec(t, job.Spec{Argv: []string{"big"}, Host: "auto", GPUs: 2, Priority: 5})
		r.submit(t, 5, "small")
		res := r.pass(t)
		if !slices.Equal(ids(res.Started), tt.started) {
			t.Errorf("backfill %s: started %v, want %v", tt.backfill, ids(res.Started), tt.started)
		}
	}
}

func TestNew(t *testing.T) {
	st, l, w := state.NewMem(), &lab{}, newWorkers()
	for _, tt := range []struct {
		opt  control.Options
		want string
	}{
		{control.Options{Snapshots: l, Workers: w}, "control: no store"},
		{control.Options{Store: st, Workers: w}, "control: no snapshot source"},
		{control.Options{Store: st, Snapshots: l}, "control: no workers"},
		{control.Options{Store: st, Snapshots: l, Workers: w, Policy: sched.Policy{Order: "lottery"}}, `policy order "lottery": give one of fifo, priority, fairshare`},
	} {
		if _, err := control.New(tt.opt); err == nil || err.Error() != tt.want {
			t.Errorf("New: %v, want %s", err, tt.want)
		}
	}
	if _, err := control.New(control.Options{Store: st, Snapshots: l, Workers: w}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

func TestLockPass(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db.pass.lock")
	unlock, err := control.LockPass(context.Background(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := control.LockPass(context.Background(), path, 200*time.Millisecond); !errors.Is(err, control.ErrPassBusy) {
		t.Errorf("second lock: %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("waited %v", d)
	}
	if _, err := control.LockPass(context.Background(), path, 0); !errors.Is(err, control.ErrPassBusy) {
		t.Errorf("held, no wait: %v", err)
	}
	unlock()
	unlock2, err := control.LockPass(context.Background(), path, 0) // free: one try is enough
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

// Cancel: a queued job at once, an active one stopped on its worker first
// (with the grace given), an ended one refused.
func TestCancel(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	run := r.submit(t, 5, "train")
	r.pass(t)
	wait := r.submit(t, 5, "train")
	r.pass(t)
	for _, id := range []job.ID{wait.ID, run.ID} {
		j, err := r.ctl.Cancel(context.Background(), id, 3*time.Second, "ann")
		if err != nil || j.State != job.Cancelled || j.Reason != "cancelled by ann" || j.ReasonCode != "" {
			t.Errorf("cancel %d: %+v %v", id, j, err)
		}
	}
	if want := []string{fmt.Sprintf("%d 3s", run.ID)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("stopped on the worker: %q, want %q (only the running job)", r.workers.cancelled, want)
	}
	if _, err := r.ctl.Cancel(context.Background(), run.ID, time.Second, "ann"); !errors.Is(err, control.ErrEnded) {
		t.Errorf("cancel again: %v", err)
	}
	if _, err := r.ctl.Cancel(context.Background(), 99, time.Second, "ann"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("cancel of no job: %v", err)
	}
	if !slices.Contains(r.events.seen, fmt.Sprintf("job_end %d cancelled", run.ID)) {
		t.Errorf("events %q", r.events.seen)
	}
}

// A job cancelled while the pass launches it never runs: the cancel
// abandons the attempt before its launch gets there (then the launch finds
// the attempt's directory taken); a launch that got there first is stopped
// as soon as it returns. Nothing runs that the queue does not track.
func TestCancelDuringLaunch(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.workers.onStart = func(x job.Job) {
		if _, err := r.ctl.Cancel(context.Background(), x.ID, time.Second, "ann"); err != nil {
			t.Error(err)
		}
	}
	res := r.pass(t)
	got := r.get(t, j.ID)
	if len(res.Started) != 0 || got.State != job.Cancelled {
		t.Errorf("result %+v; job %+v", res, got)
	}
	if want := []string{fmt.Sprintf("%d 1 abandoned", j.ID)}; !slices.Equal(r.workers.abandons, want) || len(r.workers.cancelled) != 0 {
		t.Errorf("abandons %q (want %q), cancelled %q", r.workers.abandons, want, r.workers.cancelled)
	}

	// The launch got there first: the cancel comes once run.sh runs, before
	// the pass records the launch. It kills the job (Abandon says it
	// started), and so does the pass once the launch returns.
	r = newRig(t, sched.Policy{}, a100x4("ctl"))
	j = r.submit(t, 5, "train")
	r.workers.onStarted = func(x job.Job) {
		if _, err := r.ctl.Cancel(context.Background(), x.ID, time.Second, "ann"); err != nil {
			t.Error(err)
		}
	}
	res = r.pass(t)
	if got := r.get(t, j.ID); len(res.Started) != 0 || got.State != job.Cancelled || got.Remote.PID == 0 {
		t.Errorf("result %+v; job %+v", res, got)
	}
	want := []string{fmt.Sprintf("%d 1s", j.ID), fmt.Sprintf("%d %s", j.ID, control.DefaultGrace)}
	if !slices.Equal(r.workers.cancelled, want) || !slices.Equal(r.workers.abandons, []string{fmt.Sprintf("%d 1 started", j.ID)}) {
		t.Errorf("cancelled %q (want %q), abandons %q", r.workers.cancelled, want, r.workers.abandons)
	}
}

// A dry run makes the pass's decision for a job not stored, behind the
// queue, and changes nothing: no poll, no write.
func TestDryRun(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	first := r.submit(t, 5, "train")
	trial, err := r.ctl.DryRun(context.Background(), job.Job{ID: 1000, Spec: job.Spec{Argv: []string{"x"}, Host: "auto", GPUs: 1, Priority: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if trial.Start || trial.Pending.Reason.Code != sched.CodeForeign || trial.Pending.Position != 2 || !strings.Contains(trial.Pending.Reason.Text, "GPU 3: in use by gssh jobs") {
		t.Errorf("behind job %d: %+v", first.ID, trial)
	}
	if r.workers.polls != 0 || r.get(t, first.ID).State != job.Queued || r.get(t, first.ID).Reason != "" {
		t.Errorf("the dry run changed something: %d polls, %+v", r.workers.polls, r.get(t, first.ID))
	}
	trial, err = r.ctl.DryRun(context.Background(), job.Job{ID: 1000, Spec: job.Spec{Argv: []string{"x"}, Host: "auto", GPUs: 1, Priority: 0}})
	if err != nil || !trial.Start || trial.Placement.Indexes[0] != 3 {
		t.Errorf("ahead of the queue (priority 0): %+v, %v", trial, err)
	}
}

// A pass cut short while probing (Ctrl-C) plans nothing on the half-done
// probe: it says so, starts nothing and writes no reason.
func TestPassCutShort(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	ctx, cancel := context.WithCancel(context.Background())
	r.lab.onAsk = cancel
	res, err := r.ctl.Pass(ctx)
	if !errors.Is(err, context.Canceled) || len(res.Started) != 0 || len(res.Pending) != 0 {
		t.Errorf("Pass = %+v, %v", res, err)
	}
	if got := r.get(t, j.ID); got.State != job.Queued || got.Reason != "" {
		t.Errorf("job %+v", got)
	}
}

// A launch whose outcome is unknown (the session died after it was sent)
// leaves the job launching, never queued; the next pass asks the worker:
// running there, it is running here (pid adopted); a directory without a
// pid, or nothing at all, is abandoned atomically and queued again, and
// the same pass starts a new attempt. Nothing runs twice.
func TestPassUnknownLaunchOutcome(t *testing.T) {
	unknown := fmt.Errorf("%w: launch on ctl: ctl: command outcome unknown: the session ended without an exit status", job.ErrOutcomeUnknown)
	for _, tt := range []struct {
		left     string // what the cut-off launch left on the worker
		state    job.State
		attempts []int
		abandons []string
	}{
		{"run", job.Running, []int{1}, nil},
		{"dir", job.Running, []int{1, 2}, []string{"1 1 abandoned"}},
		{"", job.Running, []int{1, 2}, []string{"1 1 abandoned"}},
	} {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		j := r.submit(t, 5, "train")
		r.workers.startErr, r.workers.unknownLeft = unknown, tt.left
		res := r.pass(t)
		got := r.get(t, j.ID)
		if got.State != job.Launching || got.ReasonCode != "launch_unknown" || len(res.Started) != 0 || len(res.Pending) != 0 || len(res.Errors) != 1 {
			t.Fatalf("left %q: after the cut launch: %+v; %+v", tt.left, got, res)
		}
		r.workers.startErr = nil
		r.pass(t)
		got = r.get(t, j.ID)
		if got.State != tt.state || !slices.Equal(r.workers.attempts, tt.attempts) || !slices.Equal(r.workers.abandons, tt.abandons) {
			t.Errorf("left %q: %s attempt %d, starts %v (want %v), abandons %q (want %q)", tt.left, got.State, got.Attempt, r.workers.attempts, tt.attempts, r.workers.abandons, tt.abandons)
		}
		if got.Remote.PID == 0 {
			t.Errorf("left %q: no pid recorded: %+v", tt.left, got.Remote)
		}
	}
}

// Each launch attempt is counted, failed ones included.
func TestAttemptsCount(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.workers.startErr = errors.New("launch on ctl: no space left on device")
	r.pass(t)
	r.workers.startErr = nil
	r.pass(t)
	if got := r.get(t, j.ID); got.Attempt != 2 || got.State != job.Running || !slices.Equal(r.workers.attempts, []int{1, 2}) {
		t.Errorf("attempt %d %s, starts %v", got.Attempt, got.State, r.workers.attempts)
	}
}

// What a job leaves running when it ends is ended too, with the orphan
// grace, before its GPUs are offered again; the job keeps its exit status.
func TestPassEndsLeftovers(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.pass(t)
	code := 0
	r.workers.status[j.ID] = job.Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0", Orphans: 1}
	next := r.submit(t, 5, "train") // wants the same (only idle) GPU
	res := r.pass(t)
	if len(res.Finished) != 1 || res.Finished[0].State != job.Succeeded || res.Finished[0].Reason != "exit status 0; its 1 leftover processes were killed" {
		t.Fatalf("finished %+v", res.Finished)
	}
	if want := []string{fmt.Sprintf("%d %s", j.ID, control.DefaultOrphanGrace)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("cancelled %q, want %q", r.workers.cancelled, want)
	}
	if len(res.Started) != 1 || res.Started[0].ID != next.ID {
		t.Errorf("the GPU was not offered again after the leftovers ended: %+v", res.Started)
	}
}

// A cancel of a launching job resolves the launch first: an attempt that
// has not started is abandoned and nothing is killed.
func TestCancelLaunching(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.workers.startErr = fmt.Errorf("%w: launch on ctl: interrupted", job.ErrOutcomeUnknown)
	r.workers.unknownLeft = "dir"
	r.pass(t)
	got, err := r.ctl.Cancel(context.Background(), j.ID, time.Second, "ann")
	if err != nil || got.State != job.Cancelled || len(r.workers.cancelled) != 0 || !slices.Equal(r.workers.abandons, []string{"1 1 abandoned"}) {
		t.Errorf("cancel: %+v %v; cancelled %q abandons %q", got, err, r.workers.cancelled, r.workers.abandons)
	}
}

// A pass acting on a job while it is being cancelled: the cancel abandons
// attempt 1 of a launch whose outcome was unknown; meanwhile a pass finds
// it abandoned, queues it again and starts attempt 2. The cancel must not
// record "cancelled" over the running attempt 2 and leave it running: it
// looks again and stops attempt 2.
func TestCancelRacesAPass(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.workers.startErr = fmt.Errorf("%w: launch on ctl: interrupted", job.ErrOutcomeUnknown)
	r.workers.unknownLeft = "dir"
	r.pass(t) // attempt 1: outcome unknown, launching
	r.workers.startErr = nil
	r.workers.onAbandoned = func() {
		res := r.pass(t) // requeues the abandoned attempt 1, starts attempt 2
		if len(res.Started) != 1 || res.Started[0].Attempt != 2 {
			t.Errorf("the racing pass: %+v", res)
		}
	}
	got, err := r.ctl.Cancel(context.Background(), j.ID, time.Second, "ann")
	if err != nil || got.State != job.Cancelled || got.Attempt != 2 {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if want := []string{fmt.Sprintf("%d 1s", j.ID)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("stopped %q, want %q: attempt 2 must be stopped", r.workers.cancelled, want)
	}
}

// A stop cut short (the mark written, a child ignoring SIGTERM still
// there): the next pass ends what is left before it records the job, with
// the state the mark says.
func TestPassFinishesACutStop(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	j := r.submit(t, 5, "train")
	r.pass(t)
	r.workers.status[j.ID] = job.Status{State: job.Timeout, Reason: "stopped: past its walltime", Orphans: 1}
	res := r.pass(t)
	if len(res.Finished) != 1 || res.Finished[0].State != job.Timeout || !strings.HasSuffix(res.Finished[0].Reason, "its 1 leftover processes were killed") {
		t.Fatalf("finished %+v", res.Finished)
	}
	if want := []string{fmt.Sprintf("%d %s", j.ID, control.DefaultOrphanGrace)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("stopped %q, want %q", r.workers.cancelled, want)
	}
}

// A pipeline: b after a succeeded, c after a failed; a's end starts b in
// the same pass and cancels c, with the reason; held d waits, blocking
// nobody, until released.
func TestPassDependenciesAndHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl")) // GPU 3 is the only free one
		a := r.submit(t, 5, "sleep", "10")
		spec := func(kind job.DepKind) job.Spec {
			return job.Spec{Argv: []string{"sleep", "1"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 5, After: []job.Dependency{{Kind: kind, Job: a.ID}}}
		}
		b := r.submitSpec(t, spec(job.AfterOK))
		c := r.submitSpec(t, spec(job.AfterNotOK))
		d, err := r.store.Submit(job.Job{User: "u", Spec: job.Spec{Argv: []string{"sleep", "1"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 0},
			Hold: &job.Hold{By: "u", At: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		res := r.pass(t)
		if !slices.Equal(ids(res.Started), []job.ID{a.ID}) {
			t.Fatalf("started %v: the held job goes first by priority, but must not start", ids(res.Started))
		}
		for id, code := range map[job.ID]sched.Code{b.ID: sched.CodeDependency, c.ID: sched.CodeDependency, d.ID: sched.CodeHeld} {
			if j := r.get(t, id); j.State != job.Queued || j.ReasonCode != string(code) {
				t.Errorf("job %d: %s %q (%s), want %s", id, j.State, j.Reason, j.ReasonCode, code)
			}
		}
		if j := r.get(t, b.ID); j.Reason != fmt.Sprintf("waits for job %d to succeed", a.ID) {
			t.Errorf("b's reason %q", j.Reason)
		}
		time.Sleep(10 * time.Second)
		res = r.pass(t)
		if !slices.Equal(ids(res.Started), []job.ID{b.ID}) {
			t.Errorf("after a's end: started %v, want b", ids(res.Started))
		}
		got := r.get(t, c.ID)
		want := fmt.Sprintf("job %d succeeded (exit status 0); --after-notok needs it to fail, time out or be lost", a.ID)
		if got.State != job.Cancelled || got.Reason != want || got.ReasonCode != string(sched.CodeDependencyNever) || !got.EndedAt.Equal(time.Now()) {
			t.Errorf("c: %s %q (%s) at %v", got.State, got.Reason, got.ReasonCode, got.EndedAt)
		}
		if !slices.Contains(ids(res.Finished), c.ID) {
			t.Errorf("finished %v lacks c", ids(res.Finished))
		}
		if r.get(t, d.ID).State != job.Queued {
			t.Error("the held job moved")
		}
	})
}

// Requeue stops a running job, queues it under its id with its run in
// Runs (fair-share counts it), and the next pass starts a new attempt.
func TestRequeue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		a := r.submit(t, 5, "sleep", "100")
		r.pass(t)
		time.Sleep(time.Minute)
		j, err := r.ctl.Requeue(context.Background(), a.ID, time.Second, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if j.State != job.Queued || len(j.Runs) != 1 || j.Runs[0].Ended.Sub(j.Runs[0].Started) != time.Minute || !j.StartedAt.IsZero() ||
			j.Reason != "requeued by admin (it ran on ctl:3)" || j.ReasonCode != "requeued" || len(j.Placement.GPUs) != 0 {
			t.Fatalf("requeued: %+v", j)
		}
		uses, err := r.store.Uses(time.Time{})
		if err != nil || len(uses) != 1 || uses[0].User != "u" {
			t.Errorf("uses %+v %v", uses, err)
		}
		if len(j.Attempts) != 1 || j.Attempts[0].N != 1 || j.Attempts[0].Host != "ctl" || j.Attempts[0].State != job.Cancelled || j.Attempts[0].Ended != job.AttemptRequeued ||
			j.Attempts[0].EndedAt.Sub(j.Attempts[0].StartedAt) != time.Minute || j.Attempts[0].Dir == "" || !slices.Equal(j.Attempts[0].GPUs, []int{3}) {
			t.Errorf("attempts %+v: want attempt 1 on ctl:3, a minute, cancelled, requeued", j.Attempts)
		}
		res := r.pass(t)
		if len(res.Started) != 1 || res.Started[0].Attempt != 2 {
			t.Errorf("the next pass: %+v", res.Started)
		}
		if all := res.Started[0].AllAttempts(); len(all) != 2 || all[0].N != 1 || all[1].N != 2 || all[1].State != job.Running {
			t.Errorf("all attempts %+v: want 1 (requeued) and 2 (running)", all)
		}
		if last, ok := res.Started[0].LastRun(); !ok || last.N != 2 {
			t.Errorf("last run %+v %v, want attempt 2", last, ok)
		}
		if _, err := r.ctl.Requeue(context.Background(), r.submit(t, 5, "sleep", "1").ID, time.Second, "admin"); !errors.Is(err, control.ErrNotRunning) {
			t.Errorf("a queued job: %v", err)
		}
	})
}

// owners is a fake control.Sessions: the sessions in alive are there.
type owners struct {
	mu    sync.Mutex
	alive map[string]bool
}

func (o *owners) Alive(s job.Interactive) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.alive[s.Session]
}

func (o *owners) set(session string, alive bool) {
	o.mu.Lock()
	o.alive[session] = alive
	o.mu.Unlock()
}

// Interactive jobs (gssh run): a pass places and claims one but never
// launches it; it leaves it launching while its gssh run attaches it;
// records it running once the worker runs it; stops and cancels it when
// its gssh run is gone; a queued one whose gssh run is gone is cancelled,
// never placed; one claimed but never attached is abandoned and
// cancelled, not queued again; none is requeued.
func TestInteractiveJobs(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	own := &owners{alive: map[string]bool{"a": true, "b": true, "c": true}}
	ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Events: r.events, Sessions: own})
	if err != nil {
		t.Fatal(err)
	}
	pass := func() control.Result {
		t.Helper()
		res, err := ctl.Pass(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	run := func(session string) job.Job {
		return r.submitSpec(t, job.Spec{Argv: []string{"bash"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 5,
			Interactive: &job.Interactive{Session: session, PTY: true}})
	}
	a := run("a")
	pass()
	got := r.get(t, a.ID)
	if got.State != job.Launching || got.Attempt != 1 || !slices.Equal(got.Placement.Indexes, []int{3}) || !strings.Contains(got.Reason, "waiting for its gssh run to start it") {
		t.Fatalf("placed: %s attempt %d on %v (%q)", got.State, got.Attempt, got.Placement.Indexes, got.Reason)
	}
	if len(r.workers.attempts) != 0 {
		t.Fatalf("a pass launched an interactive job: attempts %v", r.workers.attempts)
	}
	// Its gssh run is attaching: the worker has no directory yet, or no pid.
	pass()
	r.workers.status[a.ID] = job.Status{State: job.Launching}
	pass()
	if got := r.get(t, a.ID); got.State != job.Launching || len(r.workers.abandons) != 0 {
		t.Fatalf("while attaching: %s, abandons %v", got.State, r.workers.abandons)
	}
	// The GPU is booked meanwhile: an exclusive job waits.
	other := r.submit(t, 0, "sleep", "100")
	pass()
	if got := r.get(t, other.ID); got.State != job.Queued {
		t.Fatalf("a job took the GPU booked by an interactive one: %s", got.State)
	}
	// It runs.
	r.workers.status[a.ID] = job.Status{State: job.Running, PID: 4242, StartTicks: 7, Dir: "/d"}
	pass()
	if got := r.get(t, a.ID); got.State != job.Running || got.Remote.PID != 4242 {
		t.Fatalf("attached: %s pid %d", got.State, got.Remote.PID)
	}
	// Its gssh run went away: stopped, cancelled, the GPU free again.
	own.set("a", false)
	res := pass()
	if got := r.get(t, a.ID); got.State != job.Cancelled || !strings.Contains(got.Reason, "its gssh run went away") || !slices.Contains(r.workers.cancelled, fmt.Sprintf("%d 10s", a.ID)) {
		t.Fatalf("owner gone: %s %q, stops %v", got.State, got.Reason, r.workers.cancelled)
	}
	if !slices.Contains(ids(res.Finished), a.ID) {
		t.Errorf("finished %v", ids(res.Finished))
	}
	r.pass(t) // the freed GPU goes to the queued job
	if got := r.get(t, other.ID); got.State != job.Running {
		t.Fatalf("after the interactive job: %s", got.State)
	}

	// Queued, its gssh run gone: cancelled, never placed.
	b := run("b")
	pass()
	if got := r.get(t, b.ID); got.State != job.Queued {
		t.Fatalf("b: %s", got.State)
	}
	own.set("b", false)
	pass()
	if got := r.get(t, b.ID); got.State != job.Cancelled || got.Reason != "its gssh run went away before the job started" || got.Placement.Host != "" {
		t.Fatalf("b, owner gone while queued: %s %q on %q", got.State, got.Reason, got.Placement.Host)
	}

	// Claimed, then its gssh run gone before it attached: abandoned and
	// cancelled, not queued again.
	if _, err := ctl.Cancel(context.Background(), other.ID, time.Second, "test"); err != nil {
		t.Fatal(err)
	}
	c := run("c")
	pass()
	if got := r.get(t, c.ID); got.State != job.Launching {
		t.Fatalf("c: %s (%s)", got.State, got.Reason)
	}
	if _, err := ctl.Requeue(context.Background(), c.ID, time.Second, "test"); err == nil || !strings.Contains(err.Error(), "cannot go back to the queue") {
		t.Errorf("requeue of an interactive job: %v", err)
	}
	// Its attempt abandoned while its gssh run is there (its session
	// failed): queued again for another attempt, as a batch job is.
	r.workers.status[c.ID] = job.Status{State: job.Lost, Abandoned: true, Reason: "the launch attempt was abandoned before it started"}
	pass()
	if got := r.get(t, c.ID); got.State != job.Launching || got.Attempt != 2 {
		t.Fatalf("c, abandoned with its gssh run there: %s attempt %d (%s), want placed again", got.State, got.Attempt, got.Reason)
	}
	delete(r.workers.status, c.ID)
	own.set("c", false)
	pass()
	if got := r.get(t, c.ID); got.State != job.Cancelled || !strings.HasPrefix(got.Reason, "its gssh run went away before the job started (attempt 2") || !slices.Contains(r.workers.abandons, fmt.Sprintf("%d 2 abandoned", c.ID)) {
		t.Fatalf("c, owner gone before attach: %s %q, abandons %v", got.State, got.Reason, r.workers.abandons)
	}
	if len(r.workers.attempts) != 1 { // the exclusive job's only
		t.Errorf("starts %v", r.workers.attempts)
	}
}

// A job another user's gssh launched with its own SSH identity (a lab
// member's gssh run, Remote.By) is out of the passes' reach: never polled
// nor stopped over SSH; ended without SSH when its gssh run is gone.
func TestJobsLaunchedElsewhere(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	own := &owners{alive: map[string]bool{"m": true, "n": true}}
	ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Sessions: own, Self: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	place := func(session string) job.Job {
		j := r.submitSpec(t, job.Spec{Argv: []string{"bash"}, Host: "auto", GPUs: 1, MemPerGPU: GiB, Workdir: "~", Priority: 5,
			Interactive: &job.Interactive{Session: session}})
		if _, err := ctl.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		u, err := r.store.Update(j.ID, func(x *job.Job) error { // alice's gssh run attached it
			x.State, x.Remote = job.Running, job.Remote{Dir: "/home/alice/.gssh/jobs/c-1.1", PID: 4242, By: "alice"}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	m := place("m")
	for range 3 {
		if _, err := ctl.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.get(t, m.ID); got.State != job.Running {
		t.Fatalf("a job launched elsewhere after passes: %s (%s)", got.State, got.Reason)
	}
	// Cancelled by someone: recorded, nothing sent over SSH.
	if _, err := ctl.Cancel(context.Background(), m.ID, time.Second, "bob"); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, m.ID); got.State != job.Cancelled || len(r.workers.cancelled) != 0 {
		t.Fatalf("cancel of a job launched elsewhere: %s, stops %v", got.State, r.workers.cancelled)
	}
	// Its gssh run gone: ended by the pass, without SSH.
	n := place("n")
	own.set("n", false)
	res, err := ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, n.ID); got.State != job.Cancelled || !strings.Contains(got.Reason, "its gssh run (of alice) went away") || len(r.workers.cancelled) != 0 {
		t.Fatalf("owner gone: %s %q, stops %v", got.State, got.Reason, r.workers.cancelled)
	}
	if !slices.Contains(ids(res.Finished), n.ID) {
		t.Errorf("finished %v", ids(res.Finished))
	}
}
