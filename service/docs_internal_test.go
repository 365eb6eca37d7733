package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
)

// gpus --json names an array task as an event does: "job" its id, "array"
// and "task" beside it (the task is 1_3); a job of its own has neither.
// So does a process of a task, and both name themselves "1_3" (Ref).
func TestGPUsDocTasks(t *testing.T) {
	place := job.Placement{Host: "gpu01", GPUs: []string{"GPU-0"}, Indexes: []int{0}}
	active := []job.Job{
		{ID: 2, User: "root", State: job.Running, Spec: job.Spec{MemPerGPU: 2 << 30, Array: &job.ArrayTask{Job: 1, Task: 3, Tasks: 2}}, Placement: place},
		{ID: 5, User: "root", State: job.Running, Placement: place},
	}
	reports := []fleet.Report{{Snapshot: probe.Snapshot{Host: "gpu01", State: probe.HostOK}}}
	found := []control.HostReap{{Found: reap.Host{Procs: []reap.Finding{
		{Kind: reap.KindOrphan, Job: 2, Array: active[0].Spec.Array, Attempt: 1, Proc: gpuinfo.Proc{PID: 7}},
		{Kind: reap.KindOrphan, Job: 5, Attempt: 1, Proc: gpuinfo.Proc{PID: 8}},
	}}}}
	doc := gpusDoc(time.Now(), reports, active, found)
	jobs, procs := doc.Hosts[0].Jobs, doc.Hosts[0].Processes
	if got := []string{jobs[0].Ref(), jobs[1].Ref(), procs[0].Ref(), procs[1].Ref()}; strings.Join(got, " ") != "1_3 5 1_3 5" {
		t.Errorf("refs %q, want 1_3 5 1_3 5", got)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{jobs[0], `"job":2,"array":1,"task":3,`}, {jobs[1], `"job":5,"user"`},
		{procs[0], `"job":2,"array":1,"task":3,"attempt":1`}, {procs[1], `"job":5,"attempt":1`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%s (%v), want it to hold %s", b, err, c.want)
		}
	}
}
