package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

const GiB = 1 << 30

func ptr[T any](v T) *T { return &v }

// gpu is an idle, healthy GPU with total bytes of memory, all free.
func gpu(i int, total uint64) gpuinfo.GPU {
	return gpuinfo.GPU{
		Index: i, UUID: fmt.Sprintf("GPU-%02d", i), Health: gpuinfo.HealthOK,
		MemTotal: ptr(total), MemUsed: ptr(uint64(0)), MemFree: ptr(total),
		Procs: []gpuinfo.Proc{}, ProcsKnown: true,
	}
}

// gpus is n idle GPUs of total bytes each.
func gpus(n int, total uint64) []gpuinfo.GPU {
	out := make([]gpuinfo.GPU, n)
	for i := range out {
		out[i] = gpu(i, total)
	}
	return out
}

// host is a reachable host with a 10% reserve.
func host(name string, gs ...gpuinfo.GPU) Host {
	return Host{Name: name, ReservePct: 10, Snapshot: gpuinfo.Snapshot{Host: name, State: gpuinfo.HostOK, GPUs: gs}}
}

// with returns g changed by f.
func with(g gpuinfo.GPU, f func(*gpuinfo.GPU)) gpuinfo.GPU {
	f(&g)
	return g
}

func foreign(g *gpuinfo.GPU) {
	g.Procs = []gpuinfo.Proc{{PID: 4242, Name: "python", UsedBytes: ptr(uint64(GiB)), GPUUUID: g.UUID}}
	*g.MemUsed, *g.MemFree = GiB, *g.MemTotal-GiB
}

// migGPU is GPU i with MIG on and two MIG devices (memory as NVML reports it).
func migGPU(i int) gpuinfo.GPU {
	g := gpu(i, 80*GiB)
	g.MIGMode = "Enabled"
	g.MIG = []gpuinfo.MIG{
		{Index: 1, UUID: fmt.Sprintf("MIG-%02d-1", i), Profile: "3g.40gb", MemTotal: ptr(uint64(40 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(40 * GiB))},
		{Index: 0, UUID: fmt.Sprintf("MIG-%02d-0", i), Profile: "3g.40gb", MemTotal: ptr(uint64(40 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(40 * GiB))},
	}
	return g
}

func excl(n int) Request               { return Request{Host: "auto", GPUs: n} }
func shared(n int, mem uint64) Request { return Request{Host: "auto", GPUs: n, MemPerGPU: mem} }

// running is job id running on host's GPUs ids ("GPU-02", "MIG-00-1", or
// an index for a GPU without UUID) with mem bytes per GPU (0 = exclusive).
func running(id job.ID, host string, mem uint64, ids ...string) job.Job {
	p := job.Placement{Host: host, GPUs: ids}
	for _, s := range ids {
		var i int
		if _, err := fmt.Sscanf(s, "GPU-%d", &i); err != nil {
			if _, err := fmt.Sscanf(s, "MIG-%d-", &i); err != nil {
				fmt.Sscanf(s, "%d", &i)
			}
		}
		p.Indexes = append(p.Indexes, i)
	}
	return job.Job{ID: id, User: "u", State: job.Running, Spec: job.Spec{GPUs: len(ids), MemPerGPU: mem, Priority: 5}, Placement: p}
}

// queued is job id asking for req.
func queued(id job.ID, req Request) job.Job {
	return job.Job{ID: id, User: "u", State: job.Queued, Spec: job.Spec{Host: req.Host, Labels: req.Labels, GPUs: req.GPUs, MemPerGPU: req.MemPerGPU,
		CPUs: req.CPUs, HostMem: req.HostMem, Priority: 5}}
}

// plan1 plans one queued job (id 100) for req.
func plan1(hosts []Host, run []job.Job, req Request) Decisions {
	return Plan(Input{Hosts: hosts, Running: run, Queue: []job.Job{queued(100, req)}})
}

// TestPlanPlacement plans one queued job per case: where it goes, or the
// reason (and code) it stays queued, and every host turned down.
func TestPlanPlacement(t *testing.T) {
	drained := host("gpu02", gpus(2, 80*GiB)...)
	drained.Drain = true
	labelled := host("gpu02", gpus(2, 80*GiB)...)
	labelled.Labels = []string{"a100", "nvlink"}
	state := func(name string, s gpuinfo.HostState) Host {
		n := host(name)
		n.Snapshot.State = s
		return n
	}
	degraded := host("gpu01", gpu(1, 80*GiB))
	degraded.Snapshot.State = gpuinfo.HostDegraded
	noUUID := gpu(3, 80*GiB)
	noUUID.UUID = ""
	permDenied := gpu(0, 80*GiB)
	permDenied.MemTotal, permDenied.MemUsed, permDenied.MemFree, permDenied.MemoryState = nil, nil, nil, "insufficient permissions"
	migNoMem := migGPU(0)
	for i := range migNoMem.MIG { // as nvidia-smi -L lists them
		migNoMem.MIG[i].MemTotal, migNoMem.MIG[i].MemUsed, migNoMem.MIG[i].MemFree = nil, nil, nil
	}

	for _, tt := range []struct {
		name    string
		nodes   []Host
		running []job.Job
		req     Request
		want    job.Placement // zero: not placed
		// reason is the pending reason; rejected lists "host: reason".
		reason   string
		code     Code // checked when set
		rejected []string
	}{
		{
			name:  "exclusive on an idle GPU",
			nodes: []Host{host("gpu01", gpus(2, 80*GiB)...)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:  "hosts by name, GPUs by index, whatever the input order",
			nodes: []Host{host("gpu02", gpus(2, 80*GiB)...), host("gpu01", gpu(5, 80*GiB), gpu(3, 80*GiB))},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-03"}, Indexes: []int{3}},
		},
		{
			name:     "multi-GPU jobs take GPUs of one host",
			nodes:    []Host{host("gpu01", gpus(4, 80*GiB)...), host("gpu02", gpus(4, 80*GiB)...)},
			running:  []job.Job{running(1, "gpu01", 0, "GPU-02"), running(2, "gpu01", 10*GiB, "GPU-03"), running(3, "gpu01", 10*GiB, "GPU-03")},
			req:      excl(3),
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00", "GPU-01", "GPU-02"}, Indexes: []int{0, 1, 2}},
			rejected: []string{"gpu01: 2/4 GPUs free, 3 needed (GPU 2,3: in use by gssh jobs (u: jobs 1, 2, 3))"},
		},
		{
			name:     "requested host",
			nodes:    []Host{host("gpu01", gpus(1, 80*GiB)...), host("gpu02", gpus(1, 80*GiB)...)},
			req:      Request{Host: "gpu02", GPUs: 1},
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
			rejected: []string{"gpu01: not the requested host gpu02"},
		},
		{
			name:     "unknown host",
			nodes:    []Host{host("gpu01", gpus(1, 80*GiB)...)},
			req:      Request{Host: "gpu09", GPUs: 1},
			reason:   "no host named gpu09",
			rejected: []string{"gpu01: not the requested host gpu09"},
		},
		{
			name:     "labels",
			nodes:    []Host{host("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "auto", Labels: []string{"nvlink", "a100"}, GPUs: 1},
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
			rejected: []string{"gpu01: lacks labels nvlink, a100"},
		},
		{
			name:     "no host has the label",
			nodes:    []Host{host("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "auto", Labels: []string{"h100", "nvlink"}, GPUs: 1},
			reason:   "no host has labels h100, nvlink",
			rejected: []string{"gpu01: lacks labels h100, nvlink", "gpu02: lacks label h100"},
		},
		{
			name:     "the requested host lacks the label",
			nodes:    []Host{host("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "gpu01", Labels: []string{"a100"}, GPUs: 1},
			reason:   "gpu01: lacks label a100",
			rejected: []string{"gpu01: lacks label a100", "gpu02: not the requested host gpu01"},
		},
		{
			name:     "drained, and the reasons of every host",
			nodes:    []Host{drained, host("gpu01", with(gpu(0, 80*GiB), foreign))},
			req:      excl(1),
			reason:   "gpu01: 0/1 GPUs free (GPU 0: in use by other processes); gpu02: drained",
			rejected: []string{"gpu01: 0/1 GPUs free (GPU 0: in use by other processes)", "gpu02: drained"},
		},
		{
			name: "host states",
			nodes: []Host{
				state("a", gpuinfo.HostUnreachable), state("b", gpuinfo.HostDriverNotLoaded), state("c", ""),
				state("d", gpuinfo.HostNoDevices), host("e"), degraded,
			},
			req:  excl(1),
			want: job.Placement{Host: "gpu01", GPUs: []string{"GPU-01"}, Indexes: []int{1}},
			rejected: []string{
				"a: unreachable", "b: driver not loaded", "c: not probed yet", "d: no devices", "e: no GPUs",
			},
		},
		{
			name: "GPU health",
			nodes: []Host{host("gpu01",
				with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthLost }),
				with(gpu(1, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthRequiresReset }),
				with(gpu(2, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthError }),
				with(gpu(3, 80*GiB), func(g *gpuinfo.GPU) { g.Health = "" }),
			)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/4 GPUs with ≥ 1.0 GiB free (GPU 0: lost; GPU 1: requires reset; GPU 2: in error state; GPU 3: health unknown)",
			rejected: []string{"gpu01: 0/4 GPUs with ≥ 1.0 GiB free (GPU 0: lost; GPU 1: requires reset; GPU 2: in error state; GPU 3: health unknown)"},
		},
		{
			name: "exclusive: nothing booked, no foreign process",
			nodes: []Host{host("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), foreign),
				with(gpu(3, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, g.MemUsed = false, nil }),
				with(gpu(4, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, *g.MemUsed = false, 2*GiB }),
				with(gpu(5, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, *g.MemUsed = false, 5*units.MiB }),
			)},
			running: []job.Job{running(1, "gpu01", 0, "GPU-00"), running(2, "gpu01", GiB, "GPU-01")},
			req:     excl(1),
			want:    job.Placement{Host: "gpu01", GPUs: []string{"GPU-05"}, Indexes: []int{5}},
		},
		{
			name: "exclusive: each reason",
			nodes: []Host{host("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), foreign),
				with(gpu(3, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, g.MemUsed = false, nil }),
				with(gpu(4, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, *g.MemUsed = false, 2*GiB }),
				with(gpu(5, 80*GiB), func(g *gpuinfo.GPU) { g.ProcsKnown, *g.MemUsed = false, 5*units.MiB }),
			)},
			running: []job.Job{running(1, "gpu01", 0, "GPU-00"), running(2, "gpu01", GiB, "GPU-01")},
			req:     excl(2),
			code:    CodeForeign, // 3 GPUs to other processes, 2 to gssh jobs
			reason:  "gpu01: 1/6 GPUs free, 2 needed (GPU 2: in use by other processes; GPU 3: processes and memory unreadable; GPU 4: memory in use, processes unreadable; GPU 0,1: in use by gssh jobs (u: jobs 1, 2))",
			rejected: []string{
				"gpu01: 1/6 GPUs free, 2 needed (GPU 2: in use by other processes; GPU 3: processes and memory unreadable; GPU 4: memory in use, processes unreadable; GPU 0,1: in use by gssh jobs (u: jobs 1, 2))",
			},
		},
		{
			name:    "shared: packs while booked + request ≤ usable",
			nodes:   []Host{host("gpu01", gpus(2, 80*GiB)...)},
			running: []job.Job{running(1, "gpu01", 40*GiB, "GPU-00"), running(2, "gpu01", 32*GiB, "GPU-01")},
			req:     shared(1, 40*GiB), // usable 72 GiB: 40+40 does not fit, 32+40 does
			want:    job.Placement{Host: "gpu01", GPUs: []string{"GPU-01"}, Indexes: []int{1}},
		},
		{
			name: "shared: each reason",
			nodes: []Host{host("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), func(g *gpuinfo.GPU) { *g.MemFree = 30 * GiB }),
				with(gpu(3, 80*GiB), func(g *gpuinfo.GPU) { g.MemTotal, g.MemFree, g.MemoryState = nil, nil, "insufficient permissions" }),
				with(gpu(4, 80*GiB), func(g *gpuinfo.GPU) { g.MemFree = nil }),
				gpu(5, 24*GiB),
				with(gpu(6, 80*GiB), foreign),
			)},
			running: []job.Job{running(1, "gpu01", 0, "GPU-00"), running(2, "gpu01", 20*GiB, "GPU-01"), running(3, "gpu01", 20*GiB, "GPU-01")},
			code:    CodeMem,
			req:     shared(2, 40*GiB),
			reason:  "gpu01: 1/7 GPUs with ≥ 40.0 GiB free, 2 needed (GPU 1: 32.0 GiB of 72.0 GiB usable left, booked by gssh jobs (u: jobs 2, 3); GPU 2: only 30.0 GiB free now; GPU 3: memory unknown (insufficient permissions); GPU 4: memory unknown; GPU 5: only 21.6 GiB usable; GPU 0: held by an exclusive gssh job (u: job 1))",
			rejected: []string{
				"gpu01: 1/7 GPUs with ≥ 40.0 GiB free, 2 needed (GPU 1: 32.0 GiB of 72.0 GiB usable left, booked by gssh jobs (u: jobs 2, 3); GPU 2: only 30.0 GiB free now; GPU 3: memory unknown (insufficient permissions); GPU 4: memory unknown; GPU 5: only 21.6 GiB usable; GPU 0: held by an exclusive gssh job (u: job 1))",
			},
		},
		{
			name:  "shared: other people's processes leave room",
			nodes: []Host{host("gpu01", with(gpu(0, 80*GiB), foreign))},
			req:   shared(1, 40*GiB),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:     "shared: memory unknown for the whole host",
			nodes:    []Host{host("gpu01", permDenied)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/1 GPUs with ≥ 1.0 GiB free (GPU 0: memory unknown (insufficient permissions))",
			rejected: []string{"gpu01: 0/1 GPUs with ≥ 1.0 GiB free (GPU 0: memory unknown (insufficient permissions))"},
		},
		{
			name:  "exclusive: unknown memory is fine when the process list is known",
			nodes: []Host{host("gpu01", permDenied)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:    "a GPU without UUID goes by index",
			nodes:   []Host{host("gpu01", noUUID, gpu(4, 80*GiB))},
			running: []job.Job{running(1, "gpu01", 0, "GPU-04")},
			req:     excl(1),
			want:    job.Placement{Host: "gpu01", GPUs: []string{"3"}, Indexes: []int{3}},
		},
		{
			name:     "a GPU without UUID is booked by index",
			nodes:    []Host{host("gpu01", noUUID)},
			running:  []job.Job{running(1, "gpu01", 0, "3")},
			req:      excl(1),
			reason:   "gpu01: 0/1 GPUs free (GPU 3: in use by gssh jobs (u: job 1))",
			rejected: []string{"gpu01: 0/1 GPUs free (GPU 3: in use by gssh jobs (u: job 1))"},
		},
		{
			name:  "MIG devices are the units, in index order",
			nodes: []Host{host("gpu01", migGPU(0))},
			req:   shared(1, 10*GiB),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-0"}, Indexes: []int{0}, MIG: []int{0}},
		},
		{
			name: "MIG: a process on one MIG device leaves the other",
			nodes: []Host{host("gpu01", with(migGPU(0), func(g *gpuinfo.GPU) {
				g.Procs = []gpuinfo.Proc{{PID: 7, GPUUUID: "MIG-00-0"}}
			}))},
			req:  excl(1),
			want: job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-1"}, Indexes: []int{0}, MIG: []int{1}},
		},
		{
			name: "MIG: a process not tied to a MIG device blocks them all",
			nodes: []Host{host("gpu01", with(migGPU(0), func(g *gpuinfo.GPU) {
				g.Procs = []gpuinfo.Proc{{PID: 7, GPUUUID: "GPU-00"}}
			}))},
			req:      excl(1),
			reason:   "gpu01: 0/2 GPUs free (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): in use by other processes)",
			rejected: []string{"gpu01: 0/2 GPUs free (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): in use by other processes)"},
		},
		{
			name:     "MIG: booked by MIG UUID",
			nodes:    []Host{host("gpu01", migGPU(0))},
			running:  []job.Job{running(1, "gpu01", 0, "MIG-00-0"), running(2, "gpu01", 30*GiB, "MIG-00-1")},
			req:      shared(1, 10*GiB), // MIG 1: 36 GiB usable, 30 booked
			reason:   "gpu01: 0/2 GPUs with ≥ 10.0 GiB free (GPU 0 MIG 0 (3g.40gb): held by an exclusive gssh job (u: job 1); GPU 0 MIG 1 (3g.40gb): 6.0 GiB of 36.0 GiB usable left, booked by gssh jobs (u: job 2))",
			rejected: []string{"gpu01: 0/2 GPUs with ≥ 10.0 GiB free (GPU 0 MIG 0 (3g.40gb): held by an exclusive gssh job (u: job 1); GPU 0 MIG 1 (3g.40gb): 6.0 GiB of 36.0 GiB usable left, booked by gssh jobs (u: job 2))"},
		},
		{
			name:     "MIG: memory unknown from nvidia-smi -L",
			nodes:    []Host{host("gpu01", migNoMem)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/2 GPUs with ≥ 1.0 GiB free (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): memory unknown)",
			rejected: []string{"gpu01: 0/2 GPUs with ≥ 1.0 GiB free (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): memory unknown)"},
		},
		{
			name:  "MIG: exclusive without memory is fine",
			nodes: []Host{host("gpu01", migNoMem)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-0"}, Indexes: []int{0}, MIG: []int{0}},
		},
		{
			name:     "MIG: multi-GPU jobs take whole GPUs",
			nodes:    []Host{host("gpu01", migGPU(0), gpu(1, 80*GiB))},
			req:      excl(2),
			reason:   "gpu01: 1/3 GPUs free, 2 needed (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): MIG device (a job sees only one: ask for 1 GPU))",
			rejected: []string{"gpu01: 1/3 GPUs free, 2 needed (GPU 0 MIG 0 (3g.40gb), GPU 0 MIG 1 (3g.40gb): MIG device (a job sees only one: ask for 1 GPU))"},
		},
		{
			name: "MIG: enabled without devices, and a device without UUID",
			nodes: []Host{host("gpu01",
				with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) { g.MIGMode = "Enabled" }),
				with(migGPU(1), func(g *gpuinfo.GPU) { g.MIG = g.MIG[:1]; g.MIG[0].UUID = "" }),
			)},
			req:      excl(1),
			reason:   "gpu01: 0/2 GPUs free (GPU 0: MIG enabled but no MIG device listed; GPU 1 MIG 1 (3g.40gb): MIG device without a UUID)",
			rejected: []string{"gpu01: 0/2 GPUs free (GPU 0: MIG enabled but no MIG device listed; GPU 1 MIG 1 (3g.40gb): MIG device without a UUID)"},
		},
		{
			name: "reasons group GPUs into ranges",
			nodes: []Host{host("gpu01",
				gpu(0, 80*GiB), gpu(1, 80*GiB), gpu(2, 80*GiB), gpu(3, 80*GiB),
				with(gpu(4, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthLost }),
				with(gpu(5, 80*GiB), foreign), with(gpu(6, 80*GiB), foreign), with(gpu(7, 80*GiB), foreign),
			)},
			running:  []job.Job{running(1, "gpu01", 0, "GPU-00"), running(2, "gpu01", 0, "GPU-01", "GPU-02", "GPU-03")},
			code:     CodeNoFreeGPU,
			req:      excl(1),
			reason:   "gpu01: 0/8 GPUs free (GPU 0-3: in use by gssh jobs (u: jobs 1, 2); GPU 4: lost; GPU 5-7: in use by other processes)",
			rejected: []string{"gpu01: 0/8 GPUs free (GPU 0-3: in use by gssh jobs (u: jobs 1, 2); GPU 4: lost; GPU 5-7: in use by other processes)"},
		},
		{
			name:   "no hosts",
			req:    excl(1),
			reason: "no hosts",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := plan1(tt.nodes, tt.running, tt.req)
			if len(d.Starts)+len(d.Pending) != 1 {
				t.Fatalf("plan of one job: %+v", d)
			}
			var got job.Placement
			var pend Pending
			if len(d.Starts) == 1 {
				got = d.Starts[0].Placement
			} else {
				pend = d.Pending[0]
			}
			got.Share = 0 // checked in TestShares
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("placement = %+v, want %+v", got, tt.want)
			}
			if pend.Reason.Text != tt.reason {
				t.Errorf("reason:\n got %q\nwant %q", pend.Reason.Text, tt.reason)
			}
			if tt.code != "" && pend.Reason.Code != tt.code {
				t.Errorf("code %q, want %q", pend.Reason.Code, tt.code)
			}
			if tt.want.Host == "" && pend.Reason.Code == "" {
				t.Errorf("pending without a code: %+v", pend)
			}
			// Every host turned down, placed or not (a placed job's
			// rejections are not part of the plan).
			dec := place(nodes(tt.nodes, tt.running, ""), &want{Request: tt.req, explain: true}, FitFirst)
			var rej []string
			for _, r := range dec.rejected {
				rej = append(rej, r.Host+": "+r.Reason.Text)
			}
			if !slices.Equal(rej, tt.rejected) {
				t.Errorf("rejected:\n got %q\nwant %q", rej, tt.rejected)
			}
			if tt.want.Host == "" && !reflect.DeepEqual(pend.Rejected, dec.rejected) {
				t.Errorf("pending rejections %+v, want %+v", pend.Rejected, dec.rejected)
			}
			// Explained, a placed job keeps its rejections.
			ex := Plan(Input{Hosts: tt.nodes, Running: tt.running, Queue: []job.Job{queued(100, tt.req)}, Explain: 100})
			if len(ex.Starts) == 1 && !reflect.DeepEqual(ex.Starts[0].Rejected, dec.rejected) {
				t.Errorf("explained start's rejections %+v, want %+v", ex.Starts[0].Rejected, dec.rejected)
			}
		})
	}
}

// Plan leaves its input alone and answers the same every time, whatever
// the order of its hosts and queue.
func TestPlanPure(t *testing.T) {
	hosts := []Host{host("gpu02", gpus(4, 80*GiB)...), host("gpu01", gpu(3, 80*GiB), gpu(1, 80*GiB))}
	run := []job.Job{running(1, "gpu02", 10*GiB, "GPU-00")}
	queue := []job.Job{queued(4, shared(1, 40*GiB)), queued(2, excl(2)), queued(3, excl(4))}
	firstFit := Policy{Order: OrderPriority, Fit: FitFirst, Backfill: BackfillSkip}
	in := Input{Hosts: hosts, Running: run, Queue: queue, Policy: firstFit, Explain: 4}
	before := fmt.Sprintf("%#v", in)
	first := Plan(in)
	for range 3 {
		if again := Plan(in); !reflect.DeepEqual(again, first) {
			t.Fatalf("Plan changed its answer: %+v, then %+v", first, again)
		}
	}
	if after := fmt.Sprintf("%#v", in); after != before {
		t.Errorf("Plan changed its input")
	}
	shuffled := Input{Hosts: []Host{hosts[1], hosts[0]}, Running: run, Queue: []job.Job{queue[2], queue[0], queue[1]}, Policy: firstFit, Explain: 4}
	if again := Plan(shuffled); !reflect.DeepEqual(again, first) {
		t.Errorf("input order changed the plan: %+v, then %+v", first, again)
	}
	want := []Start{
		{Job: 2, Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-01", "GPU-03"}, Indexes: []int{1, 3}, Share: 2}},
		{Job: 4, Placement: job.Placement{Host: "gpu02", GPUs: []string{"GPU-00"}, Indexes: []int{0}, Share: 0.5},
			Rejected: []Rejection{{Host: "gpu01", Reason: Reason{Code: CodeNoFreeGPU, Text: "0/2 GPUs with ≥ 40.0 GiB free (GPU 1,3: held by an exclusive gssh job (u: job 2))"}}}},
	}
	if !reflect.DeepEqual(first.Starts, want) {
		t.Errorf("starts %+v, want %+v", first.Starts, want)
	}
	if len(first.Pending) != 1 || first.Pending[0].Job != 3 || first.Pending[0].Reason.Code != CodeTooFewGPUs && first.Pending[0].Reason.Code != CodeNoFreeGPU {
		t.Errorf("pending %+v", first.Pending)
	}
}

// One plan books each job it places before placing the next: GPUs fill
// the way the rules say.
func TestPlanBooksAsItGoes(t *testing.T) {
	g := gpu(0, 80*GiB)
	*g.MemFree = 50 * GiB // someone else holds 30 GiB
	hosts := []Host{host("gpu01", g, gpu(1, 80*GiB))}
	var queue []job.Job
	for i := range 6 {
		queue = append(queue, queued(job.ID(i+1), shared(1, 20*GiB)))
	}
	d := Plan(Input{Hosts: hosts, Queue: queue})
	var got []string
	for _, s := range d.Starts {
		got = append(got, s.Placement.GPUs[0])
	}
	for _, p := range d.Pending {
		got = append(got, "queued: "+p.Reason.Text)
	}
	want := []string{
		"GPU-00", "GPU-00", // live free 50 → 30 → 10 GiB
		"GPU-01", "GPU-01", "GPU-01", // 72 GiB usable: 3 × 20
		"queued: gpu01: 0/2 GPUs with ≥ 20.0 GiB free (GPU 0: only 10.0 GiB free now (u: jobs 1, 2); GPU 1: 12.0 GiB of 72.0 GiB usable left, booked by gssh jobs (u: jobs 3, 4, 5))",
	}
	if !slices.Equal(got, want) {
		t.Errorf("placements:\n got %q\nwant %q", got, want)
	}
	if *hosts[0].Snapshot.GPUs[0].MemFree != 50*GiB {
		t.Errorf("Plan changed the caller's snapshot")
	}

	// Exclusive bookings, and a GPU without UUID booked by index.
	noUUID := gpu(2, 80*GiB)
	noUUID.UUID = ""
	d = Plan(Input{Hosts: []Host{host("gpu01", noUUID)}, Queue: []job.Job{queued(1, excl(1)), queued(2, shared(1, GiB))}})
	if len(d.Starts) != 1 || d.Starts[0].Placement.GPUs[0] != "2" {
		t.Fatalf("starts %+v", d.Starts)
	}
	if len(d.Pending) != 1 || !strings.Contains(d.Pending[0].Reason.Text, "held by an exclusive gssh job") {
		t.Errorf("after an exclusive booking: %+v", d.Pending)
	}

	// A MIG device's live free memory goes down too.
	d = Plan(Input{Hosts: []Host{host("gpu01", migGPU(0))}, Queue: []job.Job{queued(1, shared(1, 30*GiB)), queued(2, shared(1, 30*GiB))}})
	if len(d.Starts) != 2 || d.Starts[0].Placement.GPUs[0] != "MIG-00-0" || d.Starts[1].Placement.GPUs[0] != "MIG-00-1" {
		t.Errorf("MIG placements %+v", d.Starts)
	}
}

// The queue's order: priority then submit order by default, submit order
// alone under fifo.
func TestPlanOrder(t *testing.T) {
	hosts := []Host{host("gpu01", gpus(2, 80*GiB)...)}
	prio := func(id job.ID, p int) job.Job { j := queued(id, excl(1)); j.Spec.Priority = p; return j }
	queue := []job.Job{prio(1, 5), prio(2, 0), prio(3, 5), prio(4, 10)}
	started := func(d Decisions) []job.ID {
		var ids []job.ID
		for _, s := range d.Starts {
			ids = append(ids, s.Job)
		}
		return ids
	}
	for _, tt := range []struct {
		order Order
		want  []job.ID
	}{
		{"", []job.ID{2, 1}}, // the default
		{OrderPriority, []job.ID{2, 1}},
		{OrderFIFO, []job.ID{1, 2}},
	} {
		d := Plan(Input{Hosts: hosts, Queue: queue, Policy: Policy{Order: tt.order}})
		if got := started(d); !slices.Equal(got, tt.want) {
			t.Errorf("order %q: started %v, want %v", tt.order, got, tt.want)
		}
		if len(d.Pending) != 2 {
			t.Errorf("order %q: pending %+v", tt.order, d.Pending)
		}
	}
}

// A job that does not fit blocks those behind it under backfill none
// (strict order); under skip they go past it.
func TestPlanBackfill(t *testing.T) {
	hosts := []Host{host("gpu01", gpus(2, 80*GiB)...)}
	run := []job.Job{running(1, "gpu01", 0, "GPU-00")}
	queue := []job.Job{queued(2, excl(2)), queued(3, excl(1)), queued(4, shared(1, 8*GiB))}

	skip := Plan(Input{Hosts: hosts, Running: run, Queue: queue, Policy: Policy{Weights: FairShareAlone, Backfill: BackfillSkip}})
	if len(skip.Starts) != 1 || skip.Starts[0].Job != 3 {
		t.Errorf("skip: starts %+v", skip.Starts)
	}
	if len(skip.Pending) != 2 || skip.Pending[0].Job != 2 || skip.Pending[1].Job != 4 || skip.Pending[1].Reason.Code != CodeNoFreeGPU {
		t.Errorf("skip: pending %+v", skip.Pending)
	}

	none := Plan(Input{Hosts: hosts, Running: run, Queue: queue, Policy: Policy{Weights: FairShareAlone, Backfill: BackfillNone}})
	if len(none.Starts) != 0 || len(none.Pending) != 3 {
		t.Fatalf("none: %+v", none)
	}
	if p := none.Pending[0]; p.Job != 2 || p.Reason.Code != CodeNoFreeGPU || p.Reason.Text != "gpu01: 1/2 GPUs free, 2 needed (GPU 0: in use by gssh jobs (u: job 1))" {
		t.Errorf("none: head %+v", p)
	}
	for _, p := range none.Pending[1:] {
		if p.Reason.Code != CodeBlocked || p.Reason.Text != "waiting behind job 2, which goes first and does not fit yet (backfill: none)" || p.Rejected != nil {
			t.Errorf("none: behind the head %+v", p)
		}
	}
}

// A pending job's code is the one most of the hosts it could use gave,
// and its text leads with those hosts.
func TestPendingCode(t *testing.T) {
	drained := func(name string) Host { h := host(name, gpus(1, 80*GiB)...); h.Drain = true; return h }
	down := host("gpu09")
	down.Snapshot.State = gpuinfo.HostUnreachable
	hosts := []Host{host("gpu01", gpus(1, 80*GiB)...), drained("gpu02"), drained("gpu03"), down}
	run := []job.Job{running(1, "gpu01", 0, "GPU-00")}
	d := plan1(hosts, run, excl(1))
	if p := d.Pending[0]; p.Reason.Code != CodeDrained || p.Reason.Text != "gpu02: drained; gpu03: drained; gpu01: 0/1 GPUs free (GPU 0: in use by gssh jobs (u: job 1)); gpu09: unreachable" {
		t.Errorf("pending %+v", p)
	}
	if got := dominant([]Code{CodeHostDown, CodeMem, CodeHostDown, CodeMem}); got != CodeMem {
		t.Errorf("tie: %q", got)
	}
	for req, want := range map[*Request]Code{
		{Host: "nope", GPUs: 1}:                        CodeUnknownHost,
		{Host: "auto", GPUs: 1, Labels: []string{"x"}}: CodeLabel,
		{Host: "gpu09", GPUs: 1}:                       CodeHostDown,
	} {
		if got := plan1(hosts, nil, *req).Pending[0].Reason.Code; got != want {
			t.Errorf("%+v: code %q, want %q", *req, got, want)
		}
	}
	if got := plan1(nil, nil, excl(1)).Pending[0].Reason; got != (Reason{CodeNoHosts, "no hosts"}) {
		t.Errorf("no hosts: %+v", got)
	}
}

func TestPolicyCheck(t *testing.T) {
	if err := (Policy{}).Check(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
	if err := DefaultPolicy().Check(); err != nil {
		t.Errorf("default policy: %v", err)
	}
	for _, tt := range []struct {
		p    Policy
		want string
	}{
		{Policy{Order: "fairest"}, `policy order "fairest": give one of fifo, priority, fairshare`},
		{Policy{Fit: "best"}, `policy placement "best": give one of firstfit, bestfit`},
		{Policy{Backfill: "conservative"}, `policy backfill "conservative": give one of none, skip, easy`},
		{Policy{FairShare: FairShare{HalfLife: time.Hour, Window: time.Hour}}, "policy fairshare: give a half_life or a window, not both"},
		{Policy{FairShare: FairShare{Window: -time.Hour}}, "policy fairshare: a half_life or window must be more than 0, such as 24h"},
		{Policy{Users: map[string]UserShare{"ann": {Weight: 0}}}, "policy users ann: weight 0: give a number more than 0, such as 1 or 2"},
		{Policy{Users: map[string]UserShare{"bob": {Weight: -1}}}, "policy users bob: weight -1: give a number more than 0, such as 1 or 2"},
	} {
		if err := tt.p.Check(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: %v, want %s", tt.p, err, tt.want)
		}
	}
}

func TestUsable(t *testing.T) {
	for _, tt := range []struct {
		total uint64
		pct   float64
		want  uint64
	}{
		{80 * GiB, 10, 72 * GiB},
		{80 * GiB, 0, 80 * GiB},
		{80 * GiB, -5, 80 * GiB},
		{80 * GiB, 100, 0},
		{80 * GiB, 12.5, 70 * GiB},
	} {
		if got := Usable(tt.total, tt.pct); got != tt.want {
			t.Errorf("Usable(%d, %g) = %d, want %d", tt.total, tt.pct, got, tt.want)
		}
	}
}

// BenchmarkPlan plans a queue of 1000 jobs of mixed shapes on 20 hosts ×
// 8 GPUs, as one scheduling pass of a busy lab would.
func BenchmarkPlan(b *testing.B) {
	hosts := make([]Host, 20)
	for i := range hosts {
		hosts[i] = host(fmt.Sprintf("gpu%02d", i), gpus(8, 80*GiB)...)
	}
	queue := mixedQueue(1000, 1, hosts)
	in := Input{Hosts: hosts, Queue: queue}
	b.ReportAllocs()
	for b.Loop() {
		if d := Plan(in); len(d.Starts) == 0 {
			b.Fatal("nothing placed")
		}
	}
}

// Bookings keep who holds each GPU: job, user, priority, bytes (0 =
// exclusive).
func TestBookings(t *testing.T) {
	jobs := []job.Job{
		{ID: 1, User: "ann", State: job.Running, Spec: job.Spec{MemPerGPU: 10 * GiB, Priority: 5}, Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}}},
		{ID: 2, User: "bob", State: job.Launching, Spec: job.Spec{MemPerGPU: 5 * GiB, Priority: 1}, Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-00", "3"}, Indexes: []int{0, 3}}},
		{ID: 3, User: "ann", State: job.Running, Placement: job.Placement{Host: "gpu02", GPUs: []string{"MIG-00-1"}, Indexes: []int{0}}},
		{ID: 4, State: job.Succeeded, Placement: job.Placement{Host: "gpu02", GPUs: []string{"GPU-01"}, Indexes: []int{1}}},
		{ID: 5, State: job.Queued},
	}
	ann := Holder{Job: 1, User: "ann", Priority: 5, Mem: 10 * GiB}
	bob := Holder{Job: 2, User: "bob", Priority: 1, Mem: 5 * GiB}
	want := map[string]map[string]Booking{
		"gpu01": {"GPU-00": {Holders: []Holder{ann, bob}}, "idx:3": {Holders: []Holder{bob}}},
		"gpu02": {"MIG-00-1": {Holders: []Holder{{Job: 3, User: "ann"}}}},
	}
	got := Bookings(jobs)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Bookings:\n got %v\nwant %v", got, want)
	}
	if b := got["gpu01"]["GPU-00"]; b.Jobs() != 2 || b.Mem() != 15*GiB || b.Exclusive() {
		t.Errorf("GPU-00: %d jobs, %d bytes, exclusive %v", b.Jobs(), b.Mem(), b.Exclusive())
	}
	if b := got["gpu02"]["MIG-00-1"]; b.Jobs() != 1 || b.Mem() != 0 || !b.Exclusive() {
		t.Errorf("MIG-00-1: %+v", b)
	}
}

// A job whose head-of-queue spot is held for a reason no job's end
// changes (its host is drained) does not block the queue under backfill
// none; one that waits for busy GPUs does.
func TestPlanBackfillNoneBlocksOnlyExhausted(t *testing.T) {
	drained := host("gpu02", gpus(1, 80*GiB)...)
	drained.Drain = true
	hosts := []Host{host("gpu01", gpus(1, 80*GiB)...), drained}
	pinned := queued(1, Request{Host: "gpu02", GPUs: 1})
	d := Plan(Input{Hosts: hosts, Queue: []job.Job{pinned, queued(2, excl(1))}, Policy: Policy{Backfill: BackfillNone}})
	if len(d.Starts) != 1 || d.Starts[0].Job != 2 || d.Pending[0].Reason.Code != CodeDrained {
		t.Errorf("a drained pin blocked the queue: %+v", d)
	}
	if CodeDrained.Exhausted() || !CodeNoFreeGPU.Exhausted() || !CodeMem.Exhausted() || !CodeForeign.Exhausted() || CodeLabel.Exhausted() {
		t.Error("Exhausted is wrong for some code")
	}
}

// Over random labs and queues: the memo changes no answer, no GPU is
// booked past its usable memory or shared with an exclusive job, and the
// same input gives the same plan.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		drng := rand.New(rand.NewPCG(uint64(round), 9)) // drains and walltimes, apart from the rest
		var hosts []Host
		for i := range 1 + rng.IntN(4) {
			var gs []gpuinfo.GPU
			for k := range 1 + rng.IntN(8) {
				g := gpu(k, uint64(16+rng.IntN(65))*GiB)
				if rng.IntN(5) == 0 {
					foreign(&g)
				}
				gs = append(gs, g)
			}
			h := host(fmt.Sprintf("gpu%02d", i), gs...)
			h.Drain = rng.IntN(8) == 0
			if drng.IntN(4) == 0 { // gssh drain: a window ahead, or open
				h.Drained = &Drain{By: "bob", From: time.Time{}.Add(time.Duration(drng.IntN(5)-1) * time.Hour)}
			}
			hosts = append(hosts, h)
		}
		var queue []job.Job
		for id := range 1 + rng.IntN(60) {
			r := Request{Host: "auto", GPUs: 1 + rng.IntN(3)}
			if rng.IntN(2) == 0 {
				r.MemPerGPU = uint64(1+rng.IntN(40)) * GiB
			}
			if rng.IntN(6) == 0 {
				r.Host = hosts[rng.IntN(len(hosts))].Name
			}
			j := queued(job.ID(id+1), r)
			j.Spec.Priority = rng.IntN(11)
			j.Spec.Timeout = time.Duration(drng.IntN(4)) * time.Hour
			queue = append(queue, j)
		}
		policies := []Policy{{}, {Order: OrderPriority, Fit: FitFirst, Backfill: BackfillSkip}, {Order: OrderFIFO, Fit: FitBest, Backfill: BackfillNone}}
		in := Input{Hosts: hosts, Queue: queue, Policy: policies[round%len(policies)], Usage: map[string]float64{"u": float64(round)}}
		d := Plan(in)
		if slow := plan(in, false, nil); !reflect.DeepEqual(d, slow) {
			t.Fatalf("round %d: the memo changed the plan:\n%+v\n%+v", round, d, slow)
		}
		if again := Plan(in); !reflect.DeepEqual(d, again) {
			t.Fatalf("round %d: not deterministic", round)
		}
		// Explaining a job changes only the words: every decision and
		// reason is the same.
		explained := job.ID(1 + rng.IntN(len(queue)))
		in.Explain = explained
		ex := Plan(in)
		in.Explain = 0
		for i := range ex.Starts {
			ex.Starts[i].Rejected = nil
		}
		for i := range ex.Pending {
			ex.Pending[i].Rank = ""
		}
		if !reflect.DeepEqual(d, ex) {
			t.Fatalf("round %d: explaining job %d changed the plan:\n%+v\n%+v", round, explained, d, ex)
		}
		// Terse: the same decisions and codes, no words.
		in.Terse = true
		terse := Plan(in)
		in.Terse = false
		words := Plan(in)
		for _, d := range []Decisions{terse, words} {
			for i := range d.Pending {
				d.Pending[i].Reason.Text = ""
				for k := range d.Pending[i].Rejected {
					d.Pending[i].Rejected[k].Reason.Text = ""
				}
			}
		}
		if !reflect.DeepEqual(terse, words) {
			t.Fatalf("round %d: terse changed the plan:\n%+v\n%+v", round, terse, words)
		}
		// Nothing over-booked: replay the starts as running jobs (that have
		// allocated nothing yet, the worst case), and check every GPU this
		// plan placed a job on.
		byID := map[job.ID]job.Job{}
		for _, j := range queue {
			byID[j.ID] = j
		}
		var run []job.Job
		for _, s := range d.Starts {
			j := byID[s.Job]
			j.State, j.Placement = job.Running, s.Placement
			run = append(run, j)
		}
		for _, n := range nodes(hosts, run, "") {
			for _, u := range n.units {
				b := n.held[u.slot]
				if b.Jobs() == 0 {
					continue
				}
				if b.Exclusive() && (b.Jobs() > 1 || u.procs > 0) {
					t.Fatalf("round %d: %s %s: an exclusive job shares with %d jobs and %d processes", round, n.Name, u.key, b.Jobs()-1, u.procs)
				}
				if c := u.commitment(b, nil, ""); !b.Exclusive() && (c.gssh+c.foreign > Usable(*u.total, n.ReservePct) || b.Mem() > *u.free) {
					t.Fatalf("round %d: %s %s: %d booked + %d foreign > %d usable, or over %d free", round, n.Name, u.key, c.gssh, c.foreign, Usable(*u.total, n.ReservePct), *u.free)
				}
			}
		}
	}
}

// BenchmarkPlanLarge is issue 9's size: a queue of 10,000 jobs on 100
// hosts × 8 GPUs with 500 jobs running (priority order, first fit, skip).
// BenchmarkPlanQueue is one planning pass under the default policy
// (fair-share order, best fit, EASY backfill) over 1k, 10k and 100k
// queued jobs of 30 users, on 100 hosts × 8 GPUs with 500 running jobs
// (walltimes from 1 to 24 hours, so the first job that cannot start gets
// a reservation).
func BenchmarkPlanQueue(b *testing.B) {
	hosts := make([]Host, 100)
	for i := range hosts {
		hosts[i] = host(fmt.Sprintf("gpu%03d", i), gpus(8, 80*GiB)...)
	}
	now := t0
	var run []job.Job
	for i := range 500 {
		h, g := i%100, (i/100)%8
		j := running(job.ID(i+1), hosts[h].Name, 0, fmt.Sprintf("GPU-%02d", g))
		j.User, j.StartedAt, j.Spec.Timeout = fmt.Sprintf("user%02d", i%30), now.Add(-time.Hour), time.Duration(2+i%24)*time.Hour
		run = append(run, j)
	}
	usage := map[string]float64{}
	for u := range 30 {
		usage[fmt.Sprintf("user%02d", u)] = float64(u * 3600)
	}
	for _, n := range []int{1000, 10000, 100000} {
		queue := mixedQueue(n, 1000, hosts)
		for i := range queue {
			queue[i].User = fmt.Sprintf("user%02d", i%30)
			queue[i].Spec.Timeout = time.Duration(1+i%6) * time.Hour
		}
		in := Input{Now: now, Hosts: hosts, Running: run, Queue: queue, Usage: usage}
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := Plan(in); len(d.Starts) == 0 {
					b.Fatal("nothing placed")
				}
			}
		})
	}
}

// mixedQueue is n queued jobs of mixed shapes (exclusive 1-3 GPUs, shared
// 4-15 GiB, 2 × 10 GiB, pinned to one of hosts), ids from first, the
// priorities 0-10 in turn.
func mixedQueue(n int, first job.ID, hosts []Host) []job.Job {
	queue := make([]job.Job, n)
	for i := range queue {
		var r Request
		switch i % 4 {
		case 0:
			r = excl(1 + i%3)
		case 1:
			r = shared(1, uint64(4+i%12)*GiB)
		case 2:
			r = shared(2, 10*GiB)
		default:
			r = Request{Host: hosts[i%len(hosts)].Name, GPUs: 1, MemPerGPU: 8 * GiB}
		}
		queue[i] = queued(first+job.ID(i), r)
		queue[i].Spec.Priority = i % 11
	}
	return queue
}

func gib(f float64) uint64 { return uint64(f * GiB) }

// Memory booked is memory taken, across passes: a job booked but not yet
// allocated still counts, next to what other people's processes use.
func TestMemoryBookedIsTaken(t *testing.T) {
	// 80 GiB GPU, 10% reserve (72 usable); someone else's process uses
	// 27.9 GiB, 51.2 GiB free (the driver keeps the rest).
	g := gpu(0, 80*GiB)
	g.Procs = []gpuinfo.Proc{{PID: 77, Name: "python", User: "eve", UsedBytes: ptr(gib(27.9)), GPUUUID: g.UUID}}
	*g.MemUsed, *g.MemFree = gib(28.8), gib(51.2)
	hosts := []Host{host("h1", g)}
	first := plan1(hosts, nil, shared(1, 30*GiB))
	if len(first.Starts) != 1 {
		t.Fatalf("first 30 GiB job: %+v", first)
	}
	// The next pass: the first job runs but has allocated nothing yet.
	run := []job.Job{running(1, "h1", 30*GiB, "GPU-00")}
	second := plan1(hosts, run, shared(1, 30*GiB))
	if len(second.Starts) != 0 || second.Pending[0].Reason.Text != "h1: 0/1 GPUs with ≥ 30.0 GiB free (GPU 0: only 13.2 GiB free now (u: job 1))" {
		t.Errorf("second 30 GiB job (would be 88.8 GiB on 80): %+v", second)
	}
	// Once it allocated its 30 GiB (the snapshot shows it in its session),
	// the answer is the same: max(booked, used) counts once.
	g2 := g
	g2.Procs = append(slices.Clone(g.Procs), gpuinfo.Proc{PID: 5001, SessionID: ptr(5000), UsedBytes: ptr(uint64(30 * GiB)), GPUUUID: g.UUID})
	g2.MemUsed, g2.MemFree = ptr(gib(58.8)), ptr(gib(21.2))
	run[0].Remote.PID = 5000
	if d := plan1([]Host{host("h1", g2)}, run, shared(1, 12*GiB)); len(d.Starts) != 1 {
		t.Errorf("12 GiB beside an allocated 30 GiB job and 28.8 GiB foreign (72 usable): %+v", d)
	}
	if d := plan1([]Host{host("h1", g2)}, run, shared(1, 14*GiB)); len(d.Starts) != 0 {
		t.Errorf("14 GiB would pass 72 usable: %+v", d)
	}
	// A job that grew past its booking counts what it uses.
	run[0].Spec.MemPerGPU = 10 * GiB
	if d := plan1([]Host{host("h1", g2)}, run, shared(1, 14*GiB)); len(d.Starts) != 0 {
		t.Errorf("a 10 GiB booking using 30 GiB counts 30: %+v", d)
	}
}

// 50 --mem 4G jobs submitted one after another (each pass sees the ones
// before as running, nothing allocated yet) never book past a GPU's usable
// memory less what others use.
func TestBackToBackSharedJobs(t *testing.T) {
	g := gpu(0, 80*GiB)
	foreign(&g) // 1 GiB used by someone else
	hosts := []Host{host("h1", g)}
	var run []job.Job
	for i := range 50 {
		d := plan1(hosts, run, shared(1, 4*GiB))
		if len(d.Starts) == 1 {
			run = append(run, running(job.ID(i+1), "h1", 4*GiB, "GPU-00"))
		}
	}
	// 72 usable − 1 foreign = 71: 17 jobs of 4 GiB.
	if len(run) != 17 {
		t.Errorf("%d jobs of 4 GiB placed (%d GiB), want 17 (68 GiB ≤ 71)", len(run), 4*len(run))
	}
}
