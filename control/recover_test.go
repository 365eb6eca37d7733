package control_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// cutOff runs a job (--requeue or not) on h1, then cuts h1 off until the
// pass that gives the attempt up: recorded lost, or queued again and,
// with a second host, started there as attempt 2. It returns the rig
// and the job's start (attempt 1's, on the controller's clock).
func cutOff(t *testing.T, requeue bool, hosts ...sched.Host) (*hostRig, job.Job) {
	t.Helper()
	r := newHostRig(t, nil, hosts...)
	a := r.submit(t, "h1", requeue)
	r.pass(t)
	if _, err := r.store.Update(a.ID, func(x *job.Job) error { x.Spec.Host = "auto"; return nil }); err != nil {
		t.Fatal(err)
	}
	first := r.get(t, a.ID)
	r.fleet.setDown("h1", true)
	for range 4 {
		r.pass(t)
		time.Sleep(20 * time.Second)
	}
	time.Sleep(5 * time.Minute)
	r.pass(t)
	return r, first
}

func (r *hostRig) seen(kind string, id job.ID, state job.State) bool {
	return slices.Contains(r.events.seen, fmt.Sprintf("%s %d %s", kind, id, state))
}

// A host that answers again after its job was given up: the attempt that
// finished there while it was cut off is the job's result. The job
// queued again by --requeue is not run again; one started elsewhere is
// stopped.
func TestReturningHostResultKept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		requeue bool
		hosts   []sched.Host
		given   job.State // the job after it was given up
	}{
		{"requeued, still queued", true, []sched.Host{idleHost("h1", 1)}, job.Queued},
		{"requeued, running elsewhere", true, []sched.Host{idleHost("h1", 1), idleHost("h2", 1)}, job.Running},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, first := cutOff(t, tc.requeue, tc.hosts...)
				id := first.ID
				given := r.get(t, id)
				if given.State != tc.given {
					t.Fatalf("given up: job %s (%s), want %s", given.State, given.Reason, tc.given)
				}
				r.fleet.exit(id, 1, 0, 2*time.Minute) // it finished while h1 was cut off
				time.Sleep(time.Minute)
				r.fleet.setDown("h1", false)
				res := r.pass(t)

				j := r.get(t, id)
				if j.State != job.Succeeded || j.Attempt != 1 || j.ExitCode == nil || *j.ExitCode != 0 || j.Placement.Host != "h1" || j.ReasonCode != "result_recovered" ||
					!strings.Contains(j.Reason, "attempt 1 finished on h1 while h1 did not answer: its result counts") {
					t.Fatalf("after h1 answered: job %s attempt %d exit %v on %q, %q (%s); want succeeded, attempt 1's exit 0 on h1, recovered",
						j.State, j.Attempt, j.ExitCode, j.Placement.Host, j.Reason, j.ReasonCode)
				}
				if want := first.StartedAt.Add(2 * time.Minute); !j.StartedAt.Equal(first.StartedAt) || !j.EndedAt.Equal(want) {
					t.Errorf("started %s ended %s, want attempt 1's start %s and end %s (its start + its run time)", j.StartedAt, j.EndedAt, first.StartedAt, want)
				}
				if !r.seen("job_result_recovered", id, job.Succeeded) || !r.seen("job_end", id, job.Succeeded) {
					t.Errorf("events %q: want job_result_recovered and job_end, succeeded", r.events.seen)
				}
				if !slices.Contains(ids(res.Finished), id) || len(res.Errors) != 0 {
					t.Errorf("pass finished %v, errors %v", ids(res.Finished), res.Errors)
				}
				// Fair-share counts attempt 1 once, as booked until it was
				// given up (and attempt 2's run, if it ran): what the
				// ledger holds is what the record says.
				uses, err := r.store.Uses(time.Time{})
				if err != nil || len(uses) != len(j.Runs) {
					t.Errorf("uses %+v (%v), want the %d runs only", uses, err, len(j.Runs))
				}
				if _, counted := j.Use(); counted {
					t.Errorf("the recovered attempt's run is counted twice: in Runs and as the job's own use")
				}
				switch tc.given {
				case job.Running: // attempt 2 ran on h2: stopped, its run counted
					if !slices.Contains(r.fleet.stops, fmt.Sprintf("%d.2@h2", id)) || len(j.Runs) != 2 || !strings.Contains(j.Reason, "attempt 2, placed on h2 meanwhile, was stopped") {
						t.Errorf("stops %v, runs %v, reason %q: want attempt 2 stopped on h2, its run counted", r.fleet.stops, j.Runs, j.Reason)
					}
					all := j.AllAttempts()
					if len(all) != 2 || all[0].N != 1 || all[0].State != job.Succeeded || all[1].N != 2 || all[1].Host != "h2" || all[1].Ended != job.AttemptSuperseded || all[1].State != job.Cancelled {
						t.Errorf("attempts %+v: want 1 succeeded on h1, 2 on h2 superseded (cancelled)", all)
					}
				case job.Queued:
					if !strings.Contains(j.Reason, "is not run again") || len(j.Runs) != 1 || len(j.AllAttempts()) != 1 {
						t.Errorf("reason %q, runs %v, attempts %+v: want the requeue dropped, one run, one attempt", j.Reason, j.Runs, j.AllAttempts())
					}
				}
				r.pass(t)
				if got := r.fleet.running(); len(got) != 0 {
					t.Errorf("running %v, want nothing: the job has its result", got)
				}
				starts := 0
				for _, e := range r.events.seen {
					if e == fmt.Sprintf("job_start %d running", id) {
						starts++
					}
				}
				if want := map[job.State]int{job.Queued: 1, job.Running: 2}[tc.given]; starts != want {
					t.Errorf("events %q: %d starts, want %d", r.events.seen, starts, want)
				}
				if hs, _ := r.store.Hosts(); len(hs["h1"].Strays) != 0 {
					t.Errorf("h1 strays %+v, want none", hs["h1"].Strays)
				}
			})
		})
	}
}

// An attempt still running on the host that answers again is killed, as
// before: the job's attempt elsewhere goes on.
func TestReturningHostRunningAttemptKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, first := cutOff(t, true, idleHost("h1", 1), idleHost("h2", 1))
		r.fleet.setDown("h1", false)
		res := r.pass(t)
		j := r.get(t, first.ID)
		if j.State != job.Running || j.Attempt != 2 || j.Placement.Host != "h2" || len(res.Strays) != 1 || !slices.Contains(r.fleet.stops, fmt.Sprintf("%d.1@h1", first.ID)) {
			t.Fatalf("job %s attempt %d on %s, strays killed %d, stops %v; want attempt 1 killed on h1, attempt 2 running on h2", j.State, j.Attempt, j.Placement.Host, len(res.Strays), r.fleet.stops)
		}
		if r.seen("job_result_recovered", first.ID, job.Succeeded) {
			t.Errorf("events %q", r.events.seen)
		}
	})
}

// Both attempts finished: the one that finished first counts, each end
// on the controller's clock (its start plus its run time). A later
// attempt's end recorded before the host answered stands.
func TestReturningHostBothFinished(t *testing.T) {
	for _, tc := range []struct {
		name           string
		run1, run2     time.Duration // attempt 1's and 2's run times
		recordedBefore bool          // a pass records attempt 2's end before h1 answers
		want           job.State
		wantAttempt    int
	}{
		{"the first finished first", 2 * time.Minute, time.Second, false, job.Succeeded, 1},
		{"the second finished first", 20 * time.Minute, time.Second, false, job.Failed, 2},
		{"the second's end recorded first", 2 * time.Minute, time.Second, true, job.Failed, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, first := cutOff(t, true, idleHost("h1", 1), idleHost("h2", 1))
				id := first.ID
				r.fleet.exit(id, 2, 1, tc.run2)
				if tc.recordedBefore {
					time.Sleep(time.Second)
					r.pass(t)
					if j := r.get(t, id); j.State != job.Failed {
						t.Fatalf("attempt 2 ended: job %s", j.State)
					}
				}
				r.fleet.exit(id, 1, 0, tc.run1)
				time.Sleep(20 * time.Minute)
				r.fleet.setDown("h1", false)
				r.pass(t)
				j := r.get(t, id)
				if j.State != tc.want || j.Attempt != tc.wantAttempt {
					t.Fatalf("job %s attempt %d (%s), want %s, attempt %d", j.State, j.Attempt, j.Reason, tc.want, tc.wantAttempt)
				}
				if tc.want == job.Failed && !r.seen("stray_result_ignored", id, job.Succeeded) {
					t.Errorf("events %q: want stray_result_ignored of attempt 1 (succeeded)", r.events.seen)
				}
				if tc.want == job.Succeeded {
					all := j.AllAttempts()
					if len(all) != 2 || all[1].State != job.Failed || all[1].Ended != job.AttemptSuperseded || !strings.Contains(j.Reason, "attempt 2 on h2, which finished after it, does not") {
						t.Errorf("attempts %+v, reason %q: want attempt 2 superseded, failed", all, j.Reason)
					}
				}
			})
		})
	}
}

// A job without --requeue recorded lost keeps its end (an end is final):
// what its attempt was found to have done is added to its reason, and
// said by stray_result_ignored.
func TestReturningHostLostJobKeepsItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, first := cutOff(t, false, idleHost("h1", 1))
		r.fleet.exit(first.ID, 1, 0, 2*time.Minute)
		r.fleet.setDown("h1", false)
		res := r.pass(t)
		j := r.get(t, first.ID)
		if j.State != job.Lost || !strings.Contains(j.Reason, "found to have ended there (exit status 0)") || len(res.Errors) != 0 {
			t.Fatalf("job %s %q, errors %v; want lost, the exit status found in its reason", j.State, j.Reason, res.Errors)
		}
		if !r.seen("stray_result_ignored", first.ID, job.Succeeded) {
			t.Errorf("events %q: want stray_result_ignored, succeeded", r.events.seen)
		}
	})
}

// The later attempt's host does not answer either when the earlier
// result is found: the result counts, and the later attempt is killed
// when its host answers (a stray of it), never left running.
func TestReturningHostLaterAttemptAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, first := cutOff(t, true, idleHost("h1", 1), idleHost("h2", 1))
		id := first.ID
		r.fleet.exit(id, 1, 0, 2*time.Minute)
		time.Sleep(time.Minute)
		r.fleet.setDown("h2", true)
		r.fleet.setDown("h1", false)
		r.pass(t)
		j := r.get(t, id)
		if j.State != job.Succeeded || j.Attempt != 1 || !strings.Contains(j.Reason, "attempt 2, placed on h2 meanwhile, is killed when h2 answers") {
			t.Fatalf("job %s attempt %d %q; want attempt 1's success, attempt 2 left to kill", j.State, j.Attempt, j.Reason)
		}
		if hs, _ := r.store.Hosts(); !hs["h2"].HasStray(id, 2) {
			t.Fatalf("h2 strays %+v, want attempt 2", hs["h2"].Strays)
		}
		r.fleet.setDown("h2", false)
		r.pass(t)
		if got := r.fleet.running(); len(got) != 0 || !slices.Contains(r.fleet.stops, fmt.Sprintf("%d.2@h2", id)) {
			t.Errorf("running %v, stops %v: want attempt 2 killed on h2", got, r.fleet.stops)
		}
		if j := r.get(t, id); j.State != job.Succeeded || j.Attempt != 1 {
			t.Errorf("job %s attempt %d after h2 answered", j.State, j.Attempt)
		}
	})
}
