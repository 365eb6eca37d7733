package fakelab

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
)

// GPUSpec is one simulated GPU.
type GPUSpec struct {
	Name     string // as nvidia-smi's name field: "NVIDIA A100-SXM4-80GB"
	MemTotal uint64 // bytes (a whole number of MiB)
	// MIG lists the GPU's MIG devices by profile ("3g.40gb") when MIG
	// mode is on; each has the memory its profile names (see migMem).
	MIG []string
	// Lost: the GPU fell off the bus (Xid 79): nvidia-smi prints
	// "Unable to determine the device handle" for it and exits 15, NVML
	// answers GPU_IS_LOST.
	Lost bool
}

// HostSpec is one simulated host.
type HostSpec struct {
	Name   string
	GPUs   []GPUSpec
	Driver string // driver_version; default DefaultDriver
	CUDA   string // the CUDA version the driver supports; default DefaultCUDA
	// Foreign are processes of no gssh job that hold GPU memory (someone
	// ran them by hand): the lab starts them as real, sleeping processes.
	Foreign []Foreign
	// Seed makes the GPUs' UUIDs the lab's own (Start sets it): two labs
	// on one machine never share a GPU UUID, so neither sees the other's
	// jobs as another queue's on its GPUs.
	Seed string `json:",omitempty"`
}

// Foreign is a process run by hand on a simulated GPU.
type Foreign struct {
	GPU  int    // the GPU's index
	Name string // its argv[0], as nvidia-smi shows process_name
	Mem  uint64 // GPU memory it holds, bytes
}

// The driver a simulated host reports unless its spec says otherwise.
const (
	DefaultDriver = "550.127.05"
	DefaultCUDA   = "12.4"
)

// The GPU models of the default lab, with their memory as nvidia-smi
// reports memory.total for them.
var (
	A100 = GPUSpec{Name: "NVIDIA A100-SXM4-80GB", MemTotal: 81920 << 20}
	H100 = GPUSpec{Name: "NVIDIA H100 80GB HBM3", MemTotal: 81559 << 20}
	// RTX4090 is a consumer card: 24 GiB.
	RTX4090 = GPUSpec{Name: "NVIDIA GeForce RTX 4090", MemTotal: 24564 << 20}
)

// DefaultLab is the lab gssh demo starts: two hosts of 8 A100s (one with
// a lost GPU), one of 4 RTX 4090s, and one H100 host whose first GPU is
// split into MIG devices, with a few processes run by hand.
func DefaultLab() []HostSpec {
	lost := repeat(A100, 8)
	lost[5].Lost = true
	mig := H100
	mig.MIG = []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}
	return []HostSpec{
		{Name: "a100-1", GPUs: repeat(A100, 8), Foreign: []Foreign{{GPU: 3, Name: "jupyter-lab", Mem: 6 << 30}}},
		{Name: "a100-2", GPUs: lost},
		{Name: "rtx-1", GPUs: repeat(RTX4090, 4), Driver: "535.183.01", CUDA: "12.2", Foreign: []Foreign{{GPU: 0, Name: "python3", Mem: 20 << 30}}},
		{Name: "h100-1", GPUs: []GPUSpec{mig, H100}},
	}
}

// SizedLab is n hosts of m GPUs each (gssh demo --hosts N --gpus-per-host
// M): the models of DefaultLab in turn (A100, A100, RTX 4090, H100 with
// its first GPU in MIG mode), and the second host's last GPU lost.
func SizedLab(n, m int) []HostSpec {
	var hosts []HostSpec
	for i := range n {
		var h HostSpec
		switch i % 4 {
		case 0, 1:
			h = HostSpec{Name: fmt.Sprintf("a100-%d", i+1), GPUs: repeat(A100, m)}
		case 2:
			h = HostSpec{Name: fmt.Sprintf("rtx-%d", i+1), GPUs: repeat(RTX4090, m), Driver: "535.183.01", CUDA: "12.2"}
		case 3:
			h = HostSpec{Name: fmt.Sprintf("h100-%d", i+1), GPUs: repeat(H100, m)}
			h.GPUs[0].MIG = []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}
		}
		if i == 1 && m > 1 {
			h.GPUs[m-1].Lost = true
		}
		hosts = append(hosts, h)
	}
	return hosts
}

func repeat(g GPUSpec, n int) []GPUSpec {
	out := make([]GPUSpec, n)
	for i := range out {
		out[i] = g
	}
	return out
}

// migMem is the memory of a MIG device of the given profile: the GB the
// profile names, less the 2.4 % the driver keeps ("1g.10gb": 10000 MiB,
// close to the 9984 MiB an A100's reports). 0 for a name without one.
func migMem(profile string) uint64 {
	_, rest, ok := strings.Cut(profile, ".")
	gb, err := strconv.Atoi(strings.TrimSuffix(rest, "gb"))
	if !ok || err != nil || gb <= 0 {
		return 0
	}
	return uint64(gb) * 1000 << 20
}

// uuid is a stable UUID for a GPU (prefix "GPU") or MIG device ("MIG")
// of host, from the path naming it.
func uuid(prefix, host string, path ...int) string {
	key := host // the seed, then the host's name: see HostSpec.Seed
	for _, p := range path {
		key += "/" + strconv.Itoa(p)
	}
	h := sha256.Sum256([]byte(prefix + ":" + key))
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// busID is GPU i's PCI bus id.
func busID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", 0x07+0x10*i) }

// unit is a GPU or MIG device a process can be placed on.
type unit struct {
	gpu, mig int // mig -1: the whole GPU
	uuid     string
	total    uint64
}

// units lists the simulated host's GPUs and MIG devices, by UUID.
func (h HostSpec) units() map[string]unit {
	out := map[string]unit{}
	for i, g := range h.GPUs {
		if g.Lost {
			continue
		}
		u := uuid("GPU", h.Seed+"/"+h.Name, i)
		out[u] = unit{gpu: i, mig: -1, uuid: u, total: g.MemTotal}
		for k, p := range g.MIG {
			mu := uuid("MIG", h.Seed+"/"+h.Name, i, k)
			out[mu] = unit{gpu: i, mig: k, uuid: mu, total: migMem(p)}
		}
	}
	return out
}

// Use is one process's use of a unit, as the model sees it.
type Use struct {
	PID  int
	Unit string // GPU or MIG UUID
	Mem  uint64 // bytes
	Busy bool   // a job computing (utilisation), not an idle holder
}

// Doc is the host's gssh.helper/v1 document at this moment, with uses
// (from Uses) as its processes, looked up in procs. A lost GPU is listed
// at its index with health lost, as NVML reports GPU_IS_LOST.
func (h HostSpec) Doc(uses []Use, procs ProcLookup, tick int64) gpuinfo.HelperDoc {
	doc := gpuinfo.HelperDoc{
		Schema:   gpuinfo.HelperSchema,
		Driver:   cmp.Or(h.Driver, DefaultDriver),
		CUDA:     cmp.Or(h.CUDA, DefaultCUDA),
		NVML:     "12." + cmp.Or(h.Driver, DefaultDriver),
		Warnings: []string{},
		GPUs:     []gpuinfo.GPU{},
	}
	units := h.units()
	for i, g := range h.GPUs {
		gu := uuid("GPU", h.Seed+"/"+h.Name, i)
		out := gpuinfo.GPU{Index: i, UUID: gu, BusID: busID(i), Name: g.Name, Procs: []gpuinfo.Proc{}, ProcsKnown: true}
		if g.Lost {
			out.UUID, out.Name = "", ""
			out.Health, out.HealthWhy, out.NVMLCode = gpuinfo.HealthLost, "GPU is lost (NVML: GPU_IS_LOST)", 15
			out.Procs, out.ProcsKnown = nil, false
			doc.GPUs = append(doc.GPUs, out)
			continue
		}
		out.Health = gpuinfo.HealthOK
		used, busy := uint64(4<<20), 0 // the driver's own few MiB
		migUsed := make([]uint64, len(g.MIG))
		for _, u := range uses {
			un, ok := units[u.Unit]
			if !ok || un.gpu != i {
				continue
			}
			used += u.Mem
			if un.mig >= 0 {
				migUsed[un.mig] += u.Mem
			}
			if u.Busy {
				busy++
			}
			p := gpuinfo.Proc{PID: u.PID, GPUUUID: u.Unit, UsedBytes: ptr(u.Mem)}
			if d, ok := procs.Lookup(u.PID); ok {
				p.Name, p.User, p.UID, p.SessionID, p.StartTime = d.Name, d.User, d.UID, d.SessionID, d.StartTicks
				p.JobID, p.ClusterID, p.Attempt, p.EnvRead = d.JobID, d.ClusterID, d.Attempt, d.EnvRead
			}
			out.Procs = append(out.Procs, p)
		}
		used = min(used, g.MemTotal)
		out.MemTotal, out.MemUsed, out.MemFree = ptr(g.MemTotal), ptr(used), ptr(g.MemTotal-used)
		temp := 31 + i%3
		if len(g.MIG) > 0 {
			out.MIGMode = "Enabled"
			for k, p := range g.MIG {
				t := migMem(p)
				mu := min(migUsed[k], t)
				out.MIG = append(out.MIG, gpuinfo.MIG{Index: k, UUID: uuid("MIG", h.Seed+"/"+h.Name, i, k), Profile: p,
					MemTotal: ptr(t), MemUsed: ptr(mu), MemFree: ptr(t - mu)})
			}
		} else {
			out.MIGMode = "Disabled"
			util := 0
			if busy > 0 {
				// A busy GPU wanders between 72 % and 99 %, a new value
				// every tick.
				util = 72 + int((tick*7+int64(i)*13)%28)
				temp += 30 + util/5
			}
			out.UtilPct = ptr(util)
		}
		out.TempC = ptr(temp)
		doc.GPUs = append(doc.GPUs, out)
	}
	return doc
}

func ptr[T any](v T) *T { return &v }

// Snapshot is the host as a probe finds it with nothing running on it
// (no process of a job, none run by hand): what gssh sim --lab demo
// schedules on.
func (h HostSpec) Snapshot() gpuinfo.Snapshot {
	doc := h.Doc(nil, nil, 0)
	s := gpuinfo.Snapshot{Host: h.Name, State: gpuinfo.HostOK, Source: "simulated", Driver: doc.Driver, CUDA: doc.CUDA,
		Warnings: []string{}, GPUs: doc.GPUs}
	for _, g := range doc.GPUs {
		if g.Health != gpuinfo.HealthOK {
			s.State, s.Error = gpuinfo.HostDegraded, fmt.Sprintf("GPU %d %s: %s", g.Index, g.Health, g.HealthWhy)
		}
	}
	return s
}
