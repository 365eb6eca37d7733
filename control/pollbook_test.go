package control_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// pollBook is a control.PollBook in a map.
type pollBook map[string]time.Time

func (b pollBook) LastPolled(host string) time.Time { return b[host] }
func (b pollBook) Polled(host string, at time.Time) { b[host] = at }

// TestPassLeavesOutSteadyHosts: with a PollBook, a pass less than
// PollEvery after a host's poll leaves the host out when its jobs all run
// undisturbed; a job's end is then noticed by the first pass PollEvery
// after the last poll; a cancel asked, a walltime passed, or a job still
// launching has its host polled at once.
func TestPassLeavesOutSteadyHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		book := pollBook{}
		ctl, err := control.New(control.Options{Store: r.store, Changes: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Events: r.events,
			Polls: book, PollEvery: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r.ctl = ctl
		short := r.submit(t, 0, "sleep", "1")
		r.pass(t) // it starts: nothing polled yet
		polls := func() int { r.workers.mu.Lock(); defer r.workers.mu.Unlock(); return r.workers.polls }
		r.pass(t) // polls ctl: running
		if polls() != 1 || book["ctl"].IsZero() {
			t.Fatalf("%d polls, book %v; want 1", polls(), book)
		}
		time.Sleep(1500 * time.Millisecond) // it has ended on the worker
		if res := r.pass(t); polls() != 1 || len(res.Finished) != 0 {
			t.Fatalf("a pass 1.5s after the poll: %d polls, finished %v; want none", polls(), ids(res.Finished))
		}
		time.Sleep(500 * time.Millisecond)
		if res := r.pass(t); polls() != 2 || len(res.Finished) != 1 || res.Finished[0].ID != short.ID {
			t.Fatalf("a pass 2s after the poll: %d polls, finished %v; want %d", polls(), ids(res.Finished), short.ID)
		}
		// A cancel asked: polled at once, and stopped.
		long := r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: "auto", GPUs: 1, Workdir: "~"})
		r.pass(t)
		if _, err := r.store.Update(long.ID, func(j *job.Job) error {
			j.CancelRequested = &job.CancelRequest{By: "u", At: time.Now()}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		r.pass(t)
		if got := r.get(t, long.ID); got.State != job.Cancelled {
			t.Errorf("cancel asked: %s", got.State)
		}
		// Past its walltime: polled at once, and stopped.
		third := r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: "auto", GPUs: 1, Workdir: "~", Timeout: time.Second})
		r.pass(t)
		n := polls()
		time.Sleep(1100 * time.Millisecond)
		r.pass(t)
		if got := r.get(t, third.ID); polls() != n+1 || got.State != job.Timeout {
			t.Errorf("past its walltime: %d polls after %d, state %s", polls(), n, got.State)
		}
	})
}
