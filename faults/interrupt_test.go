package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec/sshtest"
	"github.com/gssh/gssh/testenv"
)

// interruptSteps is how many points of a command's run the sweep signals
// it at, from at once to a little past the time it takes (steps-1 of
// steps-2 parts of it): $GSSH_INTERRUPT_STEPS (make bench runs 16), else
// 8, the short version make test runs.
func interruptSteps(t *testing.T) int {
	t.Helper()
	s := os.Getenv("GSSH_INTERRUPT_STEPS")
	if s == "" {
		return 8
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 4 {
		t.Fatalf("GSSH_INTERRUPT_STEPS=%q: want a number of steps of at least 4", s)
	}
	return n
}

// TestInterruptedController sends the signals a person or a service
// manager sends (SIGINT: Ctrl-C; SIGTERM: systemd, timeout(1)) to gssh
// submit and gssh schedule at points across their run on a real sshd
// host: submits that launch their job in their own pass (SIGINT at
// interruptSteps points, SIGTERM at half as many), and passes that launch jobs stored while flock
// held the pass lock (the submits stored them queued), SIGTERM a
// quarter, half and three quarters in. The points are fractions of what the same command took when
// left alone, so they land in every phase (connect, probe, plan, claim,
// launch, record) on a fast machine or a loaded one. Afterwards, two
// clean passes on, every process of the queue's jobs on the workers is a
// job running in the queue, in its current attempt, and cancelling every
// job leaves none.
func TestInterruptedController(t *testing.T) {
	t.Parallel() // each test has a fleet of its own
	sshtest.RequireSSHD(t)
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Need(t, "flock not found: apt-get install -y util-linux")
	}
	f := newFleet(t, 1)
	submit := []string{"submit", "--host", "w1", "--mem", "1G", "--", "sleep", "121"}
	if r := f.gssh(submit...); r.code != 0 { // creates the state file
		t.Fatalf("first submit:\n%s", r)
	}
	cluster := clusterID(t, f.state)
	t.Cleanup(func() { killQueue(cluster) })
	clean := func(args ...string) time.Duration {
		t.Helper()
		r := f.gssh(args...)
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		return r.took
	}
	interrupt := func(sig syscall.Signal, after time.Duration, args ...string) {
		p := f.start(args...)
		time.Sleep(after)
		p.signal(sig)
		if r := p.wait(); r.code != 0 && r.code != 130 && r.code != 143 && r.code != 1 {
			t.Logf("%s (%s after %s)", r, sig, after)
		}
	}
	took := clean(submit...)
	steps := interruptSteps(t)
	for i := range steps {
		interrupt(syscall.SIGINT, took*time.Duration(i)/time.Duration(steps-2), submit...)
	}
	for i := range steps / 2 {
		interrupt(syscall.SIGTERM, took*time.Duration(2*i)/time.Duration(steps-2), submit...)
	}
	lock := f.state + ".pass.lock"
	for i := range 4 {
		hold := exec.Command("flock", lock, "sleep", "2.3")
		if err := hold.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		var queued []*proc
		for range 3 {
			queued = append(queued, f.start(submit...))
		}
		for _, p := range queued {
			if r := p.wait(); r.code != 0 || !strings.Contains(r.stdout, "queued") {
				t.Logf("a submit while the pass lock was held: %s", r)
			}
		}
		hold.Wait()
		if i == 0 {
			took = clean("schedule") // launches the first three: the measure
			continue
		}
		interrupt(syscall.SIGTERM, took*time.Duration(i)/4, "schedule")
	}

	clean("schedule")
	clean("schedule")
	js, err := readJobs(f.state)
	if err != nil {
		t.Fatal(err)
	}
	var running, ids []string
	for _, j := range js {
		switch {
		case j.State == job.Running:
			running = append(running, fmt.Sprintf("%d.%d", j.ID, j.Attempt))
			ids = append(ids, strconv.Itoa(int(j.ID)))
		case !j.State.Terminal():
			t.Errorf("job %d is %s two clean passes after the signals: %s", j.ID, j.State, j.Reason)
			ids = append(ids, strconv.Itoa(int(j.ID)))
		}
	}
	slices.Sort(running)
	if worker := queueAttempts(cluster); !slices.Equal(running, worker) {
		t.Errorf("the queue and the worker disagree:\nrunning in the queue (job.attempt): %v\nprocesses on the worker: %v", running, worker)
	}
	if len(running) == 0 {
		t.Errorf("no job runs after the sweep: the check compared nothing")
	}
	t.Logf("%d jobs, %d running after the sweep", len(js), len(running))

	clean(append([]string{"cancel", "--grace", "1s"}, ids...)...)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left := queueAttempts(cluster)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the queue still run 10 s after every job was cancelled: %v", left)
		}
	}
}

// queueAttempts are the jobs' attempts ("ID.ATTEMPT", sorted, each once)
// whose processes run on this machine (every test host is it) carrying
// the cluster's id: GSSH_JOB_ID and GSSH_ATTEMPT of their environment.
func queueAttempts(cluster string) []string {
	var out []string
	for _, pid := range queueProcs(cluster) {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			continue // ended meanwhile
		}
		var id, attempt string
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GSSH_JOB_ID="); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(kv, "GSSH_ATTEMPT="); ok {
				attempt = v
			}
		}
		if a := id + "." + attempt; !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}
