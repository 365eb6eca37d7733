package control_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// A member's cancel in shared-lab mode: a queued job is cancelled at
// once, an active one's cancel is recorded without touching its worker
// and carried out by the next pass, as asked (grace, by whom).
func TestRequestCancel(t *testing.T) {
	r := newRig(t, sched.Policy{}, a100x4("ctl"))
	run := r.submit(t, 5, "train")
	r.pass(t)
	queued := r.submit(t, 5, "train")
	r.pass(t)
	j, recorded, err := r.ctl.RequestCancel(queued.ID, time.Second, "bob")
	if err != nil || recorded || j.State != job.Cancelled || j.Reason != "cancelled by bob" {
		t.Fatalf("queued: %+v %v %v", j, recorded, err)
	}
	j, recorded, err = r.ctl.RequestCancel(run.ID, 3*time.Second, "bob")
	if err != nil || !recorded || j.State != job.Running || j.CancelRequested == nil || j.CancelRequested.By != "bob" {
		t.Fatalf("running: %+v %v %v", j, recorded, err)
	}
	if _, again, err := r.ctl.RequestCancel(run.ID, time.Second, "cat"); err != nil || !again {
		t.Fatalf("asked again: %v %v", again, err)
	}
	if len(r.workers.cancelled) != 0 {
		t.Fatalf("stopped on the worker before a pass: %q", r.workers.cancelled)
	}
	res := r.pass(t)
	got := r.get(t, run.ID)
	if got.State != job.Cancelled || got.Reason != "cancelled by bob" || len(res.Finished) != 1 || res.Finished[0].ID != run.ID {
		t.Errorf("after the pass: %+v; finished %+v", got, res.Finished)
	}
	if want := []string{fmt.Sprintf("%d 3s", run.ID)}; !slices.Equal(r.workers.cancelled, want) {
		t.Errorf("stopped on the worker: %q, want %q (the first request's grace)", r.workers.cancelled, want)
	}
	if _, _, err := r.ctl.RequestCancel(run.ID, time.Second, "bob"); !errors.Is(err, control.ErrEnded) {
		t.Errorf("ended: %v", err)
	}
}
