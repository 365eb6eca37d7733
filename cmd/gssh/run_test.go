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

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// fakeService answers every call with what the test put in it.
type fakeService struct {
	gpus     service.GPUsDoc
	gpusErr  error
	submit   service.SubmitResult
	jobs     service.JobsDoc
	jobsErr  error
	cancel   map[job.ID]job.Job
	pass     service.PassResult
	passErr  error
	requests []any
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
func (f *fakeService) Jobs(context.Context, service.JobQuery) (service.JobsDoc, error) {
	return f.jobs, f.jobsErr
}
func (f *fakeService) Job(context.Context, job.ID) (job.Job, error) { return job.Job{}, nil }
func (f *fakeService) Logs(context.Context, service.LogsRequest, io.Writer) (service.LogsResult, error) {
	return service.LogsResult{}, nil
}
func (f *fakeService) Cancel(_ context.Context, r service.CancelRequest) (job.Job, error) {
	if j, ok := f.cancel[r.ID]; ok {
		return j, nil
	}
	return job.Job{}, fmt.Errorf("%w %d", state.ErrNotFound, r.ID)
}
func (f *fakeService) Schedule(context.Context, service.ScheduleRequest) (service.PassResult, error) {
	return f.pass, f.passErr
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
			Problems: tt.problems,
		}}
		a, out, errb := fakeApp(svc)
		err := scheduleRun(context.Background(), a, &scheduleOptions{})
		if got := exitCode(err); got != tt.code {
			t.Errorf("problems %v: exit %d, want %d", tt.problems, got, tt.code)
		}
		if out.String() != "job 2 failed: exit status 3\njob 1 running on gpu01:0,1\n" {
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

// Cancel prints each job's outcome as the service reports it.
func TestCancelRun(t *testing.T) {
	svc := &fakeService{cancel: map[job.ID]job.Job{
		1: {ID: 1, State: job.Cancelled},
		2: {ID: 2, State: job.Succeeded, Reason: "exit status 0"},
	}}
	a, out, errb := fakeApp(svc)
	err := cancelRun(context.Background(), a, &cancelOptions{ids: []job.ID{1, 3, 2, 4}})
	if out.String() != "job 1 cancelled\njob 2 ended meanwhile (succeeded: exit status 0)\n" {
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
	if exitCode(err) != exitPartial || !strings.Contains(out.String(), "a\t-\t-\t-\t-\t-\t-\tunreachable: connect to a: refused") {
		t.Errorf("gpus: %v, %q", err, out.String())
	}
	svc = &fakeService{jobs: service.JobsDoc{Jobs: []job.Job{{ID: 1, User: "ann", State: job.Queued}}},
		jobsErr: fmt.Errorf("list: %w: job 2: decode: bad", state.ErrBadRecord)}
	a, out, errb := fakeApp(svc)
	if err := psRun(context.Background(), a, &psOptions{}); err != nil || !strings.Contains(out.String(), "1\tann\tqueued") || !strings.Contains(errb.String(), "job 2: decode") {
		t.Errorf("ps: %v %q %q", err, out.String(), errb.String())
	}
}
