package control_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

const clusterID = "c0ffee"

// reaper is the worker side of reaping: it records every target and
// takes a killed process off its host's snapshot, as the next probe
// would find it.
type reaper struct {
	mu      sync.Mutex
	lab     *lab
	targets map[string][]reap.Target // by host
	fail    map[string]error
	outcome reap.Outcome // what happens to every target ("": Terminated)
}

func (r *reaper) Reap(_ context.Context, host string, targets []reap.Target, grace time.Duration) (map[int]reap.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fail[host]; err != nil {
		return nil, err
	}
	if grace != control.DefaultOrphanGrace {
		return nil, fmt.Errorf("grace %s, want the orphan grace", grace)
	}
	r.targets[host] = append(r.targets[host], targets...)
	out := map[int]reap.Outcome{}
	o := r.outcome
	if o == "" {
		o = reap.Terminated
	}
	r.lab.mu.Lock()
	defer r.lab.mu.Unlock()
	// The next probe's snapshot is a new one: the pass's own is as it was.
	hosts := slices.Clone(r.lab.hosts)
	for _, t := range targets {
		out[t.PID] = o
		if !o.Ended() {
			continue
		}
		for i := range hosts {
			h := &hosts[i]
			if h.Name != host {
				continue
			}
			h.Snapshot.GPUs = slices.Clone(h.Snapshot.GPUs)
			for g := range h.Snapshot.GPUs {
				gp := &h.Snapshot.GPUs[g]
				gp.MemUsed, gp.MemFree = ptr(*gp.MemUsed), ptr(*gp.MemFree)
				for _, p := range gp.Procs {
					if p.PID == t.PID && p.UsedBytes != nil {
						*gp.MemUsed -= *p.UsedBytes
						*gp.MemFree += *p.UsedBytes
					}
				}
				gp.Procs = slices.DeleteFunc(slices.Clone(gp.Procs), func(p gpuinfo.Proc) bool { return p.PID == t.PID })
			}
		}
	}
	r.lab.hosts = hosts
	return out, nil
}

type reapRig struct {
	*rig
	reaper *reaper
	ev     *reapEvents
}

// reapEvents records the reaper's events with their process.
type reapEvents struct {
	mu   sync.Mutex
	seen []string // "kind job pid"
}

func (e *reapEvents) Emit(ev control.Event) {
	if ev.Reaped == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, fmt.Sprintf("%s %d %d", ev.Kind, ev.Job.ID, ev.Reaped.Finding.Proc.PID))
}

func newReapRig(t *testing.T, hosts ...sched.Host) *reapRig {
	t.Helper()
	r := &reapRig{rig: &rig{store: state.NewMem(), lab: &lab{hosts: hosts}, workers: newWorkers(), events: &events{}}, ev: &reapEvents{}}
	r.reaper = &reaper{lab: r.lab, targets: map[string][]reap.Target{}, fail: map[string]error{}}
	ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Events: r.ev, Reaper: r.reaper, Cluster: clusterID})
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	return r
}

// onGPU puts a process on GPU i of host h (in the lab), using mem bytes,
// as the helper reads it: its environment readable, with GSSH_* marks of
// job/attempt when env is "ID/ATTEMPT".
func (r *reapRig) onGPU(h, i, pid int, mem uint64, env string) {
	r.lab.mu.Lock()
	defer r.lab.mu.Unlock()
	r.lab.hosts = slices.Clone(r.lab.hosts)
	r.lab.hosts[h].Snapshot.GPUs = slices.Clone(r.lab.hosts[h].Snapshot.GPUs)
	g := &r.lab.hosts[h].Snapshot.GPUs[i]
	g.MemUsed, g.MemFree = ptr(*g.MemUsed), ptr(*g.MemFree)
	p := gpuinfo.Proc{PID: pid, Name: "python", User: "u", UsedBytes: ptr(mem), GPUUUID: g.UUID, SessionID: ptr(pid), StartTime: ptr(int64(pid)), EnvRead: true}
	if id, att, ok := strings.Cut(env, "/"); ok {
		p.JobID, p.ClusterID, p.Attempt = id, clusterID, att
	}
	g.Procs = append(slices.Clone(g.Procs), p)
	*g.MemUsed += mem
	*g.MemFree -= mem
	r.lab.hosts[h].Snapshot.Source = gpuinfo.SourceNVML
}

// The probe-based safety net: a GPU process of a job gssh considers
// ended is killed by the next pass that probes, with an event; that pass
// does not place on what it holds (the GPU is not offered), the next one
// does. Foreign processes are reported, not killed.
func TestPassReapsByProbe(t *testing.T) {
	r := newReapRig(t, a100x4("ctl"))
	done := r.submit(t, 5, "exit", "0")
	r.pass(t) // starts it on GPU 3, the only idle one
	r.pass(t) // records its end
	if got := r.get(t, done.ID); got.State != job.Succeeded {
		t.Fatalf("job %d: %s", done.ID, got.State)
	}
	r.onGPU(0, 3, 4242, 30*GiB, fmt.Sprintf("%d/1", done.ID)) // it left a process behind, unseen by its end
	r.onGPU(0, 2, 5151, 2*GiB, "")                            // someone's, by hand

	next := r.submit(t, 5, "sleep", "100") // exclusive: GPU 3 is the only one without other people's processes
	res := r.pass(t)
	if len(res.Started) != 0 {
		t.Fatalf("started %+v on the orphan's GPU in the pass that reaps it", res.Started)
	}
	if got := r.get(t, next.ID); got.State != job.Queued || !strings.Contains(got.Reason, "GPU 0-3: in use by other processes") {
		t.Errorf("job %d: %s %q", next.ID, got.State, got.Reason)
	}
	want := []reap.Target{{PID: 4242, StartTicks: 4242, Kind: reap.KindOrphan, Cluster: clusterID, Job: done.ID, Attempt: 1, User: done.User}}
	if got := r.reaper.targets["ctl"]; !slices.Equal(got, want) {
		t.Errorf("targets %+v, want %+v", got, want)
	}
	if len(res.Reaped) != 1 || res.Reaped[0].Outcome != reap.Terminated || res.Reaped[0].Finding.Job != done.ID || res.Reaped[0].Host != "ctl" {
		t.Errorf("reaped %+v", res.Reaped)
	}
	if got, want := r.ev.seen, []string{fmt.Sprintf("orphan_reaped %d 4242", done.ID)}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	res = r.pass(t) // the orphan is gone from the probe: GPU 3 is offered again
	if !slices.Equal(ids(res.Started), []job.ID{next.ID}) || res.Started[0].Placement.Indexes[0] != 3 {
		t.Errorf("next pass started %+v, want job %d on GPU 3", res.Started, next.ID)
	}
	if len(r.reaper.targets["ctl"]) != 1 {
		t.Errorf("targets %+v: the foreign process was killed on a reap_foreign: report host", r.reaper.targets["ctl"])
	}
}

// Only the stale attempt of a running job is killed, never its current
// one; foreign processes die only on hosts with reap_foreign: kill; a
// host whose reap fails is a pass error and the others are reaped.
func TestPassReapsStaleAttemptsAndForeign(t *testing.T) {
	killer := a100x4("b")
	killer.ReapForeign = true
	r := newReapRig(t, a100x4("a"), killer)
	run := r.submitSpec(t, job.Spec{Argv: []string{"sleep", "100"}, Host: "a", GPUs: 1, MemPerGPU: GiB, Priority: 5})
	r.pass(t)
	j := r.get(t, run.ID)
	if j.State != job.Running || j.Attempt != 1 {
		t.Fatalf("job %+v", j)
	}
	r.onGPU(0, 0, 700, GiB, fmt.Sprintf("%d/1", j.ID)) // the current attempt
	r.onGPU(0, 0, 600, GiB, fmt.Sprintf("%d/0", j.ID)) // a stale attempt (0: before attempts were counted)
	r.onGPU(1, 1, 800, GiB, "")                        // foreign, on the reap_foreign: kill host
	r.onGPU(0, 1, 900, GiB, "")                        // foreign, on a report host
	r.submit(t, 5, "sleep", "100")                     // so that the pass probes
	res := r.pass(t)
	if got := r.reaper.targets["a"]; len(got) != 1 || got[0].PID != 600 || got[0].Attempt != 0 || got[0].Job != j.ID {
		t.Errorf("targets on a: %+v, want the stale attempt alone", got)
	}
	if got := r.reaper.targets["b"]; len(got) != 1 || got[0] != (reap.Target{PID: 800, StartTicks: 800, Kind: reap.KindForeign}) {
		t.Errorf("targets on b: %+v, want the foreign process", got)
	}
	if want := []string{fmt.Sprintf("orphan_reaped %d 600", j.ID), "foreign_killed 0 800"}; !slices.Equal(r.ev.seen, want) {
		t.Errorf("events %q, want %q", r.ev.seen, want)
	}
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}

	// A worker that cannot be reached for the reap: reported, the other
	// host still reaped.
	r.onGPU(0, 2, 601, GiB, fmt.Sprintf("%d/0", j.ID))
	r.onGPU(1, 2, 801, GiB, "")
	r.reaper.fail["a"] = errors.New("reap on a: unreachable: connect: connection refused")
	r.submit(t, 5, "sleep", "100")
	res = r.pass(t)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "reap on a: unreachable") {
		t.Errorf("errors %v", res.Errors)
	}
	if got := r.reaper.targets["b"]; len(got) != 2 || got[1].PID != 801 {
		t.Errorf("targets on b: %+v", got)
	}
	if n := len(res.Reaped); n != 2 || res.Reaped[0].Outcome != "" || res.Reaped[1].Outcome != reap.Terminated {
		t.Errorf("reaped %+v: want pid 601 without an outcome (its host failed), 801 terminated", res.Reaped)
	}
}

// gssh reap: the same findings on demand; a dry run kills nothing, and a
// process that survived is said so and is no event.
func TestReapOnDemand(t *testing.T) {
	r := newReapRig(t, a100x4("ctl"))
	done := r.submit(t, 5, "exit", "0")
	r.pass(t)
	r.pass(t)
	r.onGPU(0, 3, 4242, 30*GiB, fmt.Sprintf("%d/1", done.ID))
	r.onGPU(0, 3, 4343, GiB, "99/1") // a job the state does not hold

	hosts, _ := r.lab.Hosts(context.Background())
	got, err := r.ctl.Reap(context.Background(), hosts, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Reaped) != 1 || got[0].Reaped[0].Outcome != "" || len(r.reaper.targets) != 0 {
		t.Fatalf("dry run: %+v, targets %+v", got, r.reaper.targets)
	}
	var kinds []string
	for _, f := range got[0].Found.Procs {
		kinds = append(kinds, fmt.Sprintf("%d %s", f.Proc.PID, f.Kind))
	}
	if want := []string{"100 unattributed", "101 unattributed", "102 unattributed", "4242 orphan", "4343 unattributed"}; !slices.Equal(kinds, want) {
		t.Errorf("findings %q, want %q", kinds, want)
	}

	r.reaper.outcome = reap.Survived
	got, err = r.ctl.Reap(context.Background(), hosts, false)
	if err != nil || len(got[0].Reaped) != 1 || got[0].Reaped[0].Outcome != reap.Survived {
		t.Fatalf("reap: %+v, %v", got, err)
	}
	if len(r.ev.seen) != 0 {
		t.Errorf("events %q for a process that survived", r.ev.seen)
	}
}

// labOf is a lab that can probe some of its hosts (control.HostsOf).
type labOf struct{ *lab }

func (l labOf) HostsOf(ctx context.Context, names []string) ([]sched.Host, error) {
	hs, _ := l.Hosts(ctx)
	return slices.DeleteFunc(slices.Clone(hs), func(h sched.Host) bool { return !slices.Contains(names, h.Name) }), nil
}

// A pass with only running jobs probes their hosts, and reaps there too.
func TestPassReapsWithOnlyRunningJobs(t *testing.T) {
	r := newReapRig(t, a100x4("ctl"), a100x4("idle"))
	ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: labOf{r.lab}, HostsOf: labOf{r.lab}, Workers: r.workers, Events: r.ev, Reaper: r.reaper, Cluster: clusterID})
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	done := r.submitSpec(t, job.Spec{Argv: []string{"exit", "0"}, Host: "ctl", GPUs: 1, Priority: 5})
	run := r.submitSpec(t, job.Spec{Argv: []string{"sleep", "100"}, Host: "ctl", GPUs: 1, MemPerGPU: GiB, Priority: 5})
	r.pass(t)
	r.pass(t) // done ends; run goes on; nothing is queued
	if got := r.get(t, done.ID); got.State != job.Succeeded || r.get(t, run.ID).State != job.Running {
		t.Fatalf("jobs: %s, %s", got.State, r.get(t, run.ID).State)
	}
	r.onGPU(0, 3, 4242, GiB, fmt.Sprintf("%d/1", done.ID))
	r.onGPU(1, 3, 4343, GiB, "99/1") // on a host no job runs on: not probed
	res := r.pass(t)
	if len(res.Reaped) != 1 || res.Reaped[0].Finding.Proc.PID != 4242 || res.Reaped[0].Outcome != reap.Terminated {
		t.Errorf("reaped %+v", res.Reaped)
	}
	if len(r.reaper.targets["idle"]) != 0 {
		t.Errorf("targets on the idle host: %+v", r.reaper.targets["idle"])
	}
}
