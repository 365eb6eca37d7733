package service

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/reap"
)

// Every change the controller reports is written as a line of its kind,
// one of the event log's, with the fields of that kind; a job it reports
// cancelled is one job_end.
func TestLogLines(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	used := uint64(1 << 30)
	j := job.Job{ID: 5, User: "ann", State: job.Cancelled, Reason: "cancelled by bob", Attempt: 1, Placement: job.Placement{Host: "h1", Indexes: []int{2}}}
	for _, c := range []struct {
		ev   control.Event
		line string // what the line must hold
	}{
		{control.Event{Kind: eventlog.JobStart, Job: j}, `"job":5,"user":"ann","host":"h1","gpus":[2]`},
		{control.Event{Kind: eventlog.JobEnd, Job: j}, `"state":"cancelled","reason":"cancelled by bob"`},
		{control.Event{Kind: eventlog.JobRequeue, Job: j}, `"job":5`},
		{control.Event{Kind: eventlog.JobPreempt, Job: job.Job{ID: 5, Preempt: &job.Preemption{For: 9}}}, `"for":9`},
		{control.Event{Kind: eventlog.JobUnknown, Job: j}, `"job":5`},
		{control.Event{Kind: eventlog.JobAdopted, Job: j}, `"job":5`},
		{control.Event{Kind: eventlog.JobGPUFailed, Job: j}, `"job":5`},
		{control.Event{Kind: eventlog.StrayKilled, Job: j, Host: "h1"}, `"reason":"attempt 1, given up on h1 while it did not answer, ran there still: killed"`},
		{control.Event{Kind: eventlog.JobRecovered, Job: job.Job{ID: 5, State: job.Succeeded, Attempt: 1, ExitCode: new(int), ReasonCode: "result_recovered"}, Host: "h1"},
			`"job":5,"state":"succeeded","attempt":1,"exit":0,"reason_code":"result_recovered"`},
		{control.Event{Kind: eventlog.StrayIgnored, Job: job.Job{ID: 5, State: job.Succeeded, Attempt: 1, Placement: job.Placement{Host: "h1"}}, Host: "h1"},
			`"job":5,"host":"h1","state":"succeeded","attempt":1`},
		{control.Event{Kind: eventlog.HostDown, Host: "h1", Record: &health.Host{LastError: "unreachable: refused", FailingSince: now}},
			`"host":"h1","reason":"unreachable: refused","since":"2026-11-30T12:00:00.000Z"`},
		{control.Event{Kind: eventlog.HostUp, Host: "h1", Record: &health.Host{}}, `"host":"h1"}`},
		{control.Event{Kind: eventlog.GPUFailed, Host: "h1", GPU: &health.GPU{Index: 3, Why: "lost", Since: now}}, `"host":"h1","gpus":[3],"reason":"lost"`},
		{control.Event{Kind: eventlog.GPUHealthy, Host: "h1", GPU: &health.GPU{Index: 3, Why: "lost", Since: now}}, `"gpus":[3],"reason":"healthy in the probes in a row it needs, after it read lost"`},
		{control.Event{Kind: eventlog.OrphanReaped, Host: "h1", Job: j, Reaped: &control.Reaped{Outcome: reap.Terminated,
			Finding: reap.Finding{GPU: 1, Job: 5, Attempt: 1, Why: "job 5 cancelled 2m ago", Proc: gpuinfo.Proc{PID: 42, Name: "python", User: "ann", UsedBytes: &used}}}},
			`"job":5,"user":"ann","host":"h1","gpus":[1],"reason":"job 5 cancelled 2m ago","attempt":1,"pid":42,"process":"python","outcome":"terminated","process_user":"ann","memory_bytes":1073741824`},
		{control.Event{Kind: eventlog.ForeignKilled, Host: "h1", Reaped: &control.Reaped{Outcome: reap.Killed, Finding: reap.Finding{GPU: 0, Proc: gpuinfo.Proc{PID: 7, Name: "miner"}}}},
			`"host":"h1","gpus":[0],"pid":7,"process":"miner","outcome":"killed"`},
	} {
		c.ev.Time = now
		e := logLine(c.ev)
		if e.Kind != c.ev.Kind || !eventlog.Known(e.Kind) {
			t.Errorf("%s: kind %s", c.ev.Kind, e.Kind)
			continue
		}
		path := filepath.Join(t.TempDir(), eventlog.Name)
		lg := eventlog.Open(path, eventlog.Options{Now: func() time.Time { return now }})
		lg.Write(e)
		lg.Close()
		var line string
		eventlog.Read(path, eventlog.Filter{}, func(r eventlog.Record) error { line = string(r.Line); return nil }, nil)
		if !strings.Contains(line, c.line) {
			t.Errorf("%s: line %s\nwant it to hold %s", c.ev.Kind, line, c.line)
		}
	}
}

// The drain work's events go through logEvent, at the service's clock.
func TestLogDrain(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "h1"}}}
	l := New(Options{StatePath: filepath.Join(dir, "state.db"), Now: func() time.Time { return now }, Fleet: fleet.Options{Inventory: inv}})
	l.logEvent(eventlog.Drain(time.Time{}, "h1", "root", "driver upgrade", now.Add(time.Hour)))
	l.logEvent(eventlog.Resume(time.Time{}, "h1", "root"))
	l.Close()
	var lines []string
	eventlog.Read(filepath.Join(dir, eventlog.Name), eventlog.Filter{}, func(r eventlog.Record) error { lines = append(lines, string(r.Line)); return nil }, nil)
	want := []string{
		`{"time":"2026-11-30T12:00:00.000Z","event":"host_drain","host":"h1","reason":"driver upgrade","by":"root","from":"2026-11-30T13:00:00.000Z"}`,
		`{"time":"2026-11-30T12:00:00.000Z","event":"host_resume","host":"h1","by":"root"}`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
