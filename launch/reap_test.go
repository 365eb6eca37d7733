package launch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/sshexec"
)

// proc is a real process the test started, with its start time as
// /proc/PID/stat gives it.
type proc struct {
	cmd   *exec.Cmd
	pid   int
	ticks int64
}

// spawn starts argv with env added to a clean environment (in a session
// of its own with setsid) and waits until it has exec'd comm, the
// basename of argv[0] unless it execs another program (its start time is
// then what a probe reads; an exec keeps it).
func spawn(t *testing.T, setsid bool, env []string, argv ...string) proc {
	return spawnAs(t, setsid, env, filepath.Base(argv[0]), argv...)
}

func spawnAs(t *testing.T, setsid bool, env []string, comm string, argv ...string) proc {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here (CI, on linux, has one)")
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	p := proc{cmd: c, pid: c.Process.Pid}
	for range 200 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.pid))
		if strings.TrimSpace(string(b)) == comm {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.ticks = startTicks(t, p.pid)
	return p
}

func startTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.ParseInt(f[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// running reports whether p still runs (a zombie does not).
func (p proc) running() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func marks(id job.ID, attempt int) []string {
	env := []string{"GSSH_JOB_ID=" + strconv.Itoa(int(id)), "GSSH_CLUSTER_ID=" + cluster}
	if attempt > 0 {
		env = append(env, "GSSH_ATTEMPT="+strconv.Itoa(attempt))
	}
	return env
}

// Reap checks each target on the worker before it signals it: the same
// start time, the marks that made it a target. Killing stale attempt 1 of
// job 905 never kills attempt 2 of job 905, even when asked to by mistake.
func TestReap(t *testing.T) {
	stale := spawn(t, false, marks(905, 1), "sleep", "300")
	current := spawn(t, false, marks(905, 2), "sleep", "301")
	legacy := spawn(t, false, marks(906, 0), "sleep", "302")
	foreign := spawn(t, false, []string{"HOME=/tmp"}, "sleep", "303")
	stubborn := spawnAs(t, false, marks(907, 1), "sleep", "sh", "-c", `trap "" TERM; exec sleep 304`) // SIGTERM stays ignored across exec
	reused := spawn(t, false, marks(908, 1), "sleep", "305")
	leader := spawn(t, true, nil, "sh", "-c", "sleep 306 & wait") // a session of its own: the job's run.sh
	var member int
	for range 200 {
		out, _ := exec.Command("pgrep", "-s", strconv.Itoa(leader.pid), "-x", "sleep").Output()
		if member, _ = strconv.Atoi(strings.TrimSpace(string(out))); member > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if member == 0 {
		t.Fatal("the session's sleep did not start")
	}
	t.Cleanup(func() { _ = syscall.Kill(member, syscall.SIGKILL) })
	memberTicks := startTicks(t, member)

	targets := []reap.Target{
		{PID: stale.pid, StartTicks: stale.ticks, Kind: reap.KindOrphan, Cluster: cluster, Job: 905, Attempt: 1},
		{PID: current.pid, StartTicks: current.ticks, Kind: reap.KindOrphan, Cluster: cluster, Job: 905, Attempt: 1}, // wrong: it is attempt 2
		{PID: legacy.pid, StartTicks: legacy.ticks, Kind: reap.KindOrphan, Cluster: cluster, Job: 906, Attempt: 0},
		{PID: foreign.pid, StartTicks: foreign.ticks, Kind: reap.KindForeign},
		{PID: stubborn.pid, StartTicks: stubborn.ticks, Kind: reap.KindOrphan, Cluster: cluster, Job: 907, Attempt: 1},
		{PID: reused.pid, StartTicks: reused.ticks + 1, Kind: reap.KindOrphan, Cluster: cluster, Job: 908, Attempt: 1},    // another process now
		{PID: member, StartTicks: memberTicks, Kind: reap.KindOrphan, Session: leader.pid, LeaderTicks: leader.ticks + 1}, // the leader is not the job's
	}
	got, err := launch.Reap(context.Background(), sshexec.Local{}, "local", targets, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]reap.Outcome{
		stale.pid: reap.Terminated, current.pid: reap.Gone, legacy.pid: reap.Terminated, foreign.pid: reap.Terminated,
		stubborn.pid: reap.Killed, reused.pid: reap.Gone, member: reap.Gone,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	for name, p := range map[string]proc{"stale": stale, "legacy": legacy, "foreign": foreign, "stubborn": stubborn} {
		if p.running() {
			t.Errorf("%s still runs", name)
		}
	}
	for name, p := range map[string]proc{"attempt 2": current, "the reused pid": reused} {
		if !p.running() {
			t.Errorf("%s was killed", name)
		}
	}

	// By session, with the leader still the job's; a grace of 0 kills at
	// once. A hostile cluster id never reaches the worker.
	got, err = launch.Reap(context.Background(), sshexec.Local{}, "local", []reap.Target{
		{PID: member, StartTicks: memberTicks, Kind: reap.KindOrphan, Session: leader.pid, LeaderTicks: leader.ticks},
		{PID: current.pid, StartTicks: current.ticks, Kind: reap.KindOrphan, Cluster: "x'; kill -9 -1; '", Job: 905, Attempt: 2},
	}, 0)
	if err != nil || !reflect.DeepEqual(got, map[int]reap.Outcome{member: reap.Killed}) {
		t.Errorf("by session: %v, %v", got, err)
	}
	if !current.running() {
		t.Error("attempt 2 was killed")
	}
}

// Stop and Poll of an attempt count only that attempt's processes: the
// leftover of attempt 1 is neither attempt 2's nor killed with it (it is
// the reaper's), and Reap over SSH ends it.
func TestStopMatchesAttempt(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	stale := spawn(t, true, marks(940, 1), "sleep", "307")
	j := newJob(940, "sleep", "300")
	j.Attempt = 2
	j = start(t, p, j)
	if st, err := launch.Stop(context.Background(), p, "w", cluster, j, time.Second, job.Cancelled); err != nil || st.Signalled != 2 {
		t.Fatalf("stop of attempt 2: signalled %d, %v; want its run.sh and its sleep", st.Signalled, err)
	}
	if m, err := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j}); err != nil || m[j.ID].State != job.Cancelled || m[j.ID].Orphans != 0 {
		t.Errorf("poll of attempt 2: %+v, %v", m[j.ID], err)
	}
	if !stale.running() {
		t.Fatal("attempt 1's process was killed with attempt 2")
	}
	got, err := launch.Reap(context.Background(), p, "w", []reap.Target{{PID: stale.pid, StartTicks: stale.ticks, Kind: reap.KindOrphan, Cluster: cluster, Job: 940, Attempt: 1}}, time.Second)
	if err != nil || got[stale.pid] != reap.Terminated {
		t.Errorf("reap over SSH: %v, %v", got, err)
	}
}
