package control_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// submitAs queues a job of user with spec s.
func (r *rig) submitAs(t *testing.T, user string, s job.Spec) job.Job {
	t.Helper()
	j, err := r.store.Submit(job.Job{User: user, Spec: s, SubmittedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func preemptible(prio int, argv ...string) job.Spec {
	return job.Spec{Argv: argv, Host: "auto", GPUs: 1, Workdir: "~", Priority: prio, Preemptible: true}
}

// A preemptible job of a lower class is preempted for one that waited
// preempt_after: signalled and preempting (its GPU still booked), then,
// once gone, back in the queue under its id with Restarts 1 and its run
// recorded; the waiting job starts in that pass, and the preempted one
// runs again later with GSSH_RESTART_COUNT 1 and finishes.
func TestPreemptRequeuesAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sched.Policy{Rebalance: true, PreemptAfter: time.Minute, MinRuntime: time.Minute}
		r := newRig(t, pol, a100x4("ctl")) // only GPU 3 is free
		v := r.submitAs(t, "bob", preemptible(6, "sleep", "600"))
		if res := r.pass(t); !slices.Equal(ids(res.Started), []job.ID{v.ID}) {
			t.Fatalf("started %v", ids(res.Started))
		}
		time.Sleep(2 * time.Minute)
		w := r.submitAs(t, "alice", job.Spec{Argv: []string{"sleep", "60"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 4})
		if res := r.pass(t); len(res.Preempted) != 0 {
			t.Fatalf("preempted %v for a job that has not waited preempt_after", ids(res.Preempted))
		}
		time.Sleep(time.Minute)
		res := r.pass(t)
		if !slices.Equal(ids(res.Preempted), []job.ID{v.ID}) || len(res.Started) != 0 {
			t.Fatalf("preempted %v, started %v", ids(res.Preempted), ids(res.Started))
		}
		got := r.get(t, v.ID)
		want := "preempted for job 2 of alice (priority 4 ranks ahead of 6)"
		if got.State != job.Preempting || got.Reason != want || got.Preempt == nil || got.Preempt.For != w.ID || !got.Preempt.At.Equal(time.Now()) {
			t.Fatalf("victim %s %q %+v", got.State, got.Reason, got.Preempt)
		}
		if got := r.get(t, w.ID); got.State != job.Queued {
			t.Fatalf("waiting job %s", got.State)
		}

		res = r.pass(t) // the victim ended on its SIGTERM
		if !slices.Equal(ids(res.Requeued), []job.ID{v.ID}) || !slices.Equal(ids(res.Started), []job.ID{w.ID}) {
			t.Fatalf("requeued %v, started %v", ids(res.Requeued), ids(res.Started))
		}
		got = r.get(t, v.ID)
		if got.State != job.Queued || got.Restarts != 1 || len(got.Runs) != 1 || got.Preempt != nil || got.ReasonCode == "" {
			t.Fatalf("victim after: %s restarts %d runs %v %q (%s)", got.State, got.Restarts, got.Runs, got.Reason, got.ReasonCode)
		}
		if a := got.Attempts; len(a) != 1 || a[0].N != 1 || a[0].Ended != job.AttemptPreempted || a[0].State != job.Cancelled || !strings.HasPrefix(a[0].Reason, "preempted for job") || a[0].StartedAt.IsZero() {
			t.Errorf("victim's attempts %+v: want attempt 1 preempted, cancelled, with the reason", a)
		}
		if d := got.Runs[0].Ended.Sub(got.Runs[0].Started); d != 3*time.Minute {
			t.Errorf("the run recorded lasted %v, want 3m: its GPU was booked until the pass saw it gone", d)
		}

		time.Sleep(61 * time.Second) // the waiting job ends; the victim runs again
		res = r.pass(t)
		if !slices.Equal(ids(res.Started), []job.ID{v.ID}) || res.Started[0].Attempt != 2 {
			t.Fatalf("started %+v", res.Started)
		}
		if n := len(r.workers.restarts); r.workers.restarts[n-1] != 1 || r.workers.restarts[0] != 0 {
			t.Errorf("restart counts at each start %v, want the last 1 (GSSH_RESTART_COUNT)", r.workers.restarts)
		}
		for range 30 {
			time.Sleep(30 * time.Second)
			r.pass(t)
		}
		if got := r.get(t, v.ID); got.State != job.Succeeded || got.Restarts != 1 {
			t.Errorf("victim at the end: %s, restarts %d", got.State, got.Restarts)
		}
		if r.workers.preempts != 1 {
			t.Errorf("%d preemptions, want 1", r.workers.preempts)
		}
		wantEv := []string{"job_start 1 running", "job_preempt 1 preempting", "job_requeue 1 queued", "job_start 2 running", "job_end 2 succeeded", "job_start 1 running", "job_end 1 succeeded"}
		if !slices.Equal(r.events.seen, wantEv) {
			t.Errorf("events %q, want %q", r.events.seen, wantEv)
		}
	})
}

// A victim still running after its --signal-grace is killed by the first
// pass past it, then requeued; no pass before waits or kills.
func TestPreemptKillsAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sched.Policy{Rebalance: true, PreemptAfter: time.Second, MinRuntime: time.Second}
		r := newRig(t, pol, a100x4("ctl"))
		s := preemptible(6, "sleep", "600")
		s.SignalGrace = 30 * time.Second
		v := r.submitAs(t, "bob", s)
		r.workers.ignoreTerm = map[job.ID]bool{v.ID: true}
		r.pass(t)
		time.Sleep(time.Minute)
		w := r.submitAs(t, "alice", job.Spec{Argv: []string{"sleep", "60"}, Host: "auto", GPUs: 1, Workdir: "~", Priority: 4})
		time.Sleep(2 * time.Second)
		began := time.Now()
		if res := r.pass(t); !slices.Equal(ids(res.Preempted), []job.ID{v.ID}) {
			t.Fatalf("preempted %v", ids(res.Preempted))
		}
		if time.Since(began) != 0 {
			t.Errorf("the pass took %v of virtual time: it waited on the grace", time.Since(began))
		}
		for range 2 {
			time.Sleep(10 * time.Second)
			if res := r.pass(t); len(res.Requeued)+len(res.Started)+len(res.Preempted) != 0 {
				t.Fatalf("within the grace: requeued %v, started %v, preempted %v", ids(res.Requeued), ids(res.Started), ids(res.Preempted))
			}
		}
		if n := len(r.workers.cancelled); n != 1 {
			t.Fatalf("stops within the grace: %v", r.workers.cancelled)
		}
		time.Sleep(10 * time.Second)
		res := r.pass(t)
		if !slices.Equal(ids(res.Requeued), []job.ID{v.ID}) || !slices.Equal(ids(res.Started), []job.ID{w.ID}) {
			t.Fatalf("requeued %v, started %v", ids(res.Requeued), ids(res.Started))
		}
		if got := res.Requeued[0]; !strings.Contains(got.Reason, "killed after its 30s grace; requeued") || got.Restarts != 1 {
			t.Errorf("victim: %q, restarts %d", got.Reason, got.Restarts)
		}
		if want := []string{"1 0s", "1 0s"}; !slices.Equal(r.workers.cancelled, want) {
			t.Errorf("stops %v, want the SIGTERM, then the kill", r.workers.cancelled)
		}
	})
}

// Two users of one class share one GPU by fair-share without thrashing:
// the second user's job preempts the first once the first user's score
// is worse by more than min_runtime of use, runs to its end (the first
// user does not outrank it again within its run), and the first runs
// again and ends; every run a preemption ended lasted min_runtime.
func TestPreemptNoThrashing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sched.Policy{Rebalance: true, PreemptAfter: 5 * time.Minute, MinRuntime: 10 * time.Minute,
			FairShare: sched.FairShare{Window: 24 * time.Hour}}
		r := newRig(t, pol, a100x4("ctl"))
		a := r.submitAs(t, "a", preemptible(5, "sleep", "900"))
		r.pass(t)
		time.Sleep(time.Minute)
		b := r.submitAs(t, "b", preemptible(5, "sleep", "900"))
		for range 2 * 60 * 2 { // two hours of passes every 30 s
			time.Sleep(30 * time.Second)
			r.pass(t)
		}
		for _, id := range []job.ID{a.ID, b.ID} {
			j := r.get(t, id)
			if j.State != job.Succeeded {
				t.Errorf("job %d is %s after two hours", id, j.State)
			}
			for _, u := range j.Runs {
				if d := u.Ended.Sub(u.Started); d < pol.MinRuntime {
					t.Errorf("job %d preempted after a run of %v", id, d)
				}
			}
		}
		if p := r.workers.preempts; p != 1 {
			t.Errorf("%d preemptions, want 1", p)
		}
		if j := r.get(t, a.ID); j.Restarts != 1 || len(j.Runs) != 1 {
			t.Errorf("job %d: restarts %d, runs %v", a.ID, j.Restarts, j.Runs)
		}
	})
}
