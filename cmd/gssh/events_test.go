package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// The table: local times, a dash for what an event has not, the details
// as key=value with the reason last; --tail keeps the last events,
// --json prints the lines as written; a log not written yet is said so.
func TestEventsTable(t *testing.T) {
	local := time.Local
	time.Local = time.UTC // the table's times are local
	defer func() { time.Local = local }()
	path := filepath.Join(t.TempDir(), eventlog.Name)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := eventlog.Open(path, eventlog.Options{Now: func() time.Time { return t0 }})
	exit := 3
	j := job.Job{ID: 4, User: "ann", Spec: job.Spec{Name: "train"}, State: job.Failed, Reason: "exit status 3", ExitCode: &exit, Attempt: 1,
		Placement: job.Placement{Host: "gpu01", Indexes: []int{0, 3}}}
	l.Write(eventlog.OfJob(t0, eventlog.JobEnd, j))
	l.Write(eventlog.Event{Time: t0.Add(time.Second), Kind: eventlog.HostDown, Host: "gpu02", Reason: "unreachable: connection refused"})
	l.Close()

	a, out, errb := fakeApp(&fakeService{events: path})
	if err := eventsRun(t.Context(), a, &eventsOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "TIME\tEVENT\tJOB\tUSER\tHOST\tDETAILS\n" +
		"2026-11-30 12:00:00.000\tjob_end\t4\tann\tgpu01\tstate=failed gpus=0,3 exit=3 attempt=1 name=train reason=\"exit status 3\"\n" +
		"2026-11-30 12:00:01.000\thost_down\t-\t-\tgpu02\treason=\"unreachable: connection refused\"\n"
	if out.String() != want || errb.Len() > 0 {
		t.Errorf("table:\n%s\nwant\n%s\nstderr %q", out, want, errb)
	}
	a, out, _ = fakeApp(&fakeService{events: path})
	if err := eventsRun(t.Context(), a, &eventsOptions{json: true, tail: 1}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &m) != nil || m["event"] != "host_down" {
		t.Errorf("--json -n 1: %q", out)
	}
	os.Remove(path)
	a, out, errb = fakeApp(&fakeService{events: path})
	if err := eventsRun(t.Context(), a, &eventsOptions{}); err != nil || out.Len() > 0 || errb.String() != "gssh: no events recorded yet at "+path+"\n" {
		t.Errorf("no log: %v, stdout %q, stderr %q", err, out, errb)
	}
}
