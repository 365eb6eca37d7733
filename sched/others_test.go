package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// The jobs of another gssh queue on a host hold its GPUs as this queue's
// jobs do: an exclusive one keeps every job off its GPU, a shared one's
// booking counts against the memory left, their GPU processes are theirs
// (not foreign twice), and their ends, unknown here, never give a
// reservation — even when one has the id of a job of this queue.
func TestOtherQueues(t *testing.T) {
	other := func(h Host, queue string, j job.Job) Host {
		h.Others = append(h.Others, OtherJob{Queue: queue, Job: j})
		return h
	}
	theirs := running(7, "gpu01", 0, "GPU-00")
	theirs.User = "bob"

	// Exclusive: GPU 0 is theirs, GPU 1 is free.
	h := other(host("gpu01", gpus(2, 80*GiB)...), "3f2a9c", theirs)
	d := plan1([]Host{h}, nil, excl(1))
	if len(d.Starts) != 1 || d.Starts[0].Placement.Indexes[0] != 1 {
		t.Fatalf("exclusive next to another queue's job: %+v", d)
	}
	d = plan1([]Host{h}, nil, excl(2))
	want := "gpu01: 1/2 GPUs free, 2 needed (GPU 0: held by another gssh queue: cluster 3f2a, user bob, job 7)"
	if len(d.Starts) != 0 || d.Pending[0].Reason.Text != want || d.Pending[0].Reason.Code != CodeOtherQueue {
		t.Fatalf("two GPUs: %+v, want %q", d.Pending, want)
	}
	// A shared job cannot go on their exclusive GPU either.
	one := other(host("gpu01", gpu(0, 80*GiB)), "3f2a9c", theirs)
	if d := plan1([]Host{one}, nil, shared(1, GiB)); len(d.Starts) != 0 || !strings.Contains(d.Pending[0].Reason.Text, "held by another gssh queue") {
		t.Fatalf("shared on their exclusive GPU: %+v", d)
	}

	// Shared: their 60 GiB booked (not allocated yet) leaves 12 of 72.
	big := running(7, "gpu01", 60*GiB, "GPU-00")
	sh := other(host("gpu01", gpu(0, 80*GiB)), "3f2a9c", big)
	if d := plan1([]Host{sh}, nil, shared(1, 20*GiB)); len(d.Starts) != 0 || d.Pending[0].Reason.Code != CodeMem {
		t.Fatalf("20 GiB beside their 60: %+v", d)
	}
	if d := plan1([]Host{sh}, nil, shared(1, 10*GiB)); len(d.Starts) != 1 {
		t.Fatalf("10 GiB beside their 60: %+v", d)
	}
	// Their process is theirs: counted once, as their booking, not again
	// as a foreign process's memory.
	withProc := other(host("gpu01", with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) {
		g.Procs = []gpuinfo.Proc{{PID: 9, Name: "python", UsedBytes: ptr(uint64(50 * GiB)), GPUUUID: g.UUID, JobID: "7", ClusterID: "3f2a9c"}}
		*g.MemUsed, *g.MemFree = 50*GiB, 30*GiB
	})), "3f2a9c", big)
	if d := plan1([]Host{withProc}, nil, shared(1, 10*GiB)); len(d.Starts) != 1 {
		t.Fatalf("10 GiB beside their 60 booked, 50 used: %+v", d)
	}

	// This queue's job 7 ends soon on GPU 1; theirs, also job 7, holds GPU
	// 0 with no known end. A two-GPU job waits with a reservation from our
	// job 7's end? No: GPU 0 never frees as far as this queue knows.
	ours := running(7, "gpu01", 0, "GPU-01")
	two := other(host("gpu01", gpus(2, 80*GiB)...), "3f2a9c", theirs)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ours.StartedAt, ours.Spec.Timeout = now, time.Hour
	d = Plan(Input{Hosts: []Host{two}, Running: []job.Job{ours}, Queue: []job.Job{queued(100, excl(2))}, Now: now})
	if len(d.Starts) != 0 || strings.Contains(d.Pending[0].Reason.Text, "reserved") || d.Pending[0].Reservation != nil {
		t.Fatalf("a reservation counting on another queue's job to end: %+v", d.Pending[0])
	}
}
