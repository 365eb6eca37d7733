package faults

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"al.essio.dev/pkg/shellescape"
	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec/sshtest"
	"github.com/gssh/gssh/state"
)

// Cycle counts of TestControllerCrash: GSSH_CRASH_CYCLES wins; make test
// runs ciCycles (about 15 s on a 2-core machine under -race), -short
// fewer; make bench (bench/crash.sh) runs 200.
const (
	ciCycles    = 20
	shortCycles = 12
)

// A gssh process killed after a random delay gets it below killSpan times
// what one of its kind (submit, schedule, cancel) took lately when nobody
// killed it (a moving average, from firstGuess), so that kills land in
// every phase of it (connect, probe, plan, claim, launch, record) on a
// fast machine or a loaded one, and some processes finish first. Half of
// these delays fall in the last part of it (from lateFrom times it on),
// where a pass claims, launches and records jobs.
const (
	killSpan   = 1.2
	lateFrom   = 0.6
	firstGuess = 400 * time.Millisecond
)

// TestControllerCrash kills the controller with SIGKILL at random points
// of many submit + pass cycles on a real fleet (three sshd hosts and the
// local one) and checks that every job a submit reported is in the state,
// that no job's command ran twice (each job appends its id and attempt
// to a file as it starts: counted on the workers), and that once the
// kills stop, clean passes bring every job to an end, leaving nothing
// launching or running and no process of the queue on any worker.
//
// Each cycle starts, at once, one to three `gssh submit`s (shared
// --mem 1G jobs, some exclusive, some pinned to a host), usually a `gssh
// schedule` and sometimes a `gssh cancel` of one of the latest jobs;
// each gets SIGKILL after a random delay (see killSpan; a fifth are left
// alone) or, in a third of the cycles, all together just after a launch
// reached a worker (see cycle): the process alone or, a third of the
// time, with its process group (the local host's launchers die too).
// Some jobs run past a walltime, which a pass enforces. The random choices come
// from the seed, which a failure prints: GSSH_CRASH_SEED=N reruns them
// (the machine's timing still varies).
func TestControllerCrash(t *testing.T) {
	t.Parallel() // each test has a fleet of its own
	sshtest.RequireSSHD(t)
	cycles := crashCycles(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GSSH_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GSSH_CRASH_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d, %d cycles", seed, cycles)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("to run it again: GSSH_CRASH_SEED=%d GSSH_CRASH_CYCLES=%d go test ./faults -run TestControllerCrash -v", seed, cycles)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	f := newFleet(t, 3)
	ran := filepath.Join(f.dir, "ran.log")
	c := &crash{f: f, rng: rng, ran: ran, names: map[job.ID]string{}, took: map[string]time.Duration{}}

	// The first submit is left alone: it creates the state file.
	r := f.gssh(c.submitArgs("c0.0")...)
	if r.code != 0 {
		t.Fatalf("first submit:\n%s", r)
	}
	c.reported(r, "c0.0")
	cluster := clusterID(t, f.state)
	t.Cleanup(func() { killQueue(cluster) })

	start := time.Now()
	var launching int // jobs a kill left launching, seen between cycles
	for cycle := 1; cycle <= cycles; cycle++ {
		c.cycle(cycle)
		js, err := readJobs(f.state)
		if err != nil {
			t.Fatalf("cycle %d: the state cannot be read after the kills: %v", cycle, err)
		}
		for _, j := range js {
			if j.State == job.Launching {
				launching++
			}
		}
	}
	crashTime := time.Since(start)

	// Clean passes until every job has ended.
	deadline := time.Now().Add(2 * time.Minute)
	var js []job.Job
	passes := 0
	for {
		r := f.gssh("schedule")
		passes++
		if r.code != 0 {
			t.Errorf("clean pass %d:\n%s", passes, r)
		}
		var err error
		if js, err = readJobs(f.state); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(js, func(j job.Job) bool { return !j.State.Terminal() }) {
			break
		}
		if time.Now().After(deadline) {
			for _, j := range js {
				if !j.State.Terminal() {
					t.Errorf("job %d (%s) stuck %s after %d clean passes: %s", j.ID, j.Spec.Name, j.State, passes, j.Reason)
				}
			}
			t.FailNow()
		}
		time.Sleep(300 * time.Millisecond)
	}

	c.check(js)
	checkBolt(t, f.state)
	if left := queueProcs(cluster); len(left) > 0 {
		t.Errorf("processes of the queue still run on the workers after every job ended: pids %v", left)
	}
	var abandoned, cancelled, timedOut int
	for _, j := range js {
		abandoned += max(0, j.Attempt-1) // no host fails: each earlier attempt was abandoned before it ran
		switch j.State {
		case job.Cancelled:
			cancelled++
		case job.Timeout:
			timedOut++
		}
	}
	t.Logf("%d cycles in %s: %d gssh processes, %d SIGKILLed (%d with their process group; in %d cycles as a launch reached a worker); "+
		"%d jobs (%d reported by their submit), %d cancelled, %d stopped at their walltime; %d times a job was left launching by the kills of a cycle; "+
		"%d abandoned attempts; %d clean passes to end every job",
		cycles, crashTime.Round(time.Second), c.runs, c.kills, c.groupKills, c.launchKills, len(js), len(c.names), cancelled, timedOut, launching, abandoned, passes)
}

// crashCycles is the number of cycles of this run (see ciCycles).
func crashCycles(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("GSSH_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("GSSH_CRASH_CYCLES=%q: want a number of cycles above 0", s)
		}
		return n
	}
	if testing.Short() {
		return shortCycles
	}
	return ciCycles
}

// crash is the state of one TestControllerCrash run.
type crash struct {
	f   *fleet
	rng *rand.Rand
	ran string // the file each job's command appends "ID.ATTEMPT" to

	names                   map[job.ID]string        // every id a submit reported → the --name it was given
	took                    map[string]time.Duration // a command's recent time when not killed (moving average)
	runs, kills, groupKills int
	launchKills             int // cycles whose processes were killed as a launch reached a worker
}

// submitArgs is a submit of a short job named name that appends its id
// and attempt to c.ran and sleeps a little (a sixth of them 3 s, half of
// those with a walltime of 2 s): shared (--mem 1G) or, a quarter of the
// time, exclusive (one whole GPU: only GPU 3 of each host has no other
// process, so those queue), pinned to a random host a fifth of the time.
func (c *crash) submitArgs(name string) []string {
	args := []string{"submit", "--name", name}
	if c.rng.IntN(4) != 0 {
		args = append(args, "--mem", "1G")
	}
	if c.rng.IntN(5) == 0 {
		args = append(args, "--host", c.f.hosts[c.rng.IntN(len(c.f.hosts))])
	}
	sleep := fmt.Sprintf("0.%d", 1+c.rng.IntN(9))
	if c.rng.IntN(6) == 0 {
		sleep = "3" // long enough for a cancel to find it running
		if c.rng.IntN(2) == 0 {
			args = append(args, "--timeout", "2s") // and for a pass to stop it at its walltime
		}
	}
	cmd := fmt.Sprintf(`echo "$GSSH_JOB_ID.$GSSH_ATTEMPT" >>%s; sleep %s`, shellescape.Quote(c.ran), sleep)
	return append(args, "--", cmd)
}

var submitted = regexp.MustCompile(`(?m)^job ([0-9]+) `)

// reported records the id a submit that exited printed for the job named
// name.
func (c *crash) reported(r result, name string) {
	m := submitted.FindStringSubmatch(r.stdout)
	if m == nil {
		c.f.t.Errorf("submit exited without a job id:\n%s", r)
		return
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	if prev, ok := c.names[job.ID(n)]; ok {
		c.f.t.Errorf("job id %d reported twice: for %s and %s", n, prev, name)
	}
	c.names[job.ID(n)] = name
}

// cycle runs one cycle's gssh processes at once, killing each at its
// random point, and checks what the ones that exited said. In a third of
// the cycles the kills wait instead for a launch to reach a worker (a new
// attempt directory) and then, 0-20 ms later, hit every process of the
// cycle still running: the launcher on the worker is then mid-way, and
// the next pass meets a launch still in flight.
func (c *crash) cycle(n int) {
	type op struct {
		args  []string
		name  string // a submit's job name
		kill  time.Duration
		group bool
	}
	var ops []op
	for k := range 1 + c.rng.IntN(3) {
		name := fmt.Sprintf("c%d.%d", n, k)
		ops = append(ops, op{args: c.submitArgs(name), name: name})
	}
	if c.rng.IntN(10) < 7 {
		ops = append(ops, op{args: []string{"schedule"}})
	}
	if c.rng.IntN(6) == 0 && len(c.names) > 0 {
		// One of the latest jobs, which may still be launching or running.
		ids := slices.Sorted(maps.Keys(c.names))
		ids = ids[max(0, len(ids)-4):]
		id := ids[c.rng.IntN(len(ids))]
		ops = append(ops, op{args: []string{"cancel", "--grace", "1s", strconv.FormatUint(uint64(id), 10)}})
	}
	onLaunch := c.rng.IntN(3) == 0
	for i := range ops {
		ops[i].kill = -1
		ops[i].group = c.rng.IntN(3) == 0
		switch {
		case onLaunch:
		case c.rng.IntN(5) != 0:
			typical := float64(cmp.Or(c.took[ops[i].args[0]], firstGuess))
			ops[i].kill = time.Duration(c.rng.Float64() * typical * killSpan)
			if c.rng.IntN(2) == 0 { // its last phases: claim, launch, record
				ops[i].kill = time.Duration(typical * (lateFrom + c.rng.Float64()*(killSpan-lateFrom)))
			}
		}
	}
	lag := time.Duration(c.rng.Int64N(int64(20 * time.Millisecond)))
	seen := c.attemptDirs()
	procs := make([]*proc, len(ops))
	for i, o := range ops {
		procs[i] = c.f.start(o.args...)
		if o.kill >= 0 {
			time.AfterFunc(o.kill, func() { procs[i].kill(o.group) })
		}
	}
	if onLaunch {
		stop := make(chan struct{})
		go func() {
			defer close(stop)
			for _, p := range procs {
				<-p.done
			}
		}()
		if c.awaitLaunch(seen, stop) {
			time.Sleep(lag)
			c.launchKills++
			for i, p := range procs {
				p.kill(ops[i].group)
			}
		}
	}
	for i, p := range procs {
		r := p.wait()
		c.runs++
		if !r.killed {
			kind := r.args[0]
			c.took[kind] = (3*cmp.Or(c.took[kind], firstGuess) + r.took) / 4
		}
		if r.killed {
			c.kills++
			if ops[i].group {
				c.groupKills++
			}
			continue
		}
		switch r.args[0] {
		case "submit":
			if r.code != 0 {
				c.f.t.Errorf("cycle %d: a submit nobody killed failed:\n%s", n, r)
			}
			c.reported(r, ops[i].name)
		case "schedule":
			if r.code != 0 {
				c.f.t.Errorf("cycle %d: a pass nobody killed failed:\n%s", n, r)
			}
		case "cancel":
			// A job that ended first is an error the cancel reports (exit 1).
			if r.code != 0 && !(r.code == 1 && strings.Contains(r.stderr, "has already ended")) {
				c.f.t.Errorf("cycle %d: a cancel nobody killed failed:\n%s", n, r)
			}
		}
	}
}

// attemptDirs are the launch attempt directories on every host now.
func (c *crash) attemptDirs() map[string]bool {
	dirs := map[string]bool{}
	for _, root := range c.f.jobRoots {
		es, _ := os.ReadDir(root)
		for _, e := range es {
			dirs[filepath.Join(root, e.Name())] = true
		}
	}
	return dirs
}

// awaitLaunch waits until a launch attempt directory that is not in seen
// appears on a host (true), or stop closes (false).
func (c *crash) awaitLaunch(seen map[string]bool, stop <-chan struct{}) bool {
	for {
		for _, root := range c.f.jobRoots {
			es, _ := os.ReadDir(root)
			for _, e := range es {
				if !seen[filepath.Join(root, e.Name())] {
					return true
				}
			}
		}
		select {
		case <-stop:
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// check compares the jobs in the state with what ran on the workers.
func (c *crash) check(js []job.Job) {
	t := c.f.t
	byID := map[job.ID]job.Job{}
	for _, j := range js {
		byID[j.ID] = j
	}
	for id, name := range c.names {
		j, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("job %d (%s): its submit reported it, but it is not in the state", id, name)
		case j.Spec.Name != name:
			t.Errorf("job %d: its submit reported it for %s, but the state has %s", id, name, j.Spec.Name)
		}
	}
	runs := map[job.ID][]string{} // id → the attempts whose command ran
	file, err := os.Open(c.ran)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if file != nil {
		defer file.Close()
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			idText, attempt, ok := strings.Cut(sc.Text(), ".")
			n, err := strconv.ParseUint(idText, 10, 64)
			if !ok || err != nil {
				t.Errorf("%s: line %q is not ID.ATTEMPT", c.ran, sc.Text())
				continue
			}
			runs[job.ID(n)] = append(runs[job.ID(n)], attempt)
		}
	}
	for id, attempts := range runs {
		j, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("job %d ran (attempts %v) but is not in the state", id, attempts)
		case len(attempts) > 1:
			t.Errorf("job %d (%s) ran %d times: attempts %v (now %s, attempt %d: %s)", id, j.Spec.Name, len(attempts), attempts, j.State, j.Attempt, j.Reason)
		}
	}
	for _, j := range js {
		attempts := runs[j.ID]
		switch j.State {
		case job.Succeeded:
			if len(attempts) != 1 || attempts[0] != strconv.Itoa(j.Attempt) {
				t.Errorf("job %d (%s) succeeded in attempt %d, but the workers saw its command run in attempts %v", j.ID, j.Spec.Name, j.Attempt, attempts)
			}
		case job.Cancelled:
		case job.Timeout:
			if j.Spec.Timeout == 0 {
				t.Errorf("job %d (%s) ended %s without a walltime: %s", j.ID, j.Spec.Name, j.State, j.Reason)
			}
		default:
			// No host failed and no command fails: anything else is a
			// fault of gssh.
			t.Errorf("job %d (%s) ended %s in attempt %d: %s (its command ran in attempts %v)", j.ID, j.Spec.Name, j.State, j.Attempt, j.Reason, attempts)
		}
	}
}

// readJobs reads every job of the state file, as the package does.
func readJobs(path string) ([]job.Job, error) {
	s, err := state.Open(path, state.Options{NoCreate: true, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return s.List(state.Filter{})
}

// clusterID is the state's cluster id.
func clusterID(t *testing.T, path string) string {
	t.Helper()
	s, err := state.Open(path, state.Options{NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.ClusterID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// checkBolt runs bbolt's own consistency check over the state file: every
// page reachable once, no page both free and in use.
func checkBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("bbolt open %s: %v", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Errorf("bbolt check of %s: %v", path, err)
	}
}

// queueProcs are the pids of the processes carrying the cluster's id in
// their environment (GSSH_CLUSTER_ID, which run.sh exports to the job):
// the queue's jobs on this machine, which every test host is.
func queueProcs(cluster string) []int {
	var pids []int
	mark := []byte("\x00GSSH_CLUSTER_ID=" + cluster + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !strings.Contains("\x00"+string(env), string(mark)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil {
			if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z") {
				continue // a zombie: it ended
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	return pids
}

// killQueue kills what is left of the cluster's jobs (a failed run's).
func killQueue(cluster string) {
	for _, pid := range queueProcs(cluster) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}
