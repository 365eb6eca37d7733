package launch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// waitFile waits (up to 10 s) until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for range 200 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not there after 10s", path)
}

// A stop that comes after the job's command ended on its own (no poll
// recorded it yet) finds the end gate taken: it reports how the job
// ended, marks nothing, and Poll still reads the exit status.
func TestStopAfterEnd(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	for _, c := range []struct {
		j     job.Job
		state job.State
		code  int
		why   job.State
	}{
		{newJob(1301, "sleep", "0.05"), job.Succeeded, 0, job.Cancelled},
		{newJob(1302, "sh", "-c", "sleep 0.05; exit 3"), job.Failed, 3, job.Timeout},
		{newJob(1303, "sleep", "0.05"), job.Succeeded, 0, job.Preempting},
	} {
		j := start(t, p, c.j)
		waitFile(t, filepath.Join(j.Remote.Dir, "exit"))
		s, err := launch.Stop(context.Background(), p, "w", cluster, j, time.Second, c.why)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ended == nil || s.Ended.State != c.state || deref(s.Ended.ExitCode) != c.code || s.Ended.Runtime <= 0 || s.Signalled != 0 {
			t.Errorf("job %d, stop %s after its end: %+v (ended %+v), want %s %d with its run time", j.ID, c.why, s, s.Ended, c.state, c.code)
		}
		if _, err := os.Stat(filepath.Join(j.Remote.Dir, "cancelled")); err == nil {
			t.Errorf("job %d: marked cancelled although it had ended", j.ID)
		}
		if m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j}); m[j.ID].State != c.state {
			t.Errorf("job %d: poll after the stop: %+v", j.ID, m[j.ID])
		}
	}
}

// The job's end and a stop race: whichever takes the end gate first
// decides, and the stop and every later poll agree on it (never a job
// recorded cancelled whose exit status the worker holds as its end, nor
// the other way round).
func TestStopRacesTheEnd(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	var mu sync.Mutex
	seen := map[bool]int{} // ended first?
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			// The command ends 0-110 ms after its start, about when the
			// stop comes.
			j := newJob(job.ID(1310+i), "sleep", fmt.Sprintf("0.%03d", i*10))
			r, err := launch.Start(context.Background(), p, "w", cluster, j)
			if err != nil {
				t.Error(err)
				return
			}
			j.Remote = r
			s, err := launch.Stop(context.Background(), p, "w", cluster, j, time.Second, job.Cancelled)
			if err != nil {
				t.Error(err)
				return
			}
			st := waitEnd(t, p, j)
			switch {
			case s.Ended == nil && st.State != job.Cancelled:
				t.Errorf("job %d: the stop marked it, the worker says %+v", j.ID, st)
			case s.Ended != nil && (st.State != s.Ended.State || st.State != job.Succeeded):
				t.Errorf("job %d: the stop found it ended %+v, the worker says %+v", j.ID, s.Ended, st)
			}
			mu.Lock()
			seen[s.Ended != nil]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("ended first: %d, stopped first: %d", seen[true], seen[false])
}

// run.sh enforces the walltime itself: with no poll during the job (the
// controller down), it is stopped at its walltime by the worker's own
// clock, its exit file says so with its run time, and the next poll reads
// it as a timeout. A job that ends before its walltime leaves nothing
// running (the watchdog is not one of its processes).
func TestWorkerWalltime(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := newJob(1330, "sleep", "300")
	j.Spec.Timeout = time.Second
	j = start(t, p, j)
	quick := newJob(1331, "sleep", "0.2")
	quick.Spec.Timeout = time.Hour
	quick = start(t, p, quick)

	waitFile(t, filepath.Join(j.Remote.Dir, "exit"))
	if alive(j.Remote.PID) {
		t.Errorf("run.sh still runs after its walltime stop")
	}
	if left := jobProcs(t, j); len(left) > 0 {
		t.Errorf("left after the walltime: %v", left)
	}
	b, _ := os.ReadFile(filepath.Join(j.Remote.Dir, "exit"))
	if !strings.HasPrefix(string(b), "timeout\nruntime ") {
		t.Errorf("exit file %q", b)
	}
	log, _ := os.ReadFile(filepath.Join(j.Remote.Dir, "log"))
	if !strings.Contains(string(log), "gssh: the job reached its walltime of 1s on this host: SIGTERM, then SIGKILL after 10s") {
		t.Errorf("log %q", log)
	}
	m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j, quick})
	if err != nil {
		t.Fatal(err)
	}
	if st := m[j.ID]; st.State != job.Timeout || st.Runtime < time.Second || st.Runtime > 3*time.Second {
		t.Errorf("after the worker's walltime stop: %+v", st)
	}
	if st := m[quick.ID]; st.State != job.Succeeded || st.Orphans != 0 {
		t.Errorf("a job within its walltime: %+v (its watchdog counted as a leftover?)", st)
	}
	// A cancel after that keeps the timeout.
	s, err := launch.Cancel(context.Background(), p, "w", cluster, j, time.Second)
	if err != nil || s.Ended == nil || s.Ended.State != job.Timeout || s.Ended.Runtime < time.Second {
		t.Errorf("cancel after the walltime stop: %+v %v", s, err)
	}
}

// alive reports whether pid runs.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// A job directory removed by hand: the job is lost with that reason,
// naming the directory and the host, and what still runs of it is
// counted, so that the pass ends it.
func TestJobDirDeleted(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	running := start(t, p, newJob(1340, "sleep", "300"))
	ended := start(t, p, newJob(1341, "true"))
	waitFile(t, filepath.Join(ended.Remote.Dir, "exit"))
	for _, j := range []job.Job{running, ended} {
		if err := os.RemoveAll(j.Remote.Dir); err != nil {
			t.Fatal(err)
		}
	}
	m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{running, ended})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		j       job.Job
		orphans int
	}{{running, 2}, {ended, 0}} { // run.sh and its sleep
		st := m[c.j.ID]
		want := "its job directory " + c.j.Remote.Dir + " on w is gone (deleted by hand?)"
		if st.State != job.Lost || !st.Missing || st.Orphans != c.orphans || !strings.HasPrefix(st.Reason, want) {
			t.Errorf("job %d: %+v, want lost, %d processes left, %q", c.j.ID, st, c.orphans, want)
		}
	}
	if _, err := launch.Stop(context.Background(), p, "w", cluster, running, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if left := jobProcs(t, running); len(left) > 0 {
		t.Errorf("left after the stop: %v", left)
	}
}

// On a worker whose clock is hours ahead of its files' times (libfaketime
// in its sessions; a home on an NFS server with another clock is the
// same), an interactive job's keeper does not take its beats for hours
// old: the job runs to its end. Its walltime is kept by the worker's
// monotonic clock.
func TestSkewedWorkerClock(t *testing.T) {
	w := startWorker(t, sshtest.SkewedClock(t, "+5h"))
	p := w.pool(t)
	j := interactive(1350, "sleep", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := launch.Attach(ctx, p, "w", cluster, j, launch.Session{Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{},
		BeatEvery: 200 * time.Millisecond, StaleAfter: time.Second, Started: func(r job.Remote) error { j.Remote = r; return nil }})
	if err != nil {
		t.Errorf("Attach on a worker 5 h ahead: %v", err)
	}
	if st := waitEnd(t, p, j); st.State != job.Succeeded {
		t.Errorf("after: %+v", st)
	}

	k := newJob(1351, "sleep", "300")
	k.Spec.Timeout = time.Second
	k = start(t, p, k)
	waitFile(t, filepath.Join(k.Remote.Dir, "exit"))
	if st := waitEnd(t, p, k); st.State != job.Timeout || st.Runtime < time.Second || st.Runtime > 3*time.Second {
		t.Errorf("walltime 1s on a worker 5 h ahead: %+v", st)
	}
}
