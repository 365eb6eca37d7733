package sched

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
)

const GiB = 1 << 30

func ptr[T any](v T) *T { return &v }

// gpu is an idle, healthy GPU with total bytes of memory, all free.
func gpu(i int, total uint64) probe.GPU {
	return probe.GPU{
		Index: i, UUID: fmt.Sprintf("GPU-%02d", i), Health: probe.HealthOK,
		MemTotal: ptr(total), MemUsed: ptr(uint64(0)), MemFree: ptr(total),
		Procs: []probe.Proc{}, ProcsKnown: true,
	}
}

// gpus is n idle GPUs of total bytes each.
func gpus(n int, total uint64) []probe.GPU {
	out := make([]probe.GPU, n)
	for i := range out {
		out[i] = gpu(i, total)
	}
	return out
}

// node is a reachable host with a 10% reserve.
func node(name string, gs ...probe.GPU) Node {
	return Node{Name: name, ReservePct: 10, Snapshot: probe.Snapshot{Host: name, State: probe.HostOK, GPUs: gs}}
}

// with returns g changed by f.
func with(g probe.GPU, f func(*probe.GPU)) probe.GPU {
	f(&g)
	return g
}

func foreign(g *probe.GPU) {
	g.Procs = []probe.Proc{{PID: 4242, Name: "python", UsedBytes: ptr(uint64(GiB)), GPUUUID: g.UUID}}
	*g.MemUsed, *g.MemFree = GiB, *g.MemTotal-GiB
}

// migGPU is GPU i with MIG on and two MIG devices (memory as NVML reports it).
func migGPU(i int) probe.GPU {
	g := gpu(i, 80*GiB)
	g.MIGMode = "Enabled"
	g.MIG = []probe.MIG{
		{Index: 1, UUID: fmt.Sprintf("MIG-%02d-1", i), Profile: "3g.40gb", MemTotal: ptr(uint64(40 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(40 * GiB))},
		{Index: 0, UUID: fmt.Sprintf("MIG-%02d-0", i), Profile: "3g.40gb", MemTotal: ptr(uint64(40 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(40 * GiB))},
	}
	return g
}

func excl(n int) Request               { return Request{Host: "auto", GPUs: n} }
func shared(n int, mem uint64) Request { return Request{Host: "auto", GPUs: n, MemPerGPU: mem} }

func booked(n Node, b map[string]Booking) Node { n.Booked = b; return n }

func TestPlace(t *testing.T) {
	drained := node("gpu02", gpus(2, 80*GiB)...)
	drained.Drain = true
	labelled := node("gpu02", gpus(2, 80*GiB)...)
	labelled.Labels = []string{"a100", "nvlink"}
	state := func(name string, s probe.HostState) Node {
		n := node(name)
		n.Snapshot.State = s
		return n
	}
	degraded := node("gpu01", gpu(1, 80*GiB))
	degraded.Snapshot.State = probe.HostDegraded
	noUUID := gpu(3, 80*GiB)
	noUUID.UUID = ""
	permDenied := gpu(0, 80*GiB)
	permDenied.MemTotal, permDenied.MemUsed, permDenied.MemFree, permDenied.MemoryState = nil, nil, nil, "insufficient permissions"
	migNoMem := migGPU(0)
	for i := range migNoMem.MIG { // as nvidia-smi -L lists them
		migNoMem.MIG[i].MemTotal, migNoMem.MIG[i].MemUsed, migNoMem.MIG[i].MemFree = nil, nil, nil
	}

	for _, tt := range []struct {
		name  string
		nodes []Node
		req   Request
		want  job.Placement // zero: not placed
		// reason is Decision.Reason; rejected lists "node: reason".
		reason   string
		rejected []string
	}{
		{
			name:  "exclusive on an idle GPU",
			nodes: []Node{node("gpu01", gpus(2, 80*GiB)...)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:  "hosts by name, GPUs by index, whatever the input order",
			nodes: []Node{node("gpu02", gpus(2, 80*GiB)...), node("gpu01", gpu(5, 80*GiB), gpu(3, 80*GiB))},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-03"}, Indexes: []int{3}},
		},
		{
			name: "multi-GPU jobs take GPUs of one host",
			nodes: []Node{
				booked(node("gpu01", gpus(4, 80*GiB)...), map[string]Booking{"GPU-02": {Jobs: 1, Exclusive: true}, "GPU-03": {Jobs: 2, Mem: 20 * GiB}}),
				node("gpu02", gpus(4, 80*GiB)...),
			},
			req:      excl(3),
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00", "GPU-01", "GPU-02"}, Indexes: []int{0, 1, 2}},
			rejected: []string{"gpu01: 2/4 GPUs free, 3 needed (GPU 2,3: in use by gssh jobs)"},
		},
		{
			name:     "requested host",
			nodes:    []Node{node("gpu01", gpus(1, 80*GiB)...), node("gpu02", gpus(1, 80*GiB)...)},
			req:      Request{Host: "gpu02", GPUs: 1},
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
			rejected: []string{"gpu01: not the requested host gpu02"},
		},
		{
			name:     "unknown host",
			nodes:    []Node{node("gpu01", gpus(1, 80*GiB)...)},
			req:      Request{Host: "gpu09", GPUs: 1},
			reason:   "no host named gpu09",
			rejected: []string{"gpu01: not the requested host gpu09"},
		},
		{
			name:     "labels",
			nodes:    []Node{node("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "auto", Labels: []string{"nvlink", "a100"}, GPUs: 1},
			want:     job.Placement{Host: "gpu02", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
			rejected: []string{"gpu01: lacks labels nvlink, a100"},
		},
		{
			name:     "no host has the label",
			nodes:    []Node{node("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "auto", Labels: []string{"h100", "nvlink"}, GPUs: 1},
			reason:   "no host has labels h100, nvlink",
			rejected: []string{"gpu01: lacks labels h100, nvlink", "gpu02: lacks label h100"},
		},
		{
			name:     "the requested host lacks the label",
			nodes:    []Node{node("gpu01", gpus(1, 80*GiB)...), labelled},
			req:      Request{Host: "gpu01", Labels: []string{"a100"}, GPUs: 1},
			reason:   "gpu01: lacks label a100",
			rejected: []string{"gpu01: lacks label a100", "gpu02: not the requested host gpu01"},
		},
		{
			name:     "drained, and the reasons of every host",
			nodes:    []Node{drained, node("gpu01", with(gpu(0, 80*GiB), foreign))},
			req:      excl(1),
			reason:   "gpu01: 0/1 GPUs free (GPU 0: in use by other processes); gpu02: drained",
			rejected: []string{"gpu01: 0/1 GPUs free (GPU 0: in use by other processes)", "gpu02: drained"},
		},
		{
			name: "host states",
			nodes: []Node{
				state("a", probe.HostUnreachable), state("b", probe.HostDriverNotLoaded), state("c", ""),
				state("d", probe.HostNoDevices), node("e"), degraded,
			},
			req:  excl(1),
			want: job.Placement{Host: "gpu01", GPUs: []string{"GPU-01"}, Indexes: []int{1}},
			rejected: []string{
				"a: unreachable", "b: driver not loaded", "c: not probed yet", "d: no devices", "e: no GPUs",
			},
		},
		{
			name: "GPU health",
			nodes: []Node{node("gpu01",
				with(gpu(0, 80*GiB), func(g *probe.GPU) { g.Health = probe.HealthLost }),
				with(gpu(1, 80*GiB), func(g *probe.GPU) { g.Health = probe.HealthRequiresReset }),
				with(gpu(2, 80*GiB), func(g *probe.GPU) { g.Health = probe.HealthError }),
				with(gpu(3, 80*GiB), func(g *probe.GPU) { g.Health = "" }),
			)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/4 GPUs with ≥ 1.0 GiB free (GPU 0: lost; GPU 1: requires reset; GPU 2: in error state; GPU 3: health unknown)",
			rejected: []string{"gpu01: 0/4 GPUs with ≥ 1.0 GiB free (GPU 0: lost; GPU 1: requires reset; GPU 2: in error state; GPU 3: health unknown)"},
		},
		{
			name: "exclusive: nothing booked, no foreign process",
			nodes: []Node{booked(node("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), foreign),
				with(gpu(3, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, g.MemUsed = false, nil }),
				with(gpu(4, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, *g.MemUsed = false, 2*GiB }),
				with(gpu(5, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, *g.MemUsed = false, 5*MiB }),
			), map[string]Booking{"GPU-00": {Jobs: 1, Exclusive: true}, "GPU-01": {Jobs: 1, Mem: GiB}})},
			req:  excl(1),
			want: job.Placement{Host: "gpu01", GPUs: []string{"GPU-05"}, Indexes: []int{5}},
		},
		{
			name: "exclusive: each reason",
			nodes: []Node{booked(node("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), foreign),
				with(gpu(3, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, g.MemUsed = false, nil }),
				with(gpu(4, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, *g.MemUsed = false, 2*GiB }),
				with(gpu(5, 80*GiB), func(g *probe.GPU) { g.ProcsKnown, *g.MemUsed = false, 5*MiB }),
			), map[string]Booking{"GPU-00": {Jobs: 1, Exclusive: true}, "GPU-01": {Jobs: 1, Mem: GiB}})},
			req:    excl(2),
			reason: "gpu01: 1/6 GPUs free, 2 needed (GPU 0,1: in use by gssh jobs; GPU 2: in use by other processes; GPU 3: processes and memory unreadable; GPU 4: memory in use, processes unreadable)",
			rejected: []string{
				"gpu01: 1/6 GPUs free, 2 needed (GPU 0,1: in use by gssh jobs; GPU 2: in use by other processes; GPU 3: processes and memory unreadable; GPU 4: memory in use, processes unreadable)",
			},
		},
		{
			name: "shared: packs while booked + request ≤ usable",
			nodes: []Node{booked(node("gpu01", gpus(2, 80*GiB)...),
				map[string]Booking{"GPU-00": {Jobs: 1, Mem: 40 * GiB}, "GPU-01": {Jobs: 1, Mem: 32 * GiB}})},
			req:  shared(1, 40*GiB), // usable 72 GiB: 40+40 does not fit, 32+40 does
			want: job.Placement{Host: "gpu01", GPUs: []string{"GPU-01"}, Indexes: []int{1}},
		},
		{
			name: "shared: each reason",
			nodes: []Node{booked(node("gpu01",
				gpu(0, 80*GiB),
				gpu(1, 80*GiB),
				with(gpu(2, 80*GiB), func(g *probe.GPU) { *g.MemFree = 30 * GiB }),
				with(gpu(3, 80*GiB), func(g *probe.GPU) { g.MemTotal, g.MemFree, g.MemoryState = nil, nil, "insufficient permissions" }),
				with(gpu(4, 80*GiB), func(g *probe.GPU) { g.MemFree = nil }),
				gpu(5, 24*GiB),
				with(gpu(6, 80*GiB), foreign),
			), map[string]Booking{"GPU-00": {Jobs: 1, Exclusive: true}, "GPU-01": {Jobs: 2, Mem: 40 * GiB}})},
			req:    shared(2, 40*GiB),
			reason: "gpu01: 1/7 GPUs with ≥ 40.0 GiB free, 2 needed (GPU 0: held by an exclusive gssh job; GPU 1: booked by other gssh jobs; GPU 2: not enough memory free now; GPU 3: memory unknown (insufficient permissions); GPU 4: memory unknown; GPU 5: only 21.6 GiB usable)",
			rejected: []string{
				"gpu01: 1/7 GPUs with ≥ 40.0 GiB free, 2 needed (GPU 0: held by an exclusive gssh job; GPU 1: booked by other gssh jobs; GPU 2: not enough memory free now; GPU 3: memory unknown (insufficient permissions); GPU 4: memory unknown; GPU 5: only 21.6 GiB usable)",
			},
		},
		{
			name:  "shared: other people's processes leave room",
			nodes: []Node{node("gpu01", with(gpu(0, 80*GiB), foreign))},
			req:   shared(1, 40*GiB),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:     "shared: memory unknown for the whole host",
			nodes:    []Node{node("gpu01", permDenied)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/1 GPUs with ≥ 1.0 GiB free (GPU 0: memory unknown (insufficient permissions))",
			rejected: []string{"gpu01: 0/1 GPUs with ≥ 1.0 GiB free (GPU 0: memory unknown (insufficient permissions))"},
		},
		{
			name:  "exclusive: unknown memory is fine when the process list is known",
			nodes: []Node{node("gpu01", permDenied)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}},
		},
		{
			name:  "a GPU without UUID goes by index",
			nodes: []Node{booked(node("gpu01", noUUID, gpu(4, 80*GiB)), map[string]Booking{"idx:4": {Jobs: 1, Exclusive: true}})},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"3"}, Indexes: []int{3}},
		},
		{
			name:     "a GPU without UUID is booked by index",
			nodes:    []Node{booked(node("gpu01", noUUID), map[string]Booking{"idx:3": {Jobs: 1, Exclusive: true}})},
			req:      excl(1),
			reason:   "gpu01: 0/1 GPUs free (GPU 3: in use by gssh jobs)",
			rejected: []string{"gpu01: 0/1 GPUs free (GPU 3: in use by gssh jobs)"},
		},
		{
			name:  "MIG devices are the units, in index order",
			nodes: []Node{node("gpu01", migGPU(0))},
			req:   shared(1, 10*GiB),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-0"}, Indexes: []int{0}},
		},
		{
			name: "MIG: a process on one MIG device leaves the other",
			nodes: []Node{node("gpu01", with(migGPU(0), func(g *probe.GPU) {
				g.Procs = []probe.Proc{{PID: 7, GPUUUID: "MIG-00-0"}}
			}))},
			req:  excl(1),
			want: job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-1"}, Indexes: []int{0}},
		},
		{
			name: "MIG: a process not tied to a MIG device blocks them all",
			nodes: []Node{node("gpu01", with(migGPU(0), func(g *probe.GPU) {
				g.Procs = []probe.Proc{{PID: 7, GPUUUID: "GPU-00"}}
			}))},
			req:      excl(1),
			reason:   "gpu01: 0/2 GPUs free (GPU 0 MIG 0, GPU 0 MIG 1: in use by other processes)",
			rejected: []string{"gpu01: 0/2 GPUs free (GPU 0 MIG 0, GPU 0 MIG 1: in use by other processes)"},
		},
		{
			name:     "MIG: booked by MIG UUID",
			nodes:    []Node{booked(node("gpu01", migGPU(0)), map[string]Booking{"MIG-00-0": {Jobs: 1, Exclusive: true}, "MIG-00-1": {Jobs: 1, Mem: 30 * GiB}})},
			req:      shared(1, 10*GiB), // MIG 1: 36 GiB usable, 30 booked
			reason:   "gpu01: 0/2 GPUs with ≥ 10.0 GiB free (GPU 0 MIG 0: held by an exclusive gssh job; GPU 0 MIG 1: booked by other gssh jobs)",
			rejected: []string{"gpu01: 0/2 GPUs with ≥ 10.0 GiB free (GPU 0 MIG 0: held by an exclusive gssh job; GPU 0 MIG 1: booked by other gssh jobs)"},
		},
		{
			name:     "MIG: memory unknown from nvidia-smi -L",
			nodes:    []Node{node("gpu01", migNoMem)},
			req:      shared(1, GiB),
			reason:   "gpu01: 0/2 GPUs with ≥ 1.0 GiB free (GPU 0 MIG 0, GPU 0 MIG 1: memory unknown)",
			rejected: []string{"gpu01: 0/2 GPUs with ≥ 1.0 GiB free (GPU 0 MIG 0, GPU 0 MIG 1: memory unknown)"},
		},
		{
			name:  "MIG: exclusive without memory is fine",
			nodes: []Node{node("gpu01", migNoMem)},
			req:   excl(1),
			want:  job.Placement{Host: "gpu01", GPUs: []string{"MIG-00-0"}, Indexes: []int{0}},
		},
		{
			name:     "MIG: multi-GPU jobs take whole GPUs",
			nodes:    []Node{node("gpu01", migGPU(0), gpu(1, 80*GiB))},
			req:      excl(2),
			reason:   "gpu01: 1/3 GPUs free, 2 needed (GPU 0 MIG 0, GPU 0 MIG 1: MIG device (a job sees only one: ask for 1 GPU))",
			rejected: []string{"gpu01: 1/3 GPUs free, 2 needed (GPU 0 MIG 0, GPU 0 MIG 1: MIG device (a job sees only one: ask for 1 GPU))"},
		},
		{
			name: "MIG: enabled without devices, and a device without UUID",
			nodes: []Node{node("gpu01",
				with(gpu(0, 80*GiB), func(g *probe.GPU) { g.MIGMode = "Enabled" }),
				with(migGPU(1), func(g *probe.GPU) { g.MIG = g.MIG[:1]; g.MIG[0].UUID = "" }),
			)},
			req:      excl(1),
			reason:   "gpu01: 0/2 GPUs free (GPU 0: MIG enabled but no MIG device listed; GPU 1 MIG 1: MIG device without a UUID)",
			rejected: []string{"gpu01: 0/2 GPUs free (GPU 0: MIG enabled but no MIG device listed; GPU 1 MIG 1: MIG device without a UUID)"},
		},
		{
			name: "reasons group GPUs into ranges",
			nodes: []Node{booked(node("gpu01",
				gpu(0, 80*GiB), gpu(1, 80*GiB), gpu(2, 80*GiB), gpu(3, 80*GiB),
				with(gpu(4, 80*GiB), func(g *probe.GPU) { g.Health = probe.HealthLost }),
				with(gpu(5, 80*GiB), foreign), with(gpu(6, 80*GiB), foreign), with(gpu(7, 80*GiB), foreign),
			), map[string]Booking{"GPU-00": {Jobs: 1, Exclusive: true}, "GPU-01": {Jobs: 1, Exclusive: true}, "GPU-02": {Jobs: 1, Exclusive: true}, "GPU-03": {Jobs: 1, Exclusive: true}})},
			req:      excl(1),
			reason:   "gpu01: 0/8 GPUs free (GPU 0-3: in use by gssh jobs; GPU 4: lost; GPU 5-7: in use by other processes)",
			rejected: []string{"gpu01: 0/8 GPUs free (GPU 0-3: in use by gssh jobs; GPU 4: lost; GPU 5-7: in use by other processes)"},
		},
		{
			name:   "no hosts",
			req:    excl(1),
			reason: "no hosts",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dec := Place(tt.nodes, tt.req)
			if placed := tt.want.Host != ""; dec.OK != placed || !reflect.DeepEqual(dec.Placement, tt.want) && placed {
				t.Errorf("placement = %v %+v, want %+v", dec.OK, dec.Placement, tt.want)
			}
			if dec.Reason != tt.reason {
				t.Errorf("reason:\n got %q\nwant %q", dec.Reason, tt.reason)
			}
			var rej []string
			for _, r := range dec.Rejected {
				rej = append(rej, r.Node+": "+r.Reason)
			}
			if !slices.Equal(rej, tt.rejected) {
				t.Errorf("rejected:\n got %q\nwant %q", rej, tt.rejected)
			}
		})
	}
}

// Place leaves its input alone and answers the same every time.
func TestPlacePure(t *testing.T) {
	nodes := []Node{node("gpu02", gpus(4, 80*GiB)...), node("gpu01", gpu(3, 80*GiB), gpu(1, 80*GiB))}
	before := fmt.Sprintf("%#v", nodes)
	first := Place(nodes, excl(2))
	for range 3 {
		if again := Place(nodes, excl(2)); !reflect.DeepEqual(again, first) {
			t.Fatalf("Place changed its answer: %+v, then %+v", first, again)
		}
	}
	if after := fmt.Sprintf("%#v", nodes); after != before {
		t.Errorf("Place changed its input")
	}
	if first.Placement.Host != "gpu01" || !slices.Equal(first.Placement.Indexes, []int{1, 3}) {
		t.Errorf("placement %+v, want gpu01 GPUs 1, 3", first.Placement)
	}
}

// Booking what Place returns, pass after pass, fills GPUs the way the rules say.
func TestPlaceBook(t *testing.T) {
	g := gpu(0, 80*GiB)
	*g.MemFree = 50 * GiB // someone else holds 30 GiB
	nodes := []Node{node("gpu01", g, gpu(1, 80*GiB))}
	orig := nodes[0]

	var got []string
	for range 6 {
		dec := Place(nodes, shared(1, 20*GiB))
		if !dec.OK {
			got = append(got, "queued: "+dec.Reason)
			break
		}
		got = append(got, dec.Placement.GPUs[0])
		nodes[0].Book(dec.Placement, 20*GiB)
	}
	want := []string{
		"GPU-00", "GPU-00", // live free 50 → 30 → 10 GiB
		"GPU-01", "GPU-01", "GPU-01", // 72 GiB usable: 3 × 20
		"queued: gpu01: 0/2 GPUs with ≥ 20.0 GiB free (GPU 0: not enough memory free now; GPU 1: booked by other gssh jobs)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("placements:\n got %q\nwant %q", got, want)
	}
	if b := nodes[0].Booked["GPU-01"]; b != (Booking{Jobs: 3, Mem: 60 * GiB}) {
		t.Errorf("booked GPU-01 = %+v", b)
	}
	if orig.Booked != nil || *orig.Snapshot.GPUs[0].MemFree != 50*GiB {
		t.Errorf("Book changed the caller's snapshot or map")
	}

	// Exclusive bookings, and a GPU without UUID booked by index.
	noUUID := gpu(2, 80*GiB)
	noUUID.UUID = ""
	n := node("gpu01", noUUID)
	dec := Place([]Node{n}, excl(1))
	if !dec.OK || dec.Placement.GPUs[0] != "2" {
		t.Fatalf("placement %+v", dec)
	}
	n.Book(dec.Placement, 0)
	if b := n.Booked["idx:2"]; b != (Booking{Jobs: 1, Exclusive: true}) {
		t.Errorf("booked idx:2 = %+v", b)
	}
	if dec := Place([]Node{n}, shared(1, GiB)); dec.OK || !strings.Contains(dec.Reason, "held by an exclusive gssh job") {
		t.Errorf("after an exclusive booking: %+v", dec)
	}

	// A MIG device's live free memory goes down too.
	m := node("gpu01", migGPU(0))
	dec = Place([]Node{m}, shared(1, 30*GiB))
	m.Book(dec.Placement, 30*GiB)
	if dec.Placement.GPUs[0] != "MIG-00-0" || *m.Snapshot.GPUs[0].MIG[1].MemFree != 10*GiB || *migGPU(0).MIG[1].MemFree != 40*GiB {
		t.Errorf("MIG booking: %+v, free %d", dec.Placement, *m.Snapshot.GPUs[0].MIG[1].MemFree)
	}
	if dec := Place([]Node{m}, shared(1, 30*GiB)); dec.Placement.GPUs[0] != "MIG-00-1" {
		t.Errorf("second MIG placement %+v", dec)
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

func TestValidate(t *testing.T) {
	small := node("gpu01", gpus(2, 24*GiB)...)
	small.Labels = []string{"h100"}
	big := node("gpu02", gpus(8, 80*GiB)...)
	big.Labels = []string{"nvlink", "a100"}
	down := node("gpu03")
	down.Snapshot.State = probe.HostUnreachable
	drained := big
	drained.Drain = true
	mig := node("gpu04", migGPU(0), gpu(1, 80*GiB))
	noMem := node("gpu05", gpu(0, 80*GiB))
	noMem.Snapshot.GPUs[0].MemTotal, noMem.Snapshot.GPUs[0].MemoryState = nil, "insufficient permissions"
	four := node("gpu06", gpus(4, 24*GiB)...)
	none := node("gpu07")
	none.Snapshot.State = probe.HostNoDevices

	for _, tt := range []struct {
		name  string
		nodes []Node
		req   Request
		err   string // "" = valid
	}{
		{"fits", []Node{small, big}, shared(8, 60*GiB), ""},
		{"busy and drained hosts still count", []Node{drained}, excl(8), ""},
		{"a host not known now could fit", []Node{small, down}, excl(64), ""},
		{"no GPUs asked", []Node{small}, excl(0), "0 GPUs requested: ask for at least 1"},
		{"no hosts", nil, excl(1), "no hosts to run on: list some in the inventory"},
		{"unknown host", []Node{big, small}, Request{Host: "gpu09", GPUs: 1}, `unknown host "gpu09"; the hosts are gpu01, gpu02`},
		{"unknown label", []Node{big, small}, Request{Host: "auto", Labels: []string{"a100", "h200"}, GPUs: 1}, "no host has labels a100, h200; the labels in use are a100, h100, nvlink"},
		{"no labels anywhere", []Node{none}, Request{Labels: []string{"a100"}, GPUs: 1}, "no host has label a100 (no host has any label)"},
		{"the host lacks the label", []Node{big, small}, Request{Host: "gpu01", Labels: []string{"a100"}, GPUs: 1}, "host gpu01 lacks label a100 (it has label h100)"},
		{"too many GPUs", []Node{small, big}, excl(16), "16 GPUs requested, but the most on one host is 8 (gpu02)"},
		{"too many GPUs on the host", []Node{small, big}, Request{Host: "gpu01", GPUs: 4}, "4 GPUs requested, but gpu01 has 2"},
		{"no GPUs anywhere", []Node{none}, excl(1), "1 GPU requested, but no host has any"},
		{"no GPUs on the host", []Node{none}, Request{Host: "gpu07", GPUs: 1}, "1 GPU requested, but gpu07 has none"},
		{"MIG devices take 1-GPU jobs", []Node{mig}, excl(2), "2 GPUs requested, but the most on one host is 1 (gpu04); MIG devices take 1-GPU jobs only"},
		{"a MIG device takes a 1-GPU job", []Node{mig}, shared(1, 70*GiB), ""},
		{"too much memory", []Node{small, big}, shared(1, 100*GiB), "100.0 GiB per GPU requested, but the most a GPU can give is 72.0 GiB (gpu02: 80.0 GiB total, 10% reserved)"},
		{"too much memory on that many GPUs", []Node{big, four}, shared(4, 30*GiB), ""},
		{"too much memory on that many GPUs of one host", []Node{small, four}, shared(4, 30*GiB), "30.0 GiB per GPU requested, but the most 4 GPUs of one host can each give is 21.6 GiB (gpu06: 24.0 GiB total, 10% reserved)"},
		{"memory unknown", []Node{noMem}, shared(1, GiB), "1.0 GiB per GPU requested, but no GPU reports its memory (insufficient permissions); leave --mem out to take whole GPUs"},
		{"memory unknown, exclusive", []Node{noMem}, excl(1), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.nodes, tt.req)
			if got := fmt.Sprint(err); (err == nil) != (tt.err == "") || err != nil && got != tt.err {
				t.Errorf("Validate:\n got %v\nwant %s", err, tt.err)
			}
		})
	}
}

// BenchmarkPlace places 1000 jobs of mixed shapes on 20 hosts × 8 GPUs,
// booking each, as one scheduling pass would.
func BenchmarkPlace(b *testing.B) {
	base := make([]Node, 20)
	for i := range base {
		base[i] = node(fmt.Sprintf("gpu%02d", i), gpus(8, 80*GiB)...)
	}
	reqs := make([]Request, 1000)
	for i := range reqs {
		switch i % 4 {
		case 0:
			reqs[i] = excl(1 + i%3)
		case 1:
			reqs[i] = shared(1, uint64(4+i%12)*GiB)
		case 2:
			reqs[i] = shared(2, 10*GiB)
		default:
			reqs[i] = Request{Host: fmt.Sprintf("gpu%02d", i%20), GPUs: 1, MemPerGPU: 8 * GiB}
		}
	}
	index := map[string]int{}
	for i, n := range base {
		index[n.Name] = i
	}
	b.ReportAllocs()
	for b.Loop() {
		nodes := slices.Clone(base)
		placed := 0
		for _, r := range reqs {
			if dec := Place(nodes, r); dec.OK {
				nodes[index[dec.Placement.Host]].Book(dec.Placement, r.MemPerGPU)
				placed++
			}
		}
		if placed == 0 {
			b.Fatal("nothing placed")
		}
	}
}

func TestBookings(t *testing.T) {
	jobs := []job.Job{
		{State: job.Running, Spec: job.Spec{MemPerGPU: 10 * GiB}, Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-00"}, Indexes: []int{0}}},
		{State: job.Launching, Spec: job.Spec{MemPerGPU: 5 * GiB}, Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-00", "3"}, Indexes: []int{0, 3}}},
		{State: job.Running, Placement: job.Placement{Host: "gpu02", GPUs: []string{"MIG-00-1"}, Indexes: []int{0}}},
		{State: job.Succeeded, Placement: job.Placement{Host: "gpu02", GPUs: []string{"GPU-01"}, Indexes: []int{1}}},
		{State: job.Queued},
	}
	want := map[string]map[string]Booking{
		"gpu01": {"GPU-00": {Jobs: 2, Mem: 15 * GiB}, "idx:3": {Jobs: 1, Mem: 5 * GiB}},
		"gpu02": {"MIG-00-1": {Jobs: 1, Exclusive: true}},
	}
	if got := Bookings(jobs); !reflect.DeepEqual(got, want) {
		t.Errorf("Bookings:\n got %v\nwant %v", got, want)
	}
}
