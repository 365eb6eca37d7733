package main

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/service"
)

// gssh reap prints one row per process that is no running job's, each
// host it could not reach once, a line of counts, and exits 2 when a host
// could not be probed or reaped.
func TestReapRun(t *testing.T) {
	mem := uint64(20 << 30)
	svc := &fakeService{reap: service.ReapDoc{Schema: service.ReapSchema, Hosts: []service.ReapHostDoc{
		{Name: "gpu01", State: probe.HostOK, Processes: []service.ProcessDoc{
			{GPU: 0, PID: 4242, User: "ann", Name: "python", UsedBytes: &mem, Kind: reap.KindOrphan, Job: 5, Attempt: 1, JobState: job.Succeeded,
				Why: "job 5 succeeded 2h ago", Action: "killed (ended on SIGTERM)", Outcome: reap.Terminated},
			{GPU: 1, PID: 77, User: "bob", Name: "train\x1b[2J", Kind: reap.KindJob, Job: 6, Why: "job 6 (running)"},
			{GPU: 2, PID: 88, Name: "python", UsedBytes: &mem, Kind: reap.KindUnattributed, Why: "its environment cannot be read (owned by carl)",
				Action: "not killed (whose it is cannot be told)"},
		}, Invisible: []service.InvisibleDoc{{GPU: 3, Bytes: mem}}},
		{Name: "gpu02", State: probe.HostUnreachable, Error: "connect to 10.0.0.2:22: connection refused"},
	}}, reapErr: &service.PartialError{Failed: 1, Total: 2}}
	a, out, errb := fakeApp(svc)
	err := reapRun(context.Background(), a, &reapOptions{hosts: []string{"gpu01", "gpu02"}, dryRun: true})
	if code := exitCode(err); code != exitPartial {
		t.Errorf("exit %d, want %d", code, exitPartial)
	}
	if want := []any{service.ReapRequest{Hosts: []string{"gpu01", "gpu02"}, DryRun: true}}; !reflect.DeepEqual(svc.requests, want) {
		t.Errorf("requests %+v", svc.requests)
	}
	want := "HOST\tGPU\tPID\tUSER\tMEMORY\tCOMMAND\tFOUND\tDONE\n" +
		"gpu01\t0\t4242\tann\t20.0 GiB\tpython\torphan: job 5 succeeded 2h ago\tkilled (ended on SIGTERM)\n" +
		"gpu01\t2\t88\t?\t20.0 GiB\tpython\tunattributed: its environment cannot be read (owned by carl)\tnot killed (whose it is cannot be told)\n" +
		"gpu01\t3\t-\t-\t20.0 GiB\t-\tmemory held by an invisible process (in use, but no process visible: a container or another PID namespace?)\tcounted as used, never offered as free\n" +
		"gpu02\t-\t-\t-\t-\t-\tunreachable: connect to 10.0.0.2:22: connection refused\tnot reaped\n" +
		"1 of 2 hosts probed: 1 orphan (1 killed), 0 foreign processes (0 killed), 1 unattributed (never killed), 1 in running gssh jobs (left alone), invisible memory on 1 GPU\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr %q", errb)
	}
	// --json prints the document, with the same exit.
	a, out, _ = fakeApp(svc)
	if err := reapRun(context.Background(), a, &reapOptions{json: true}); exitCode(err) != exitPartial || !strings.Contains(out.String(), `"schema": "gssh.reap/v1"`) {
		t.Errorf("--json: %v\n%s", err, out)
	}
}

func TestReapFlags(t *testing.T) {
	var got *reapOptions
	capture := func(o *reapOptions) error { got = o; return nil }
	if err := run(t, newReapCmd(testApp(), capture), "--dry-run", "--host", "gpu01,gpu02", "--host", "gpu03", "--json"); err != nil {
		t.Fatal(err)
	}
	if !got.dryRun || !got.json || !reflect.DeepEqual(got.hosts, []string{"gpu01", "gpu02", "gpu03"}) {
		t.Errorf("options %+v", got)
	}
	if err := run(t, newReapCmd(testApp(), capture), "--host", ""); err == nil || !strings.Contains(err.Error(), "empty name") {
		t.Errorf("--host '': %v", err)
	}
	if err := run(t, newReapCmd(testApp(), capture), "now"); err == nil {
		t.Error("an argument was taken")
	}
}
