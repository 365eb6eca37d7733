package control_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// A cancel of a job whose command ended on its worker before any pass
// recorded it keeps how it really ended: its exit status, its end at its
// start + its run time, and a job_end event of that end, not of a
// cancel. So does a member's cancel carried out by a pass (shared-lab
// mode).
func TestCancelAfterEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		a := r.submit(t, 5, "sleep", "1")
		r.pass(t)
		time.Sleep(5 * time.Second) // it ended after 1 s; no pass saw it
		got, err := r.ctl.Cancel(context.Background(), a.ID, time.Second, "ann")
		if err != nil || got.State != job.Succeeded || got.Reason != "exit status 0" || deref(got.ExitCode) != 0 {
			t.Fatalf("cancel after the end: %+v %v", got, err)
		}
		if !got.EndedAt.Equal(got.StartedAt.Add(time.Second)) {
			t.Errorf("ended %v, started %v: want the worker's run time", got.EndedAt, got.StartedAt)
		}
		if !slices.Contains(r.events.seen, fmt.Sprintf("job_end %d succeeded", a.ID)) || slices.Contains(r.events.seen, fmt.Sprintf("job_end %d cancelled", a.ID)) {
			t.Errorf("events %q", r.events.seen)
		}

		b := r.submit(t, 5, "exit", "3")
		r.pass(t)
		if _, recorded, err := r.ctl.RequestCancel(b.ID, time.Second, "bob"); err != nil || !recorded {
			t.Fatalf("request: %v %v", recorded, err)
		}
		res := r.pass(t)
		got = r.get(t, b.ID)
		if got.State != job.Failed || got.Reason != "exit status 3" || !slices.Equal(ids(res.Finished), []job.ID{b.ID}) {
			t.Errorf("a requested cancel of an ended job: %+v; finished %v", got, ids(res.Finished))
		}
	})
}

// A requeue of a job that had ended on its worker records that end and
// runs nothing again.
func TestRequeueAfterEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		a := r.submit(t, 5, "sleep", "1")
		r.pass(t)
		time.Sleep(2 * time.Second)
		got, err := r.ctl.Requeue(context.Background(), a.ID, time.Second, "ann")
		if !errors.Is(err, control.ErrEnded) || got.State != job.Succeeded || got.Attempt != 1 {
			t.Fatalf("requeue after the end: %+v %v", got, err)
		}
		if res := r.pass(t); len(res.Started) != 0 {
			t.Errorf("started again: %v", ids(res.Started))
		}
	})
}

// The walltime: the controller passes the job's walltime (its --timeout,
// else the policy's default_timeout) to the worker, which enforces it too,
// and leaves the record's spec as submitted. A job the worker stopped at
// its walltime while no pass ran is recorded timeout, with the usual
// reason, ended at its start + the run time the worker measured (not
// when the pass came), and counts that long in fair-share. A job that
// ended on its own just before the pass's walltime stop keeps its exit
// status.
func TestWalltimeOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sched.Policy{DefaultTimeout: 2 * time.Hour}
		r := newRig(t, pol, a100x4("ctl"))
		a := r.submit(t, 5, "train")
		r.pass(t)
		if s := r.workers.jobs[a.ID].j.Spec.Timeout; s != 2*time.Hour {
			t.Errorf("launched with walltime %v, want the policy's 2h", s)
		}
		if got := r.get(t, a.ID); got.Spec.Timeout != 0 {
			t.Errorf("the record's spec changed: timeout %v", got.Spec.Timeout)
		}
		time.Sleep(3 * time.Hour) // the controller was down
		r.workers.status[a.ID] = job.Status{State: job.Timeout, Reason: "stopped: past its walltime", Runtime: 2*time.Hour + 50*time.Millisecond}
		res := r.pass(t)
		got := r.get(t, a.ID)
		if got.State != job.Timeout || got.Reason != "ran past the default walltime of 2h0m0s (policy default_timeout): stopped" || !slices.Equal(ids(res.Finished), []job.ID{a.ID}) {
			t.Fatalf("after the worker's walltime stop: %+v", got)
		}
		if d := got.EndedAt.Sub(got.StartedAt); d != 2*time.Hour+50*time.Millisecond {
			t.Errorf("recorded runtime %v, want the worker's 2h0m0.05s", d)
		}
		usage, err := r.ctl.Usage(nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if want := sched.Usage([]job.Use{{User: "u", Started: got.StartedAt, Ended: got.EndedAt, Share: 1}}, time.Now(), r.ctl.Policy().FairShare)["u"]; usage["u"] != want {
			t.Errorf("usage %v, want %v (2 h of one GPU, not 3)", usage["u"], want)
		}

		// Past its walltime by the controller's clock, but its command
		// ended just before the stop: its exit status stands.
		b := r.submitSpec(t, job.Spec{Argv: []string{"sleep", "5"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 5, Timeout: 4 * time.Second})
		r.pass(t)
		time.Sleep(6 * time.Second)
		r.workers.status[b.ID] = job.Status{State: job.Running, PID: 1} // as the poll saw it, an instant before
		r.pass(t)
		got = r.get(t, b.ID)
		if got.State != job.Succeeded || got.Reason != "exit status 0" || !got.EndedAt.Equal(got.StartedAt.Add(5*time.Second)) {
			t.Errorf("a job that ended as its walltime came: %+v", got)
		}
	})
}

// A preemption whose signal comes after the victim ended on its own
// records that end: a job that finished is never requeued to run again.
func TestPreemptAfterEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sched.Policy{Rebalance: true, PreemptAfter: time.Minute, MinRuntime: time.Minute}
		r := newRig(t, pol, a100x4("ctl"))
		v := r.submitAs(t, "bob", preemptible(6, "sleep", "180"))
		r.pass(t)
		time.Sleep(2 * time.Minute)
		r.submitAs(t, "alice", job.Spec{Argv: []string{"sleep", "60"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 4})
		r.pass(t)
		time.Sleep(time.Minute + time.Second)                   // the victim's command ends at 3 min
		r.workers.status[v.ID] = job.Status{State: job.Running} // the poll an instant before
		res := r.pass(t)
		got := r.get(t, v.ID)
		if got.State != job.Succeeded || got.Restarts != 0 || got.Preempt != nil || !slices.Contains(ids(res.Finished), v.ID) {
			t.Fatalf("victim that ended first: %+v (finished %v, requeued %v)", got, ids(res.Finished), ids(res.Requeued))
		}
		if !strings.HasPrefix(got.Reason, "exit status 0") {
			t.Errorf("reason %q", got.Reason)
		}
	})
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
