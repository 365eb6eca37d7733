package sched

import (
	"strings"
	"testing"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// container is GPU i (16 GiB) as a probe inside a container sees it
// (corpus 031): the memory a process holds is in use, but NVML lists the
// host's pids, which the container's /proc does not have, so no process
// is listed.
func container(i int, used uint64) gpuinfo.GPU {
	g := gpu(i, 16*GiB)
	*g.MemUsed, *g.MemFree = used, *g.MemTotal-used
	return g
}

// Memory in use that no visible process accounts for is held by an
// invisible process: never free for an exclusive job, counted as used for
// a shared one, and said so in the pending reason.
func TestPlanInvisibleMemory(t *testing.T) {
	idleish := container(1, 200*units.MiB) // what the driver and a context keep: idle
	hosts := []Host{host("gpu01", container(0, 1012*units.MiB), idleish)}
	d := plan1(hosts, nil, excl(1))
	if len(d.Starts) != 1 || d.Starts[0].Placement.Indexes[0] != 1 {
		t.Fatalf("exclusive job: %+v, want GPU 1 (GPU 0 holds 1012 MiB no process accounts for)", d)
	}
	d = plan1([]Host{host("gpu01", container(0, 1012*units.MiB))}, nil, excl(1))
	if len(d.Pending) != 1 || d.Pending[0].Reason.Code != CodeForeign ||
		d.Pending[0].Reason.Text != "gpu01: 0/1 GPUs free (GPU 0: memory held by an invisible process)" {
		t.Fatalf("exclusive job on the container GPU: %+v", d)
	}

	// A shared job: 14.4 GiB usable; 12 GiB held by no visible process.
	full := []Host{host("gpu01", container(0, 12*GiB))}
	d = plan1(full, nil, shared(1, 8*GiB))
	if len(d.Pending) != 1 || d.Pending[0].Reason.Code != CodeMem ||
		!strings.Contains(d.Pending[0].Reason.Text, "only 2.4 GiB free now (12.0 GiB held by an invisible process)") {
		t.Fatalf("shared job: %+v", d)
	}
	if d := plan1(full, nil, shared(1, 2*GiB)); len(d.Starts) != 1 {
		t.Errorf("a 2 GiB job fits in the 2 GiB left: %+v", d)
	}

	// What the driver reserves (about 1 % of the memory: older drivers
	// count it as used) is no process's.
	if n := container(0, 400*units.MiB).Invisible(); n != 0 {
		t.Errorf("400 MiB on a 16 GiB GPU: %d bytes invisible, want 0 (256 MiB + 1%% of 16 GiB may be the driver's)", n)
	}
	if n := with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) { *g.MemUsed = 1000 * units.MiB }).Invisible(); n != 0 {
		t.Errorf("1000 MiB on an 80 GiB GPU: %d bytes invisible, want 0", n)
	}
	// Visible processes account for their memory: nothing invisible, and
	// a GPU whose processes' memory is unknown (WDDM) says nothing.
	seen := with(container(0, 1012*units.MiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{{PID: 28290, Name: "python", UsedBytes: ptr(uint64(1012 * units.MiB)), GPUUUID: g.UUID}}
	})
	if n := seen.Invisible(); n != 0 {
		t.Errorf("host view of corpus 031: %d bytes invisible, want 0", n)
	}
	wddm := with(container(0, 10*GiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{{PID: 7, Name: "game.exe", GPUUUID: g.UUID}}
	})
	if n := wddm.Invisible(); n != 0 {
		t.Errorf("processes of unknown memory: %d bytes invisible, want 0 (cannot be told)", n)
	}
	d = plan1([]Host{host("gpu01", seen)}, nil, excl(1))
	if len(d.Pending) != 1 || !strings.Contains(d.Pending[0].Reason.Text, "GPU 0: in use by other processes") {
		t.Errorf("visible foreign process: %+v", d)
	}

	// A MIG device with memory in use and no process on it.
	mig := migGPU(0)
	*mig.MIG[1].MemUsed, *mig.MIG[1].MemFree = 5*GiB, 35*GiB // MIG-00-0
	d = plan1([]Host{host("gpu01", mig)}, nil, excl(1))
	if len(d.Starts) != 1 || d.Starts[0].Placement.GPUs[0] != "MIG-00-1" {
		t.Errorf("MIG: %+v, want MIG-00-1 (MIG-00-0 holds 5 GiB no process accounts for)", d)
	}
}

// Foreign processes: their memory is used, and an exclusive job never
// gets their GPU, however little they use.
func TestPlanForeignProcesses(t *testing.T) {
	small := with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{{PID: 31337, Name: "python", User: "alice", UsedBytes: ptr(uint64(100 * units.MiB)), GPUUUID: g.UUID, EnvRead: true}}
		*g.MemUsed, *g.MemFree = 100*units.MiB, 80*GiB-100*units.MiB
	})
	big := with(gpu(1, 80*GiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{{PID: 31338, Name: "python", User: "bob", UsedBytes: ptr(uint64(60 * GiB)), GPUUUID: g.UUID, EnvRead: true}}
		*g.MemUsed, *g.MemFree = 60*GiB, 20*GiB
	})
	hosts := []Host{host("gpu01", small, big)}
	d := plan1(hosts, nil, excl(1))
	if len(d.Pending) != 1 || d.Pending[0].Reason.Code != CodeForeign ||
		d.Pending[0].Reason.Text != "gpu01: 0/2 GPUs free (GPU 0,1: in use by other processes)" {
		t.Fatalf("exclusive job: %+v", d)
	}
	// 72 GiB usable: 12 GiB left beside bob's 60 GiB.
	d = plan1(hosts, nil, shared(2, 20*GiB))
	if len(d.Pending) != 1 || !strings.Contains(d.Pending[0].Reason.Text, "GPU 1: only 12.0 GiB free now") {
		t.Fatalf("shared job: %+v", d)
	}
}

// A process carrying a running job's GSSH_JOB_ID but an earlier
// GSSH_ATTEMPT is a leftover of that attempt, not the job's: its memory
// is not taken for the job's use of its booking.
func TestPlanStaleAttemptIsNotTheJobs(t *testing.T) {
	g := with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{
			{PID: 10, Name: "python", UsedBytes: ptr(uint64(2 * GiB)), GPUUUID: g.UUID, JobID: "5", ClusterID: "c1", Attempt: "2", EnvRead: true},
			{PID: 9, Name: "python", UsedBytes: ptr(uint64(8 * GiB)), GPUUUID: g.UUID, JobID: "5", ClusterID: "c1", Attempt: "1", EnvRead: true},
		}
		*g.MemUsed, *g.MemFree = 10*GiB, 70*GiB
	})
	run := running(5, "gpu01", 10*GiB, "GPU-00")
	run.Attempt = 2
	// 72 GiB usable − job 5's 10 GiB booking − the stale 8 GiB = 54 GiB:
	// a 60 GiB job waits. Taken for job 5's own, the 8 GiB would make it
	// fit (10 GiB used of 10 booked), and job 5 could then grow past 72.
	in := Input{Hosts: []Host{host("gpu01", g)}, Running: []job.Job{run}, Queue: []job.Job{queued(100, shared(1, 60*GiB))}, Cluster: "c1"}
	d := Plan(in)
	if len(d.Pending) != 1 || !strings.Contains(d.Pending[0].Reason.Text, "only 54.0 GiB free now") {
		t.Fatalf("plan: %+v", d)
	}
	in.Queue = []job.Job{queued(100, shared(1, 54*GiB))}
	if d := Plan(in); len(d.Starts) != 1 {
		t.Errorf("a 54 GiB job fits: %+v", d)
	}
}
