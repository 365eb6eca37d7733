package faults

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// submitters is how many `gssh submit`s TestConcurrentSubmitters starts at
// once: GSSH_SUBMITTERS wins (bench/ runs more), -short runs fewer.
const (
	ciSubmitters    = 100
	shortSubmitters = 20
)

// TestConcurrentSubmitters starts 100 `gssh submit` processes at the same
// moment against one sshd host and the local host (both the a100x4
// fixture), with the default --state-wait, as a sweep script does. Each
// probes the hosts over a fresh connection, stores its job and runs a
// pass (or leaves it to the pass that holds the pass lock). It checks that
// every submit exits 0 with its own id, that every job is in the state
// under the name it was given, that no GPU is booked past what it has
// (an exclusive job alone on its GPU, --mem jobs within its free memory),
// and that bbolt's consistency check passes. It logs the longest state
// transaction ($GSSH_STATE_TRACE: how long one operation held the lock)
// and the slowest submit.
func TestConcurrentSubmitters(t *testing.T) {
	t.Parallel() // each test has a fleet of its own
	sshtest.RequireSSHD(t)
	n := ciSubmitters
	if testing.Short() {
		n = shortSubmitters
	}
	if s := os.Getenv("GSSH_SUBMITTERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("GSSH_SUBMITTERS=%q: want a number above 0", s)
		}
	}
	f := newFleet(t, 1)
	trace := filepath.Join(f.dir, "state-trace.jsonl")
	f.env = append(f.env, "GSSH_STATE_TRACE="+trace)

	// The first submit creates the state file (and learns the cluster id,
	// to kill what the jobs leave behind).
	names := map[job.ID]string{}
	first := f.gssh(submitterArgs(-1)...)
	if first.code != 0 {
		t.Fatalf("first submit:\n%s", first)
	}
	record := func(r result, name string) {
		m := submitted.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Errorf("submit %s exited 0 without a job id:\n%s", name, r)
			return
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if prev, dup := names[job.ID(id)]; dup {
			t.Errorf("job id %d reported twice: for %s and %s", id, prev, name)
		}
		names[job.ID(id)] = name
	}
	record(first, "s-1")
	cluster := clusterID(t, f.state)
	t.Cleanup(func() { killQueue(cluster) })

	start := time.Now()
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = f.start(submitterArgs(i)...)
	}
	var slowest result
	for i, p := range procs {
		r := p.wait()
		if r.took > slowest.took {
			slowest = r
		}
		if r.code != 0 {
			t.Errorf("submit %d of %d failed:\n%s", i+1, n, r)
			continue
		}
		record(r, fmt.Sprintf("s%d", i))
	}
	took := time.Since(start)

	js, err := readJobs(f.state)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != n+1 || len(js) != n+1 {
		t.Errorf("%d submits reported %d distinct ids; the state holds %d jobs; want %d of each", n+1, len(names), len(js), n+1)
	}
	byID := map[job.ID]job.Job{}
	for _, j := range js {
		byID[j.ID] = j
	}
	for id, name := range names {
		switch j, ok := byID[id]; {
		case !ok:
			t.Errorf("job %d (%s): its submit reported it, but it is not in the state", id, name)
		case j.Spec.Name != name:
			t.Errorf("job %d: its submit reported it for %s, but the state has %s", id, name, j.Spec.Name)
		}
	}
	running := checkBookings(t, js, fixtureFree(t))
	checkBolt(t, f.state)

	ops := readTrace(t, trace, f.state)
	longest := slices.MaxFunc(ops, func(a, b traceOp) int { return cmp.Compare(a.Held, b.Held) })
	waited := slices.MaxFunc(ops, func(a, b traceOp) int { return cmp.Compare(a.Waited, b.Waited) })
	var writes int
	for _, o := range ops {
		if o.Write {
			writes++
		}
	}
	t.Logf("%d submits at once: all done in %s; %d jobs running, %d queued; slowest submit %s", n, took.Round(time.Millisecond), running, len(js)-running, slowest.took.Round(time.Millisecond))
	t.Logf("%d state operations (%d writes); the longest held the lock %.1f ms (%s), the longest wait for it %.1f ms (%s)", len(ops), writes, 1000*longest.Held, longest.Op, 1000*waited.Waited, waited.Op)
}

// submitterArgs is submit i's command line: a job named s<i> that sleeps,
// exclusive (a whole GPU) one time in three, else with --mem 20G.
func submitterArgs(i int) []string {
	args := []string{"submit", "--name", fmt.Sprintf("s%d", i)}
	if i%3 != 0 {
		args = append(args, "--mem", "20G")
	}
	return append(args, "--", "sleep 120")
}

// fixtureFree is the free memory (bytes) of each GPU of the a100x4
// fixture, by UUID, as its nvidia-smi reports it (memory.free, MiB).
func fixtureFree(t *testing.T) map[string]uint64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "probe", "testdata", "fleet", "a100x4", "query-gpu.csv"))
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(strings.NewReader(string(data)))
	r.TrimLeadingSpace = true
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	free := map[string]uint64{}
	for _, rec := range recs {
		mib, err := strconv.ParseUint(rec[6], 10, 64)
		if err != nil {
			t.Fatalf("query-gpu.csv: %v", err)
		}
		free[rec[1]] = mib << 20
	}
	return free
}

// checkBookings checks that the jobs holding GPUs (launching or running)
// never share a host's GPU past what it has: a job that takes its GPUs
// whole is alone on each, and the --mem jobs on one fit its free memory.
// It returns how many jobs hold GPUs.
func checkBookings(t *testing.T, js []job.Job, free map[string]uint64) int {
	t.Helper()
	type gpu struct{ host, uuid string }
	on := map[gpu][]job.Job{}
	holding := 0
	for _, j := range js {
		if j.State != job.Running && j.State != job.Launching {
			if j.State != job.Queued {
				t.Errorf("job %d (%s) is %s: %s", j.ID, j.Spec.Name, j.State, j.Reason)
			}
			continue
		}
		holding++
		for _, u := range j.Placement.GPUs {
			on[gpu{j.Placement.Host, u}] = append(on[gpu{j.Placement.Host, u}], j)
		}
	}
	for g, jobs := range on {
		var mem uint64
		for _, j := range jobs {
			if j.Spec.MemPerGPU == 0 && len(jobs) > 1 {
				t.Errorf("%s GPU %s: job %d takes it whole, yet %d jobs are booked on it", g.host, g.uuid, j.ID, len(jobs))
			}
			mem += j.Spec.MemPerGPU
		}
		if mem > free[g.uuid] {
			t.Errorf("%s GPU %s: %d jobs book %d MiB, more than its %d MiB free", g.host, g.uuid, len(jobs), mem>>20, free[g.uuid]>>20)
		}
	}
	if holding == 0 {
		t.Error("no job holds a GPU: no pass placed any")
	}
	return holding
}

// traceOp is one line of $GSSH_STATE_TRACE.
type traceOp struct {
	PID    int     `json:"pid"`
	Op     string  `json:"op"`
	Write  bool    `json:"write"`
	Waited float64 `json:"waited_s"`
	Held   float64 `json:"held_s"`
	Err    string  `json:"error"`
}

// readTrace reads the state trace the gssh processes wrote; an operation
// that failed for the state file (busy, unreadable: a *state.FileError,
// which names the file) is an error of the test.
func readTrace(t *testing.T, path, state string) []traceOp {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var ops []traceOp
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var o traceOp
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if strings.Contains(o.Err, " state "+state+": ") {
			t.Errorf("state operation %s of pid %d failed: %s", o.Op, o.PID, o.Err)
		}
		ops = append(ops, o)
	}
	if len(ops) == 0 {
		t.Fatalf("%s: no state operation traced", path)
	}
	return ops
}
