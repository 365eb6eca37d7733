//go:build gpu

// The parity test against nvidia-smi on a real GPU. It never runs in normal
// CI: build it with `go test -c -tags gpu -o bin/nvmlsnap-gpu.test
// ./nvmlsnap/` and run it on the GPU machine (bench/gpu-test.sh).

package nvmlsnap

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gssh/gssh/gpuinfo"
)

// smi runs nvidia-smi with args and returns its non-empty lines.
func smi(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("nvidia-smi", args...).Output()
	if err != nil {
		t.Fatalf("nvidia-smi %s: %v", strings.Join(args, " "), err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

var (
	queryGPUs  = []string{"--query-gpu=uuid,memory.total", "--format=csv,noheader,nounits"}
	queryProcs = []string{"--query-compute-apps=pid", "--format=csv,noheader"}
)

// smiGPUs is uuid → memory.total in MiB.
func smiGPUs(t *testing.T) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range smi(t, queryGPUs...) {
		uuid, total, ok := strings.Cut(l, ",")
		n, err := strconv.ParseUint(strings.TrimSpace(total), 10, 64)
		if !ok || err != nil {
			t.Fatalf("nvidia-smi line %q", l)
		}
		m[strings.TrimSpace(uuid)] = n
	}
	return m
}

func smiPids(t *testing.T) []int {
	var pids []int
	for _, l := range smi(t, queryProcs...) {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil {
			t.Fatalf("nvidia-smi pid line %q", l)
		}
		pids = append(pids, n)
	}
	return sortedUnique(pids)
}

func docPids(doc gpuinfo.HelperDoc) []int {
	var pids []int
	for _, g := range doc.GPUs {
		for _, p := range g.Procs {
			pids = append(pids, p.PID)
		}
	}
	return sortedUnique(pids)
}

func sortedUnique(s []int) []int {
	sort.Ints(s)
	return slices.Compact(s)
}

func TestGPUParity(t *testing.T) {
	lib := nvml.New()
	procs := NewProcFS("/proc")
	doc := Collect(lib, procs, Self{})
	if doc.InitCode != 0 {
		t.Fatalf("NVML init: %s (%d)", doc.InitError, doc.InitCode)
	}
	t.Logf("driver %s, CUDA %s, NVML %s, %d GPUs, warnings %q", doc.Driver, doc.CUDA, doc.NVML, len(doc.GPUs), doc.Warnings)
	for _, g := range doc.GPUs {
		t.Logf("gpu %d %s %s %s health %s mig %q util %v temp %v power %v; %d processes (known %v)",
			g.Index, g.UUID, g.BusID, g.Name, g.Health, g.MIGMode, deref(g.UtilPct), deref(g.TempC), deref(g.PowerW), len(g.Procs), g.ProcsKnown)
		for _, p := range g.Procs {
			t.Logf("  pid %d %q user %q uid %v sid %v start %v job %q used %v", p.PID, p.Name, p.User, deref(p.UID), deref(p.SessionID), deref(p.StartTime), p.JobID, deref(p.UsedBytes))
		}
	}

	// Same GPUs, same totals.
	want := smiGPUs(t)
	got := map[string]uint64{}
	for _, g := range doc.GPUs {
		if g.Health != gpuinfo.HealthOK {
			t.Errorf("gpu %d: health %s (%s)", g.Index, g.Health, g.HealthWhy)
		}
		if g.MemTotal == nil {
			t.Errorf("gpu %d: no memory total (%s)", g.Index, g.MemoryState)
			continue
		}
		got[g.UUID] = *g.MemTotal
		if *g.MemTotal%mib != 0 {
			t.Logf("gpu %d: NVML total %d bytes is not a whole number of MiB", g.Index, *g.MemTotal)
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Errorf("UUIDs: helper %v, nvidia-smi %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for uuid, mibs := range want {
		if b, ok := got[uuid]; ok && b/mib != mibs {
			t.Errorf("%s: helper total %d bytes = %d MiB, nvidia-smi %d MiB (= %d bytes)", uuid, b, b/mib, mibs, mibs*mib)
		}
	}

	// Same processes (retry: a process may come or go between the calls).
	if doc.ProcsBogus {
		t.Errorf("NVML process records judged bogus on this driver: %q", doc.Warnings)
	}
	for attempt := 1; ; attempt++ {
		a := docPids(doc)
		b := smiPids(t)
		if slices.Equal(a, b) {
			t.Logf("processes: %v", a)
			break
		}
		if attempt == 3 {
			t.Errorf("pids: helper %v, nvidia-smi %v", a, b)
			break
		}
		time.Sleep(500 * time.Millisecond)
		doc = Collect(lib, procs, Self{})
	}
	for _, g := range doc.GPUs {
		if !g.ProcsKnown {
			t.Errorf("gpu %d: processes not known", g.Index)
		}
	}

	// Timing: medians of 20 calls each.
	const n = 20
	t.Logf("median of %d: Collect (init, read, shutdown) %v", n, median(n, func() { Collect(lib, procs, Self{}) }))
	t.Logf("median of %d: nvidia-smi %s %v", n, strings.Join(queryGPUs, " "), median(n, func() { smi(t, queryGPUs...) }))
	t.Logf("median of %d: nvidia-smi %s %v", n, strings.Join(queryProcs, " "), median(n, func() { smi(t, queryProcs...) }))
	helper := os.Getenv("GSSH_HELPER")
	if helper == "" {
		helper = "bin/gssh-helper"
	}
	if _, err := os.Stat(helper); err == nil {
		t.Logf("median of %d: %s (process start included) %v", n, helper, median(n, func() {
			if err := exec.Command(helper).Run(); err != nil {
				t.Errorf("%s: %v", helper, err)
			}
		}))
	}
}

func median(n int, f func()) time.Duration {
	d := make([]time.Duration, n)
	for i := range d {
		start := time.Now()
		f()
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return d[n/2]
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
