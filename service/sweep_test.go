package service_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// sshLab is a service over one real OpenSSH worker "w" on loopback whose
// nvidia-smi replays the a100x4 fixture (GPU 3 idle, 0-2 busy with other
// people's processes), under the policy given (default: none).
func sshLab(t *testing.T, policy ...sched.Policy) *lab {
	t.Helper()
	return sshLabConfig(t, "", policy...)
}

// sshLabConfig is sshLab with extra appended to the worker's
// sshd_config (sshtest.SSHDOptions.ExtraConfig).
func sshLabConfig(t *testing.T, extra string, policy ...sched.Policy) *lab {
	t.Helper()
	sshtest.RequireSSHD(t)
	root, _ := filepath.Abs("..")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	os.Symlink(filepath.Join(root, "probe/testdata/fake-nvidia-smi"), filepath.Join(bin, "nvidia-smi"))
	key := sshtest.NewKey(t, dir, "")
	s := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: "127.0.4.1", AuthorizedKeys: []string{key.AuthorizedLine},
		SetEnv: map[string]string{"PATH": bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR": filepath.Join(root, "probe/testdata/fleet/a100x4")}, ExtraConfig: extra})
	host, port, _ := net.SplitHostPort(s.Addr)
	p, _ := strconv.Atoi(port)
	settings := sshconfig.Settings{Alias: "w", HostName: host, Port: p, User: s.User, IdentityFiles: []string{key.Path},
		IdentitiesExplicit: true, IdentitiesOnly: true, StrictHostKeyChecking: "yes",
		UserKnownHostsFiles: []string{sshtest.KnownHosts(t, dir, s.KnownHostsLine)}}
	l := &lab{state: filepath.Join(t.TempDir(), "state.db"), home: s.Home}
	l.svc = service.New(service.Options{
		Fleet: fleet.Options{Inventory: &inventory.Inventory{Hosts: []inventory.Host{{Name: "w", ReservePct: 10}}, Policy: inventory.Policy{Plan: append(policy, sched.Policy{})[0]}},
			Home: dir, SSH: resolver{"w": settings}, ConnectTimeout: 5 * time.Second},
		StatePath: l.state, StateExplicit: true, User: "ann",
		PassWait: 50 * time.Millisecond, // a submit under a held lock queues at once
	})
	t.Cleanup(func() { l.svc.Close() })
	return l
}

// ours lists the processes on this machine (the worker is loopback) that
// carry cluster's GSSH_CLUSTER_ID, by "job.attempt".
func ours(t *testing.T, cluster string) map[string]int {
	out := map[string]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("GSSH_CLUSTER_ID="+cluster+"\x00")) {
			continue
		}
		env := map[string]string{}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				env[k] = v
			}
		}
		if stat, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie runs nothing
		}
		out[env["GSSH_JOB_ID"]+"."+env["GSSH_ATTEMPT"]]++
	}
	return out
}

// sweepRounds is how many cut points TestInterruptSweep tries in each
// sweep: $GSSH_SWEEP_ROUNDS (make bench runs 20), else 8, the short
// version make test runs (cuts at quarters of a launch's time, from none
// of it to almost twice it).
func sweepRounds(t *testing.T) int {
	t.Helper()
	s := os.Getenv("GSSH_SWEEP_ROUNDS")
	if s == "" {
		return 8
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 5 {
		t.Fatalf("GSSH_SWEEP_ROUNDS=%q: want a number of rounds of at least 5", s)
	}
	return n
}

// SIGINT of gssh submit, and of gssh schedule, swept across the launch:
// the call's context is cancelled at every fraction of a launch's time
// (sweepRounds of them).
// Afterwards (two passes to resolve what was cut) every process on the
// worker is a running job of the queue, in its current attempt, every
// running job has its processes, no GPU is booked past its room, and
// cancelling every job leaves nothing running.
func TestInterruptSweep(t *testing.T) {
	l := sshLab(t)
	ctx := context.Background()
	spec := job.Spec{Argv: []string{"sleep", "120"}, GPUs: 1, Workdir: "~", Priority: 5, MemPerGPU: 1 << 30, Host: "w"}
	start := time.Now()
	if res, err := l.svc.Submit(ctx, service.SubmitRequest{Spec: spec}); err != nil || res.Job.State != job.Running {
		t.Fatalf("a submit: %+v %v", res, err)
	}
	took := time.Since(start)
	cluster := clusterOf(t, l)
	t.Cleanup(func() { killOurs(cluster) }) // a failing run leaves nothing behind
	rounds := sweepRounds(t)
	for i := range rounds {
		cut, cancel := context.WithTimeout(ctx, took*time.Duration(i)/time.Duration(rounds-4))
		l.svc.Submit(cut, service.SubmitRequest{Spec: spec})
		cancel()
	}
	l.check(t, cluster, "after the submit sweep")

	// The same across passes: jobs queued (stored while another pass held
	// the lock), then passes cut at every fraction of one.
	for range rounds {
		unlock, err := control.LockPass(ctx, l.state+".pass.lock", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.svc.Submit(ctx, service.SubmitRequest{Spec: spec})
		unlock()
	}
	start = time.Now()
	l.svc.Schedule(ctx, service.ScheduleRequest{})
	took = max(time.Since(start), 20*time.Millisecond)
	for range 3 { // queue some more for the cut passes to launch
		unlock, _ := control.LockPass(ctx, l.state+".pass.lock", time.Second)
		l.svc.Submit(ctx, service.SubmitRequest{Spec: spec})
		unlock()
	}
	for i := range rounds {
		cut, cancel := context.WithTimeout(ctx, took*time.Duration(i)/time.Duration(rounds-4))
		l.svc.Schedule(cut, service.ScheduleRequest{})
		cancel()
		unlock, _ := control.LockPass(ctx, l.state+".pass.lock", time.Second)
		l.svc.Submit(ctx, service.SubmitRequest{Spec: spec})
		unlock()
	}
	l.check(t, cluster, "after the schedule sweep")

	doc, _ := l.svc.Jobs(ctx, service.JobQuery{})
	for _, j := range doc.Jobs {
		if _, err := l.svc.Cancel(ctx, service.CancelRequest{ID: j.ID, Grace: time.Second}); err != nil {
			t.Errorf("cancel %d: %v", j.ID, err)
		}
	}
	if left := ours(t, cluster); len(left) > 0 {
		t.Errorf("left running after cancelling every job: %v", left)
	}
}

// check runs two passes (to resolve what was cut) and compares the queue
// with what runs on the worker.
func (l *lab) check(t *testing.T, cluster, when string) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		if _, err := l.svc.Schedule(ctx, service.ScheduleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := l.svc.Jobs(ctx, service.JobQuery{All: true})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]job.Job{}
	var states []string
	for _, j := range doc.Jobs {
		states = append(states, fmt.Sprintf("%d:%s/%d", j.ID, j.State, j.Attempt))
		switch j.State {
		case job.Running:
			running[fmt.Sprintf("%d.%d", j.ID, j.Attempt)] = j
		case job.Launching:
			t.Errorf("%s: job %d still launching after two passes: %s", when, j.ID, j.Reason)
		}
	}
	t.Logf("%s: %s", when, strings.Join(states, " "))
	procs := ours(t, cluster)
	for key, n := range procs {
		if _, ok := running[key]; !ok {
			t.Errorf("%s: job.attempt %s runs %d processes on the worker, but the queue does not have it running", when, key, n)
		}
	}
	for key := range running {
		if procs[key] == 0 {
			t.Errorf("%s: job.attempt %s is running in the queue but has no process", when, key)
		}
	}
	// 1 GiB each: GPU 0 (39.6 GiB used by another process) has room for 32.
	booked := map[string]int{}
	for _, j := range running {
		booked[j.Placement.GPUs[0]]++
	}
	if booked["GPU-00000000-0000-0000-0000-000000000000"] > 32 {
		t.Errorf("%s: GPU 0 booked past its room: %v", when, booked)
	}
}

// killOurs kills every process carrying cluster's GSSH_CLUSTER_ID.
func killOurs(cluster string) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range dirs {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("GSSH_CLUSTER_ID="+cluster+"\x00")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func clusterOf(t *testing.T, l *lab) string {
	t.Helper()
	doc, err := l.svc.Jobs(context.Background(), service.JobQuery{All: true})
	if err != nil || len(doc.Jobs) == 0 {
		t.Fatalf("no jobs: %v", err)
	}
	d := doc.Jobs[0].Remote.Dir
	base := filepath.Base(d)
	c, _, ok := strings.Cut(base, "-")
	if !ok || len(c) != 32 {
		t.Fatalf("job dir %q", d)
	}
	return c
}
