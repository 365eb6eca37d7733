package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

func TestJobExit(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, c := range []struct {
		j    job.Job
		want int
	}{
		{job.Job{State: job.Succeeded, ExitCode: code(0)}, 0},
		{job.Job{State: job.Failed, ExitCode: code(3)}, 3},
		{job.Job{State: job.Failed, ExitCode: code(137), Signal: "KILL"}, 137},
		{job.Job{State: job.Failed, Signal: "TERM"}, 143},
		{job.Job{State: job.Failed, Signal: "SIGINT"}, 130},
		{job.Job{State: job.Failed, Signal: "34"}, 162},
		{job.Job{State: job.Timeout}, 124},
		{job.Job{State: job.Timeout, ExitCode: code(143), Signal: "TERM"}, 143},
		{job.Job{State: job.Cancelled}, 1},
		{job.Job{State: job.Lost}, 1},
		{job.Job{State: job.Failed, ExitCode: code(0)}, 1}, // failed to start: no status of its own
		{job.Job{State: job.Failed, Signal: "NOSUCH"}, 1},
	} {
		if got := jobExit(c.j); got != c.want {
			t.Errorf("%s %v %q: %d, want %d", c.j.State, c.j.ExitCode, c.j.Signal, got, c.want)
		}
	}
	// The first job that did not succeed, in the order given.
	err := jobsStatus([]job.Job{{ID: 1, State: job.Succeeded}, {ID: 2, State: job.Failed, ExitCode: code(4)}, {ID: 3, State: job.Failed, ExitCode: code(5)}})
	var js *jobStatus
	if !errors.As(err, &js) || js.code != 4 || exitCode(err) != 4 {
		t.Errorf("jobsStatus: %v", err)
	}
	if err := jobsStatus([]job.Job{{ID: 1, State: job.Succeeded}}); err != nil {
		t.Errorf("all succeeded: %v", err)
	}
}

func TestParseRefs(t *testing.T) {
	refs, err := service.ParseRefs([]string{"3,1", "3", "#2", "12_4", "12[4,6-7],13"})
	want := []service.Ref{{Job: 3, Task: -1}, {Job: 1, Task: -1}, {Job: 2, Task: -1}, {Job: 12, Task: 4}, {Job: 12, Task: 6}, {Job: 12, Task: 7}, {Job: 13, Task: -1}}
	if err != nil || !slices.Equal(refs, want) {
		t.Errorf("ParseRefs: %v %v", refs, err)
	}
	for _, bad := range []string{"1,,2", "0", "x", "12_", "12_-1", "_3", "-2", "12[", "12[]", "12[5-3]", "[3]", "12[x]"} {
		if _, err := service.ParseRefs([]string{bad}); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}

// --plot writes through a symlink to its file, keeps an existing file's
// mode, and refuses what is not a regular file.
func TestPlotTarget(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "real.svg")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.svg")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if target, mode, err := plotTarget(link); err != nil || target != file || mode != 0o600 {
		t.Errorf("a symlink: %s %v %v", target, mode, err)
	}
	if target, mode, err := plotTarget(filepath.Join(dir, "new.svg")); err != nil || mode != 0o644 || filepath.Base(target) != "new.svg" {
		t.Errorf("a new file: %s %v %v", target, mode, err)
	}
	for _, bad := range []string{dir, "/dev/null"} {
		if _, _, err := plotTarget(bad); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if err := checkPlotPath(filepath.Join(dir, "nodir", "x.svg")); err == nil || !strings.Contains(err.Error(), "cannot write in") {
		t.Errorf("a missing directory: %v", err)
	}
}

// One task of a whole array skipped is "1 task ... was skipped".
func TestHoldsSkippedOne(t *testing.T) {
	a := testApp()
	res := []service.HoldResult{{Job: job.Job{ID: 5}, Err: control.ErrEnded}}
	if err := a.printHolds(res, map[job.ID]bool{5: true}, func(job.Job) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if got, want := a.stderr.(*bytes.Buffer).String(), "gssh: 1 task of the arrays given was skipped: it was in no state for it"; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want %q...", got, want)
	}
}
