package service

import (
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// logAttempt picks the attempt whose log gssh logs prints: the current
// one, the latest that ran for a job queued again, the one asked for;
// and refuses one the job never had, or one that never started.
func TestLogAttempt(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	preempted := job.Attempt{N: 1, Host: "gpu01", GPUs: []int{2}, Dir: "/h/.gssh/jobs/c-7.1", StartedAt: t0, EndedAt: t0.Add(time.Hour), State: job.Cancelled, Ended: job.AttemptPreempted}
	failed := job.Attempt{N: 2, Host: "gpu02", Ended: job.AttemptLaunchFailed, Reason: "launch failed: no space"}
	queued := job.Job{ID: 7, State: job.Queued, Attempt: 2, Attempts: []job.Attempt{preempted, failed}, AttemptHosts: []string{"gpu01", "gpu02"}}
	running := job.Job{ID: 7, State: job.Running, Attempt: 3, Attempts: []job.Attempt{preempted, failed}, AttemptHosts: []string{"gpu01", "gpu02", "gpu03"},
		Placement: job.Placement{Host: "gpu03", Indexes: []int{0}}, Remote: job.Remote{Dir: "/h/.gssh/jobs/c-7.3", PID: 42}, StartedAt: t0.Add(2 * time.Hour)}
	old := job.Job{ID: 8, State: job.Succeeded, Attempt: 2, AttemptHosts: []string{"gpu01", "gpu02"}, Placement: job.Placement{Host: "gpu02"}, Remote: job.Remote{Dir: "/d"}}
	for _, c := range []struct {
		name    string
		j       job.Job
		n       int
		attempt int
		host    string
		dir     string
		current bool
		err     string
	}{
		{"queued again: the latest that ran", queued, 0, 1, "gpu01", "/h/.gssh/jobs/c-7.1", false, ""},
		{"running: the current one", running, 0, 3, "gpu03", "/h/.gssh/jobs/c-7.3", true, ""},
		{"the current one by number", running, 3, 3, "gpu03", "/h/.gssh/jobs/c-7.3", true, ""},
		{"an earlier one", running, 1, 1, "gpu01", "/h/.gssh/jobs/c-7.1", false, ""},
		{"one that never started", running, 2, 0, "", "", false, "attempt 2 of job 7 never started on gpu02 (launch failed: no space): it has no log"},
		{"one it never had", running, 4, 0, "", "", false, "job 7 has no attempt 4: its attempts are 1 to 3 (gssh show 7 lists them)"},
		{"an old record's earlier attempt", old, 1, 1, "gpu01", "", false, ""},
		{"never launched", job.Job{ID: 9, State: job.Queued}, 0, 0, "", "", false, "job 9 has no log: it has not started"},
		{"never launched, by number", job.Job{ID: 9, State: job.Queued}, 1, 0, "", "", false, "job 9 has no attempt 1: it has not been launched"},
	} {
		got, current, err := logAttempt(c.j, c.n)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case got.Attempt != c.attempt || got.Placement.Host != c.host || got.Remote.Dir != c.dir || current != c.current:
			t.Errorf("%s: attempt %d on %s dir %q current %v; want %d on %s dir %q current %v", c.name, got.Attempt, got.Placement.Host, got.Remote.Dir, current, c.attempt, c.host, c.dir, c.current)
		case !current && got.Remote.PID != 0:
			t.Errorf("%s: an earlier attempt carries the current pid %d (logs -f would follow it)", c.name, got.Remote.PID)
		}
	}
}
