package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

// Every change of a job's life is one line of the event log beside the
// state file, whichever call made it: submit, start, end (with its
// state), hold, release, update, cancel.
func TestEventLog(t *testing.T) {
	l := newLab(t, false)
	ctx := context.Background()
	s := spec("sh", "-c", "exit 3")
	s.MemPerGPU = 1 << 30
	l.submit(t, s) // job 1 runs and fails
	l.waitEnd(t, 1)
	held := spec("sleep", "30") // exclusive: GPU 3, the only idle one
	if _, err := l.svc.Submit(ctx, service.SubmitRequest{Spec: held, Hold: true}); err != nil {
		t.Fatal(err)
	}
	prio := 2
	if res, err := l.svc.Update(ctx, service.UpdateRequest{IDs: []job.ID{2}, Priority: &prio}); err != nil || res[0].Err != nil {
		t.Fatalf("update: %v %+v", err, res)
	}
	if res, err := l.svc.Hold(ctx, []job.ID{2}); err != nil || res[0].Err != nil { // held already: no change, no event
		t.Fatalf("hold: %v %+v", err, res)
	}
	if res, err := l.svc.Release(ctx, []job.ID{2}); err != nil || res[0].Err != nil || res[0].Job.State != job.Running {
		t.Fatalf("release: %v %+v", err, res)
	}
	if _, err := l.svc.Cancel(ctx, service.CancelRequest{ID: 2, Grace: service.DefaultGrace}); err != nil {
		t.Fatal(err)
	}
	l.svc.Close() // as gssh does when it exits: nothing is left to write

	var got []string
	res, err := l.svc.Events(ctx, service.EventQuery{Warn: func(s string) { t.Error(s) }}, func(r eventlog.Record) error {
		if !json.Valid(r.Line) {
			t.Errorf("line %q", r.Line)
		}
		got = append(got, fmt.Sprintf("%s %d %v %v", r.Kind, r.Job, r.Fields["state"], r.Fields["by"]))
		return nil
	})
	if err != nil || res.None || res.Path != filepath.Join(filepath.Dir(l.state), "events.log") {
		t.Fatalf("Events: %+v, %v", res, err)
	}
	want := []string{
		"job_submit 1 queued <nil>", "job_start 1 running <nil>", "job_end 1 failed <nil>",
		"job_submit 2 queued <nil>", "job_update 2 queued ann", "job_release 2 queued ann", "job_start 2 running <nil>",
		"job_end 2 cancelled <nil>",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var end eventlog.Record
	l.svc.Events(ctx, service.EventQuery{Filter: eventlog.Filter{Job: 1, Kinds: []eventlog.Kind{eventlog.JobEnd}}}, func(r eventlog.Record) error { end = r; return nil })
	if end.User != "ann" || end.Host != "ctl" || fmt.Sprint(end.Fields["exit"]) != "3" || end.Fields["reason"] != "exit status 3" || end.Fields["gpus"] == nil {
		t.Errorf("job 1's job_end: %s", end.Line)
	}
	if fi, err := os.Stat(res.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("event log %v, %v; want mode 0600", fi, err)
	}
}

// Before anything was recorded, the log is reported missing, not empty.
func TestEventsNoneYet(t *testing.T) {
	l := newLab(t, false)
	res, err := l.svc.Events(context.Background(), service.EventQuery{}, func(eventlog.Record) error { t.Error("an event"); return nil })
	if err != nil || !res.None {
		t.Errorf("Events: %+v, %v; want None", res, err)
	}
}
