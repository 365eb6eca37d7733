package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// fakeService answers every call with what the test put in it.
type fakeService struct {
	gpus    service.GPUsDoc
	gpusErr error
	submit  service.SubmitResult
	jobs    service.JobsDoc
	jobsErr error
	cancel  map[job.ID]service.CancelResult
	job     job.Job
	explain service.Explanation
	usage   service.UsageDoc
	pass    service.PassResult
	passErr error
	reap    service.ReapDoc
	reapErr error
	drain   service.DrainResult
	// drainJobs are DrainJobs' answers, one per call (the last one
	// repeated).
	drainJobs [][]job.Job
	events    string // the event log Events reads
	requests  []any
}

func (f *fakeService) Events(_ context.Context, q service.EventQuery, fn func(eventlog.Record) error) (service.EventsResult, error) {
	found, err := eventlog.Read(f.events, q.Filter, fn, q.Warn)
	return service.EventsResult{Path: f.events, None: !found}, err
}

func (f *fakeService) GPUs(_ context.Context, q service.HostQuery) (service.GPUsDoc, error) {
	f.requests = append(f.requests, q)
	return f.gpus, f.gpusErr
}
func (f *fakeService) Hosts(context.Context, service.HostQuery) (service.HostsDoc, error) {
	return service.HostsDoc{}, nil
}
func (f *fakeService) Submit(_ context.Context, r service.SubmitRequest) (service.SubmitResult, error) {
	f.requests = append(f.requests, r)
	return f.submit, nil
}
func (f *fakeService) Run(_ context.Context, r service.RunRequest) (service.RunResult, error) {
	f.requests = append(f.requests, r)
	return service.RunResult{}, errors.New("fakeService runs nothing")
}
func (f *fakeService) Jobs(context.Context, service.JobQuery) (service.JobsDoc, error) {
	return f.jobs, f.jobsErr
}
func (f *fakeService) Job(context.Context, job.ID) (job.Job, error) { return f.job, nil }
func (f *fakeService) Explain(context.Context, job.ID) (service.Explanation, error) {
	return f.explain, nil
}
func (f *fakeService) Usage(context.Context) (service.UsageDoc, error) { return f.usage, nil }
func (f *fakeService) Reap(_ context.Context, r service.ReapRequest) (service.ReapDoc, error) {
	f.requests = append(f.requests, r)
	return f.reap, f.reapErr
}
func (f *fakeService) Logs(context.Context, service.LogsRequest, io.Writer) (service.LogsResult, error) {
	return service.LogsResult{}, nil
}
func (f *fakeService) Cancel(_ context.Context, r service.CancelRequest) (service.CancelResult, error) {
	f.requests = append(f.requests, r)
	if res, ok := f.cancel[r.ID]; ok {
		return res, nil
	}
	return service.CancelResult{}, fmt.Errorf("%w %d", state.ErrNotFound, r.ID)
}
func (f *fakeService) Hold(_ context.Context, ids []job.ID) ([]service.HoldResult, error) {
	f.requests = append(f.requests, "hold", ids)
	return f.holds(ids), nil
}
func (f *fakeService) Release(_ context.Context, ids []job.ID) ([]service.HoldResult, error) {
	f.requests = append(f.requests, "release", ids)
	return f.holds(ids), nil
}
func (f *fakeService) Update(_ context.Context, r service.UpdateRequest) ([]service.HoldResult, error) {
	f.requests = append(f.requests, r)
	return f.holds(r.IDs), nil
}
func (f *fakeService) Requeue(_ context.Context, ids []job.ID, _ time.Duration) ([]service.HoldResult, error) {
	f.requests = append(f.requests, "requeue", ids)
	return f.holds(ids), nil
}
func (f *fakeService) Resolve(_ context.Context, names []string) ([]job.ID, error) {
	refs, err := service.ParseRefs(names)
	if err != nil {
		return nil, err
	}
	var ids []job.ID
	for _, r := range refs {
		ids = append(ids, r.Job)
	}
	return ids, nil
}
func (f *fakeService) Drain(_ context.Context, r service.DrainRequest) (service.DrainResult, error) {
	f.requests = append(f.requests, r)
	return f.drain, nil
}
func (f *fakeService) Resume(_ context.Context, hosts []string) (service.DrainResult, error) {
	f.requests = append(f.requests, "resume", hosts)
	return f.drain, nil
}
func (f *fakeService) DrainJobs(context.Context, []string) ([]job.Job, error) {
	f.requests = append(f.requests, "drain jobs")
	js := f.drainJobs[0]
	if len(f.drainJobs) > 1 {
		f.drainJobs = f.drainJobs[1:]
	}
	return js, nil
}
func (f *fakeService) holds(ids []job.ID) []service.HoldResult {
	out := make([]service.HoldResult, len(ids))
	for i, id := range ids {
		out[i].Job = job.Job{ID: id, State: job.Queued}
	}
	return out
}
func (f *fakeService) Schedule(context.Context, service.ScheduleRequest) (service.PassResult, error) {
	return f.pass, f.passErr
}

var errNotFaked = errors.New("not in this fake service")

func (f *fakeService) StateBackup(context.Context, string) (state.Summary, error) {
	return state.Summary{}, errNotFaked
}
func (f *fakeService) StateCheck(context.Context, string) (state.Report, error) {
	return state.Report{}, errNotFaked
}
func (f *fakeService) StateRestore(context.Context, service.RestoreRequest) (service.RestoreResult, error) {
	return service.RestoreResult{}, errNotFaked
}

func (f *fakeService) Doctor(context.Context, service.HostQuery) (service.DoctorDoc, error) {
	return service.DoctorDoc{}, errNotFaked
}
func (f *fakeService) CreateToken(context.Context, service.TokenRequest) (service.TokenCreated, error) {
	return service.TokenCreated{}, errNotFaked
}
func (f *fakeService) Tokens(context.Context) (service.TokensDoc, error) {
	return service.TokensDoc{}, errNotFaked
}
func (f *fakeService) RevokeTokens(context.Context, []string) ([]service.TokenInfo, error) {
	return nil, errNotFaked
}
func (f *fakeService) AddCron(context.Context, service.CronRequest) (service.CronEntry, error) {
	return service.CronEntry{}, errNotFaked
}
func (f *fakeService) Crons(context.Context) (service.CronsDoc, error) {
	return service.CronsDoc{}, errNotFaked
}
func (f *fakeService) RemoveCrons(context.Context, []string) ([]state.Cron, error) {
	return nil, errNotFaked
}

func fakeApp(svc service.Service) (*app, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &app{stdout: &out, stderr: &errb, env: map[string]string{}, now: time.Now, svc: svc}, &out, &errb
}

// A pass's problems: warnings, and exit 2, or 3 when the state file failed.
func TestScheduleRunExits(t *testing.T) {
	fe := &state.FileError{Op: "write", Path: "/s.db", Err: errors.New("no space left on device")}
	host := &sshexec.Error{Host: "gpu01", Kind: sshexec.ErrUnreachable, Detail: "connect to x"}
	for _, tt := range []struct {
		problems []error
		code     int
	}{
		{nil, exitOK},
		{[]error{fmt.Errorf("poll on gpu01: %w", host)}, exitPartial},
		{[]error{errors.New("job 3: launch on gpu01: job directory exists already")}, exitPartial},
		{[]error{host, fmt.Errorf("job 4: record the pending reason: %w", fe)}, exitState},
	} {
		svc := &fakeService{pass: service.PassResult{
			Started:  []job.Job{{ID: 1, Placement: job.Placement{Host: "gpu01", Indexes: []int{0, 1}}}},
			Finished: []job.Job{{ID: 2, State: job.Failed, Reason: "exit status 3"}},
			Pending:  []job.Job{{ID: 3, Reason: "gpu01: drained"}},
			Problems: tt.problems,
		}}
		a, out, errb := fakeApp(svc)
		err := scheduleRun(context.Background(), a, &scheduleOptions{})
		if got := exitCode(err); got != tt.code {
			t.Errorf("problems %v: exit %d, want %d", tt.problems, got, tt.code)
		}
		if out.String() != "job 2 failed: exit status 3\njob 1 running on gpu01:0,1\njob 3 queued: gpu01: drained\n" {
			t.Errorf("stdout %q", out.String())
		}
		if strings.Count(errb.String(), "gssh: warning: ") != len(tt.problems) {
			t.Errorf("stderr %q", errb.String())
		}
	}
	a, _, _ := fakeApp(&fakeService{passErr: fmt.Errorf("%w (lock x held for more than 0s)", service.ErrPassBusy)})
	if err := scheduleRun(context.Background(), a, &scheduleOptions{}); exitCode(err) != exitState {
		t.Errorf("pass busy: %v, exit %d", err, exitCode(err))
	}
}

// A pass on a full disk fails to store a change for every job it
// reaches: the reason is told once, the rest counted; exit 3.
func TestScheduleRunDiskFull(t *testing.T) {
	var problems []error
	for id := 3; id <= 6; id++ {
		problems = append(problems, fmt.Errorf("job %d: %w", id, &state.FileError{Op: "write", Path: "/s.db", Err: fmt.Errorf("%w: free space", state.ErrDiskFull)}))
	}
	problems = append(problems[:1], append([]error{errors.New("poll on gpu01: timeout")}, problems[1:]...)...)
	a, _, errb := fakeApp(&fakeService{pass: service.PassResult{Problems: problems}})
	if err := scheduleRun(context.Background(), a, &scheduleOptions{}); exitCode(err) != exitState {
		t.Errorf("exit %d, want %d", exitCode(err), exitState)
	}
	want := "gssh: warning: job 3: write state /s.db: no space for the state file: free space\n" +
		"gssh: warning: poll on gpu01: timeout\n" +
		"gssh: warning: 3 more changes to jobs were not stored, for the same reason (the state file's disk is full)\n"
	if errb.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errb.String(), want)
	}
}

// Cancel prints each job's outcome as the service reports it, then runs
// one pass (after the last: none of the jobs given is started meanwhile)
// and prints what started on the GPUs they freed.
func TestCancelRun(t *testing.T) {
	svc := &fakeService{cancel: map[job.ID]service.CancelResult{
		1: {Job: job.Job{ID: 1, State: job.Cancelled}, Freed: true},
		2: {Job: job.Job{ID: 2, State: job.Succeeded, Reason: "exit status 0"}},
	}, pass: service.PassResult{Started: []job.Job{{ID: 7, Placement: job.Placement{Host: "a", Indexes: []int{3}}}}}}
	a, out, errb := fakeApp(svc)
	err := cancelRun(context.Background(), a, &cancelOptions{ids: []job.ID{1, 3, 2, 4}})
	for _, r := range svc.requests {
		if c, ok := r.(service.CancelRequest); ok && !c.NoPass {
			t.Errorf("cancel %d ran its own pass", c.ID)
		}
	}
	if out.String() != "job 1 cancelled\njob 2 had already ended (succeeded: exit status 0): nothing was cancelled\njob 7 running on a:3\n" {
		t.Errorf("stdout %q", out.String())
	}
	if errb.String() != "gssh: no job 3\ngssh: no job 4\n" || exitCode(err) != exitUsage {
		t.Errorf("stderr %q, exit %d", errb.String(), exitCode(err))
	}
}

// Submit prints where the job runs, why it waits, or a dry run's answer.
func TestSubmitRun(t *testing.T) {
	for _, tt := range []struct {
		res  service.SubmitResult
		json bool
		want string
	}{
		{service.SubmitResult{Job: job.Job{ID: 4, State: job.Running, Placement: job.Placement{Host: "a", Indexes: []int{3}}}}, false, "job 4 running on a:3\n"},
		{service.SubmitResult{Job: job.Job{ID: 5, State: job.Queued, Reason: "another scheduling pass is running; the next pass (gssh schedule) will place it"},
			PassError: service.ErrPassBusy}, false, "job 5 queued: another scheduling pass is running; the next pass (gssh schedule) will place it\n"},
		{service.SubmitResult{DryRun: true, Reason: "a: 0/4 GPUs free"}, false, "would be queued: a: 0/4 GPUs free\n"},
		{service.SubmitResult{DryRun: true, WouldRun: true, Placement: job.Placement{Host: "a", Indexes: []int{0}}}, false, "would run on a:0\n"},
		{service.SubmitResult{DryRun: true, WouldRun: true, Placement: job.Placement{Host: "a", GPUs: []string{"GPU-0"}, Indexes: []int{0}}}, true,
			"{\n  \"dry_run\": true,\n  \"would_run\": true,\n  \"host\": \"a\",\n  \"gpus\": [\n    \"GPU-0\"\n  ],\n  \"gpu_indexes\": [\n    0\n  ],\n  \"reason\": \"\"\n}\n"},
	} {
		svc := &fakeService{submit: tt.res}
		a, out, _ := fakeApp(svc)
		opts := &submitOptions{argv: []string{"true"}, gpus: 1, workdir: "~", json: tt.json}
		if err := submitRun(context.Background(), a, opts); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("stdout %q, want %q", out.String(), tt.want)
		}
		if r := svc.requests[0].(service.SubmitRequest); r.Spec.Workdir != "~" || r.Spec.Argv[0] != "true" {
			t.Errorf("request %+v", r)
		}
	}
}

// gpus prints the table of what it got, and exits 2 when some host could
// not be probed; ps lists what it could read and warns of the rest.
func TestPartialAnswers(t *testing.T) {
	svc := &fakeService{
		gpus:    service.GPUsDoc{Hosts: []service.HostGPUs{{Snapshot: probe.Snapshot{Host: "a", State: probe.HostUnreachable, Error: "connect to a: refused"}}}},
		gpusErr: &service.PartialError{Failed: 1, Total: 1},
	}
	a, out, _ := fakeApp(svc)
	err := gpusRun(context.Background(), a, &gpusOptions{})
	if exitCode(err) != exitPartial || !strings.Contains(out.String(), "a\t-\t-\t-\t-\t-\t-\t-\tunreachable: connect to a: refused") {
		t.Errorf("gpus: %v, %q", err, out.String())
	}
	svc = &fakeService{jobs: service.JobsDoc{Jobs: []job.Job{{ID: 1, User: "ann", State: job.Queued}}},
		jobsErr: fmt.Errorf("list: %w: job 2: decode: bad", state.ErrBadRecord)}
	a, out, errb := fakeApp(svc)
	if err := psRun(context.Background(), a, &psOptions{}); err != nil || !strings.Contains(out.String(), "1\tann\tqueued") || !strings.Contains(errb.String(), "job 2: decode") {
		t.Errorf("ps: %v %q %q", err, out.String(), errb.String())
	}
}

// show of a queued job says where it stands, what it waits for, its
// reservation and its expected start; --json carries them under "queue".
func TestShowQueued(t *testing.T) {
	from := time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC)
	svc := &fakeService{
		job: job.Job{ID: 9, User: "bob", State: job.Queued, Reason: "gpu01: 0/4 GPUs free", ReasonCode: "no_free_gpu",
			Spec: job.Spec{Argv: []string{"train"}, GPUs: 4, Priority: 5}},
		explain: service.Explanation{Position: 2, Rank: "2nd in the queue: bob's fair-share score 1.8 ranks behind alice 0.3",
			Reason:      &sched.Reason{Code: sched.CodeNoFreeGPU, Text: "gpu01: 0/4 GPUs free (GPU 0-3: in use by gssh jobs (alice: job 3))"},
			Reservation: &sched.Reservation{Host: "gpu01", Indexes: []int{0, 1, 2, 3}, From: from},
			Forecast:    &sched.Forecast{Start: from, Placement: job.Placement{Host: "gpu01", Indexes: []int{0, 1, 2, 3}}, Estimated: true}},
	}
	a, out, _ := fakeApp(svc)
	if err := showRun(context.Background(), a, &showOptions{id: 9}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"queue:       2nd in the queue: bob's fair-share score 1.8 ranks behind alice 0.3\n",
		"waits for:   gpu01: 0/4 GPUs free (GPU 0-3: in use by gssh jobs (alice: job 3))\n",
		"reservation: reserved gpu01 GPU 0-3 from 2026-12-01 14:05 UTC\n",
		"expected:    by 2026-12-01 14:05 UTC on gpu01:0,1,2,3 (if the running jobs end at their walltimes; some have none",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, out.String())
		}
	}
	a, out, _ = fakeApp(svc)
	if err := showRun(context.Background(), a, &showOptions{id: 9, json: true}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `"id": 9,`) || !strings.Contains(s, `"queue": {`) || !strings.Contains(s, `"position": 2,`) {
		t.Errorf("show --json:\n%s", s)
	}
}

// usage prints one line per user, in the order the service gives.
func TestUsageRun(t *testing.T) {
	svc := &fakeService{usage: service.UsageDoc{PeriodS: 7 * 86400, Users: []service.UserUsage{
		{User: "bob", Weight: 2, RunningJobs: 1, RunningGPUs: 0.1 + 0.2, Queued: 3, GPUHours: 10, Decayed: 4, Score: 2, Factor: 0.707, Share: 0.25, Fair: 2.0 / 3, Rank: 1},
		{User: "ann", Weight: 1, GPUHours: 20, Decayed: 12, Score: 12, Factor: 0.125, Share: 0.75, Rank: 2},
	}}}
	a, out, _ := fakeApp(svc)
	if err := usageRun(context.Background(), a, &usageOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "USER\tWEIGHT\tRUNNING\tQUEUED\tGPU-HOURS (7d)\tDECAYED\tSCORE\tFACTOR\tSHARE\tFAIR\tRANK\n" +
		"bob\t2\t1 (0.3 GPUs)\t3\t10.0\t4.0\t2.0\t0.71\t25%\t67%\t1\n" +
		"ann\t1\t0 (0 GPUs)\t0\t20.0\t12.0\t12.0\t0.12\t75%\t0%\t2\n"
	if out.String() != want {
		t.Errorf("usage:\n%s\nwant:\n%s", out.String(), want)
	}
}

// gpus names the gssh jobs holding each GPU and what they booked.
func TestGPUHolders(t *testing.T) {
	jobs := []service.GPUJob{{Index: 0, ID: "GPU-0", Job: 14, User: "alice"}, {Index: 1, ID: "GPU-1", Job: 15, User: "bob", BookedBytes: 8 << 30},
		{Index: 1, ID: "GPU-1", Job: 16, User: "cat", BookedBytes: 4 << 30}}
	for id, want := range map[string]string{"GPU-0": "14 alice excl", "GPU-1": "15 bob 8.0 GiB, 16 cat 4.0 GiB", "GPU-2": "-", "": "-"} {
		if got := holdersCell(jobs, id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}

// cancel --user selects the user's active jobs (--job-state narrows
// them), says how many, and on a terminal asks first when more than 10.
func TestCancelSelect(t *testing.T) {
	jobs := service.JobsDoc{}
	cancel := map[job.ID]service.CancelResult{}
	for i := range 12 {
		id := job.ID(i + 1)
		st := job.Queued
		if i == 0 {
			st = job.Running
		}
		jobs.Jobs = append(jobs.Jobs, job.Job{ID: id, User: "bob", State: st})
		cancel[id] = service.CancelResult{Job: job.Job{ID: id, State: job.Cancelled}}
	}
	for _, tt := range []struct {
		opts    cancelOptions
		tty     bool
		answer  string
		cancels int
		out     string
	}{
		{cancelOptions{user: "bob"}, true, "n\n", 0, "cancel 12 active jobs of bob? [y/N] nothing cancelled\n"},
		{cancelOptions{user: "bob"}, true, "", 0, "cancel 12 active jobs of bob? [y/N] nothing cancelled\n"},
		{cancelOptions{user: "bob"}, true, "yes\n", 12, "cancel 12 active jobs of bob? [y/N] cancelling 12 active jobs of bob\n"},
		{cancelOptions{user: "bob", yes: true}, true, "", 12, "cancelling 12 active jobs of bob\n"},
		{cancelOptions{user: "bob"}, false, "", 12, "cancelling 12 active jobs of bob\n"},
		{cancelOptions{user: "bob", jobState: "running"}, true, "", 1, "cancelling 1 running job of bob\n"},
	} {
		svc := &fakeService{jobs: jobs, cancel: cancel}
		a, out, _ := fakeApp(svc)
		a.tty, a.stdin = tt.tty, strings.NewReader(tt.answer)
		opts := tt.opts
		if err := cancelRun(context.Background(), a, &opts); err != nil {
			t.Errorf("%+v: %v", tt.opts, err)
		}
		n := 0
		for _, r := range svc.requests {
			if _, ok := r.(service.CancelRequest); ok {
				n++
			}
		}
		if n != tt.cancels || !strings.HasPrefix(out.String(), tt.out) {
			t.Errorf("%+v (tty %v, %q): %d cancels, stdout %q", tt.opts, tt.tty, tt.answer, n, out.String())
		}
	}
}
