package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gssh/gssh/job"
)

// drainWaitOnTTY runs gssh drain --wait's loop with stderr on a
// pseudo-terminal and returns what the terminal showed.
func drainWaitOnTTY(t *testing.T, quiet bool) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var shown bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&shown, ptmx); close(read) }()
	j3 := job.Job{ID: 3, User: "alice", State: job.Running, Placement: job.Placement{Host: "a100"}}
	j4 := job.Job{ID: 4, User: "bob", State: job.Running, Placement: job.Placement{Host: "a100"}}
	a, out, _ := fakeApp(&fakeService{drainJobs: [][]job.Job{{j3, j4}, {j4}, {}}})
	a.stderr = tty
	if err := drainWait(context.Background(), a, []string{"a100"}, 10*time.Millisecond, 0, quiet); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
	}
	if !strings.Contains(out.String(), "no gssh jobs left on a100") {
		t.Errorf("stdout %q", out)
	}
	return shown.String()
}

// On a terminal gssh drain --wait draws a bar of the jobs gone on
// stderr, and clears it; --quiet draws nothing. (Not on a terminal:
// TestDrainWait's stderr holds only the waiting lines.)
func TestDrainWaitProgress(t *testing.T) {
	shown := drainWaitOnTTY(t, false)
	if !strings.Contains(shown, "jobs gone from a100") || !strings.Contains(shown, "(0/2)") || !strings.Contains(shown, "waiting for 2 gssh jobs on a100") {
		t.Errorf("the terminal showed %q", shown)
	}
	if shown := drainWaitOnTTY(t, true); shown != "" {
		t.Errorf("--quiet: the terminal showed %q", shown)
	}
}
