package service

import (
	"errors"
	"testing"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/reap"
)

// What gssh reap says it did to each process, in words a lab admin
// reads: for each worker outcome, a dry run, a host whose reap failed,
// and the processes it leaves alone.
func TestReapActions(t *testing.T) {
	f := func(pid int, k reap.Kind) reap.Finding {
		return reap.Finding{Kind: k, Proc: gpuinfo.Proc{PID: pid}}
	}
	found := reap.Host{Procs: []reap.Finding{f(1, reap.KindOrphan), f(2, reap.KindOrphan), f(3, reap.KindOrphan), f(4, reap.KindForeign),
		f(5, reap.KindOrphan), f(6, reap.KindJob), f(7, reap.KindForeign), f(8, reap.KindUnattributed), f(9, reap.KindOtherQueue), f(10, reap.KindOrphan)}}
	h := control.HostReap{Found: found, Reaped: []control.Reaped{
		{Finding: found.Procs[0], Outcome: reap.Terminated}, {Finding: found.Procs[1], Outcome: reap.Killed},
		{Finding: found.Procs[2], Outcome: reap.Denied}, {Finding: found.Procs[3], Outcome: reap.Survived},
		{Finding: found.Procs[4], Outcome: reap.Gone},
	}}
	want := []string{
		"killed (ended on SIGTERM)", "killed (SIGKILL after the grace)",
		"not killed: not permitted (the login may not signal another user's process)",
		"not killed: still there after SIGKILL (stuck in the kernel or the driver?)",
		"gone before the kill (it exited, or it is not the process the probe saw)",
		"", "reported (reap_foreign: report)", "not killed (whose it is cannot be told)", "left to its own queue",
		"not killed: its start time could not be read, so it cannot be told from a process given its pid since",
	}
	check := func(name string, docs []ProcessDoc, want []string) {
		t.Helper()
		for i, d := range docs {
			if d.Action != want[i] {
				t.Errorf("%s: pid %d: %q, want %q", name, d.PID, d.Action, want[i])
			}
		}
	}
	check("reap", processDocs(h, false, true), want)
	dry := append([]string{"would kill", "would kill", "would kill", "would kill", "would kill"}, want[5:]...)
	check("dry run", processDocs(h, true, true), dry)
	h.Err = errors.New("reap on gpu01: unreachable: connect: connection refused")
	check("failed host", processDocs(h, false, true)[:1], []string{"not killed: reap on gpu01: unreachable: connect: connection refused"})
	for _, d := range processDocs(h, false, false) {
		if d.Action != "" || d.Outcome != "" {
			t.Errorf("gssh gpus shows an action: %+v", d)
		}
	}
}
