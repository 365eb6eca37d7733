package reap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

const (
	MiB     = 1 << 20
	GiB     = 1 << 30
	cluster = "c0ffee00c0ffee00c0ffee00c0ffee00"
)

func ptr[T any](v T) *T { return &v }

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// gpu is GPU i of 80 GiB with procs on it, its memory in use what they use.
func gpu(i int, procs ...gpuinfo.Proc) gpuinfo.GPU {
	g := gpuinfo.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Health: gpuinfo.HealthOK, ProcsKnown: true,
		MemTotal: ptr(uint64(80 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(80 * GiB)), Procs: []gpuinfo.Proc{}}
	for _, p := range procs {
		p.GPUUUID = g.UUID
		if p.UsedBytes == nil {
			p.UsedBytes = ptr(uint64(GiB))
		}
		*g.MemUsed += *p.UsedBytes
		g.Procs = append(g.Procs, p)
	}
	*g.MemFree -= *g.MemUsed
	return g
}

func snap(source string, gs ...gpuinfo.GPU) gpuinfo.Snapshot {
	return gpuinfo.Snapshot{Host: "gpu01", State: gpuinfo.HostOK, Source: source, GPUs: gs}
}

// proc is a process as the helper reads it: its environment readable,
// with env's GSSH_* marks ("job/attempt" or "").
func proc(pid int, env string) gpuinfo.Proc {
	p := gpuinfo.Proc{PID: pid, Name: "python", User: "ml", UID: ptr(1000), SessionID: ptr(pid), StartTime: ptr(int64(pid * 10)), EnvRead: true}
	if id, attempt, ok := strings.Cut(env, "/"); ok {
		p.JobID, p.ClusterID, p.Attempt = id, cluster, attempt
	}
	return p
}

func jobAt(id job.ID, st job.State, attempt int, host string, pid int) job.Job {
	j := job.Job{ID: id, User: "ann", State: st, Attempt: attempt, Placement: job.Placement{Host: host, GPUs: []string{"GPU-0"}, Indexes: []int{0}},
		Remote: job.Remote{PID: pid, StartTicks: int64(pid * 10)}}
	if st.Terminal() {
		j.EndedAt = now.Add(-2 * time.Hour)
	}
	if st == job.Queued {
		j.Placement, j.Remote = job.Placement{}, job.Remote{}
	}
	return j
}

// kinds is "pid kind job/attempt" per finding.
func kinds(h Host) []string {
	var out []string
	for _, f := range h.Procs {
		out = append(out, fmt.Sprintf("%d %s %d/%d", f.Proc.PID, f.Kind, f.Job, f.Attempt))
	}
	return out
}

// Every kind, by the environment: orphans of ended jobs and of attempts
// that are not the job's current one (so killing attempt 1 never kills
// attempt 2 of the same job on the same host), foreign processes,
// another queue's, and those that cannot be told.
func TestClassify(t *testing.T) {
	other := proc(700, "")
	other.JobID, other.ClusterID = "3", "feedbeef"
	noCluster := proc(800, "")
	noCluster.JobID = "5"
	unreadable := proc(900, "")
	unreadable.EnvRead, unreadable.User = false, "bob"
	hidden := gpuinfo.Proc{PID: 28290, Name: "python", UsedBytes: ptr(uint64(GiB))} // not in this /proc
	s := snap(gpuinfo.SourceNVML,
		gpu(0, proc(100, "5/1"), proc(200, "6/1"), proc(201, "6/2")),
		gpu(1, proc(300, "7/3"), proc(400, ""), other, noCluster),
		gpu(2, unreadable, hidden, proc(500, "99/1"), proc(600, "8/1")),
	)
	in := Input{Cluster: cluster, Now: now, Jobs: []job.Job{
		jobAt(5, job.Succeeded, 1, "gpu01", 50),
		jobAt(6, job.Running, 2, "gpu01", 60),
		jobAt(7, job.Queued, 3, "", 0), // requeued: attempt 3 is over
		jobAt(8, job.Launching, 2, "gpu02", 0),
	}}
	if got, want := Wanted(cluster, s), []job.ID{5, 6, 7, 8, 99}; !reflect.DeepEqual(got, want) {
		t.Errorf("Wanted = %v, want %v", got, want)
	}
	h := Classify(in, s)
	want := []string{
		"100 orphan 5/1", "200 orphan 6/1", "201 job 6/2",
		"300 orphan 7/3", "400 foreign 0/0", "700 other_queue 3/0", "800 unattributed 0/0",
		"500 unattributed 99/1", "600 orphan 8/1", "900 unattributed 0/0", "28290 unattributed 0/0",
	}
	if got := kinds(h); !reflect.DeepEqual(got, want) {
		t.Errorf("kinds:\n got %q\nwant %q", got, want)
	}
	why := map[int]string{}
	for _, f := range h.Procs {
		why[f.Proc.PID] = f.Why
	}
	for pid, w := range map[int]string{
		100:   "job 5 succeeded 2h ago",
		200:   "attempt 1 of job 6, which is at attempt 2 now (running)",
		300:   "attempt 3 of job 7, which is queued again",
		400:   "its environment names no gssh job",
		700:   "a job of another gssh queue (cluster feed, job 3)",
		800:   "it carries GSSH_JOB_ID=5 but no GSSH_CLUSTER_ID, so no queue can be told",
		900:   "its environment cannot be read (owned by bob)",
		28290: "the pid is not visible in /proc (another PID namespace, such as a container, or it exited)",
		500:   "it carries job 99 of this queue, which the state file does not hold (or could not read)",
		600:   "attempt 1 of job 8, which is at attempt 2 now (launching)",
	} {
		if why[pid] != w {
			t.Errorf("pid %d: %q, want %q", pid, why[pid], w)
		}
	}

	// What is killed: the orphans (each with the marks the worker checks
	// again), foreign processes only where the inventory says kill.
	targets := Targets(in, h, false)
	wantT := []Target{
		{PID: 100, StartTicks: 1000, Kind: KindOrphan, Cluster: cluster, Job: 5, Attempt: 1, User: "ann"},
		{PID: 200, StartTicks: 2000, Kind: KindOrphan, Cluster: cluster, Job: 6, Attempt: 1, User: "ann"},
		{PID: 300, StartTicks: 3000, Kind: KindOrphan, Cluster: cluster, Job: 7, Attempt: 3, User: "ann"},
		{PID: 600, StartTicks: 6000, Kind: KindOrphan, Cluster: cluster, Job: 8, Attempt: 1, User: "ann"},
	}
	if !reflect.DeepEqual(targets, wantT) {
		t.Errorf("targets:\n got %+v\nwant %+v", targets, wantT)
	}
	withForeign := Targets(in, h, true)
	if len(withForeign) != 5 || withForeign[3] != (Target{PID: 400, StartTicks: 4000, Kind: KindForeign}) {
		t.Errorf("reap_foreign kill: %+v", withForeign)
	}
	for _, tg := range withForeign {
		if tg.PID == 201 || tg.PID == 700 || tg.PID >= 800 && tg.PID != 600 {
			t.Errorf("target %+v: a live job's, another queue's or an unattributed process", tg)
		}
	}

	// A process whose start time could not be read is never a target.
	noStart := proc(100, "5/1")
	noStart.StartTime = nil
	if got := Targets(in, Classify(in, snap(gpuinfo.SourceNVML, gpu(0, noStart))), true); len(got) != 0 {
		t.Errorf("no start time: targets %+v", got)
	}
	// A process on two GPUs is one target.
	two := Classify(in, snap(gpuinfo.SourceNVML, gpu(0, proc(100, "5/1")), gpu(1, proc(100, "5/1"))))
	if got := Targets(in, two, false); len(two.Procs) != 2 || len(got) != 1 {
		t.Errorf("one process on two GPUs: %d findings, targets %+v", len(two.Procs), got)
	}
}

// Through nvidia-smi no process has an environment: everything is
// unattributed, and nothing is killed, reap_foreign: kill or not.
func TestClassifyNvidiaSMI(t *testing.T) {
	p := gpuinfo.Proc{PID: 24811, Name: "python", User: "alice", UsedBytes: ptr(uint64(40552 * MiB))}
	h := Classify(Input{Cluster: cluster, Now: now}, snap("nvidia-smi", gpu(0, p)))
	if len(h.Procs) != 1 || h.Procs[0].Kind != KindUnattributed || !strings.HasPrefix(h.Procs[0].Why, "nvidia-smi shows no process environment") {
		t.Fatalf("%+v", h.Procs)
	}
	if got := Targets(Input{Cluster: cluster}, h, true); len(got) != 0 {
		t.Errorf("targets %+v", got)
	}
	// The helper's snapshot whose processes came from nvidia-smi (NVML's
	// records were bogus) says the same.
	s := snap(gpuinfo.SourceNVML, gpu(0, p))
	s.ProcsBogus = true
	if h := Classify(Input{Cluster: cluster, Now: now}, s); !strings.HasPrefix(h.Procs[0].Why, "nvidia-smi shows no process environment") {
		t.Errorf("bogus NVML records: %q", h.Procs[0].Why)
	}
}

// By session: a process without GSSH_* marks in a live job's session is
// the job's; in an ended job's, an orphan only while that session id
// cannot have been reused (SessionWindow) and only when its environment
// was read; otherwise unattributed.
func TestClassifySession(t *testing.T) {
	clean := func(pid, sid int) gpuinfo.Proc {
		p := proc(pid, "")
		p.SessionID = ptr(sid)
		return p
	}
	hidden := clean(104, 70)
	hidden.EnvRead, hidden.User = false, "ml"
	recent := jobAt(7, job.Failed, 1, "gpu01", 70)
	recent.EndedAt = now.Add(-10 * time.Minute)
	old := jobAt(8, job.Succeeded, 1, "gpu01", 80) // ended 2h ago
	elsewhere := jobAt(9, job.Succeeded, 1, "gpu02", 90)
	elsewhere.EndedAt = now
	in := Input{Cluster: cluster, Now: now, Jobs: []job.Job{jobAt(6, job.Running, 1, "gpu01", 60), recent, old, elsewhere}}
	h := Classify(in, snap(gpuinfo.SourceNVML, gpu(0, clean(101, 60), clean(102, 70), clean(103, 80), hidden, clean(105, 90))))
	want := []string{"101 job 6/1", "102 orphan 7/1", "103 unattributed 8/1", "104 unattributed 7/1", "105 foreign 0/0"}
	if got := kinds(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds:\n got %q\nwant %q", got, want)
	}
	if w := h.Procs[2].Why; w != "in the session of job 8, which succeeded 2h ago, without its GSSH_JOB_ID: that session id may be another's by now" {
		t.Errorf("old session: %q", w)
	}
	if w := h.Procs[3].Why; w != "in the session of job 7 (failed), but its environment cannot be read (owned by ml)" {
		t.Errorf("unreadable: %q", w)
	}
	got := Targets(in, h, false)
	if wantT := []Target{{PID: 102, StartTicks: 1020, Kind: KindOrphan, Session: 70, LeaderTicks: 700, User: "ann"}}; !reflect.DeepEqual(got, wantT) {
		t.Errorf("targets %+v, want %+v", got, wantT)
	}
}

// Corpus 031: the same GPU seen from the host and from inside a container.
// Inside, NVML lists host pids the container cannot see, so the panel is
// empty while 1012 MiB are in use: memory held by an invisible process,
// never idle.
func TestInvisibleCorpus031(t *testing.T) {
	b, err := os.ReadFile("testdata/corpus/031-apps-container-pid-namespace-table.txt")
	if err != nil {
		t.Fatal(err)
	}
	panels := map[string][]gpuinfo.Proc{}
	var at string
	row := regexp.MustCompile(`^\|\s+(\d+)\s+(\d+)\s+C\s+(\S+)\s+(\d+)MiB \|$`)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if l, ok := strings.CutPrefix(line, "==> "); ok {
			at = strings.TrimSuffix(l, " <==")
			panels[at] = []gpuinfo.Proc{}
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[2])
			mib, _ := strconv.ParseUint(m[4], 10, 64)
			panels[at] = append(panels[at], gpuinfo.Proc{PID: pid, Name: m[3], UsedBytes: ptr(mib * MiB)})
		}
	}
	if len(panels) != 2 || len(panels["host"]) != 1 || len(panels["inside container"]) != 0 {
		t.Fatalf("corpus 031 read as %+v", panels)
	}
	used := *panels["host"][0].UsedBytes // memory.used is the same from both sides
	for side, procs := range panels {
		g := gpuinfo.GPU{Index: 0, UUID: "GPU-0", Health: gpuinfo.HealthOK, MemTotal: ptr(uint64(16 * GiB)), MemUsed: ptr(used), MemFree: ptr(16*GiB - used), Procs: procs, ProcsKnown: true}
		h := Classify(Input{Cluster: cluster, Now: now}, snap(gpuinfo.SourceNVML, g))
		switch side {
		case "host":
			if len(h.Invisible) != 0 || len(h.Procs) != 1 || h.Procs[0].Proc.PID != 28290 || h.Procs[0].Kind != KindUnattributed {
				t.Errorf("host side: %+v", h)
			}
		default:
			if want := []Invisible{{GPU: 0, GPUID: "GPU-0", Bytes: 1012 * MiB}}; !reflect.DeepEqual(h.Invisible, want) || len(h.Procs) != 0 {
				t.Errorf("container side: %+v, want invisible %+v", h, want)
			}
		}
	}
}

// A host whose GPUs were not read has no findings; a GPU whose process
// list is unknown has none either (not even invisible memory).
func TestClassifyNothingKnown(t *testing.T) {
	down := gpuinfo.Snapshot{Host: "gpu01", State: gpuinfo.HostUnreachable}
	if h := Classify(Input{}, down); len(h.Procs)+len(h.Invisible) != 0 || h.Name != "gpu01" {
		t.Errorf("unreachable: %+v", h)
	}
	g := gpu(0)
	g.ProcsKnown, *g.MemUsed = false, 40*GiB
	if h := Classify(Input{}, snap(gpuinfo.SourceNVML, g)); len(h.Procs)+len(h.Invisible) != 0 {
		t.Errorf("unknown processes: %+v", h)
	}
}
