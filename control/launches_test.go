package control_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// TestPassLaunchesAtOnce: with Options.Launches 4, a pass's launches run
// four at once (each Start here waits until four have begun, or would
// wait forever one after the other), and its result lists them in plan
// order all the same.
func TestPassLaunchesAtOnce(t *testing.T) {
	r := &rig{store: state.NewMem(), lab: &lab{hosts: []sched.Host{a100x4("ctl")}}, workers: newWorkers(), events: &events{}}
	ctl, err := control.New(control.Options{Store: r.store, Changes: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Events: r.events, Launches: 4})
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	var want []job.ID
	for range 8 {
		want = append(want, r.submitSpec(t, job.Spec{Argv: []string{"true"}, Host: "auto", GPUs: 1, Workdir: "~", MemPerGPU: 1 << 30}).ID)
	}
	var mu sync.Mutex
	begun := 0
	all := make(chan struct{})
	r.workers.onStart = func(job.Job) {
		mu.Lock()
		if begun++; begun == 4 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Error("a launch waited 10 s for three others to begin beside it: they run one after the other")
		}
	}
	res, err := r.ctl.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Started); !slices.Equal(got, want) {
		t.Errorf("started %v, want all of %v in plan order", got, want)
	}
	for _, id := range want {
		if j := r.get(t, id); j.State != job.Running {
			t.Errorf("job %d: %s, want running", id, j.State)
		}
	}
}
