//go:build linux && cgo

package nvmlfake

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The tests drive the fake through go-nvml itself. go-nvml resolves NVML's
// functions through the test binary's lazily bound symbols, so the process
// keeps the first library it loads: every test shares one nvml.Interface on
// one path, runs sequentially (no t.Parallel: t.Setenv) and switches
// fixtures by setting GSSH_FAKE_SMI_DIR before Init.

const fleet = "../probe/testdata/fleet"

var (
	libOnce sync.Once
	lib     nvml.Interface
)

func library(t *testing.T) nvml.Interface {
	t.Helper()
	dir := Build(t)
	libOnce.Do(func() { lib = nvml.New(nvml.WithLibraryPath(filepath.Join(dir, LibName))) })
	return lib
}

// session points the fake at dir and runs Init; Shutdown follows the test.
func session(t *testing.T, dir string) (nvml.Interface, nvml.Return) {
	t.Helper()
	l := library(t)
	t.Setenv(EnvFixtureDir, dir)
	ret := l.Init()
	if ret == nvml.SUCCESS {
		t.Cleanup(func() {
			if r := l.Shutdown(); r != nvml.SUCCESS {
				t.Errorf("Shutdown: %v", r)
			}
		})
	}
	return l, ret
}

func fixtureDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(fleet, "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fleet fixtures under %s: %v", fleet, err)
	}
	return dirs
}

// shortDelay copies a fixture whose nvidia-smi hangs, with the delay cut to
// 200ms so the test stays fast; it returns the copy.
func shortDelay(t *testing.T, dir string) string {
	t.Helper()
	tmp := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "delay" {
			b = []byte("0.2\n")
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// TestFleet checks, for every fleet fixture, that NVML answers the facts
// the fixture's nvidia-smi output states.
func TestFleet(t *testing.T) {
	for _, dir := range fixtureDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			fx := loadFixture(dir)
			_, err := os.Stat(filepath.Join(dir, "delay"))
			delayed := err == nil
			if delayed {
				dir = shortDelay(t, dir)
			}
			start := time.Now()
			l, ret := session(t, dir)
			if ret != fx.init {
				t.Fatalf("Init = %d %v, want %d %v", ret, ret, fx.init, fx.init)
			}
			if delayed && time.Since(start) < 200*time.Millisecond {
				t.Errorf("Init took %v, want the fixture's delay of 200ms", time.Since(start))
			}
			if ret != nvml.SUCCESS {
				// go-nvml keeps the library loaded after a failed nvmlInit,
				// and NVML has nothing to shut down.
				if r := l.Shutdown(); r != nvml.ERROR_UNINITIALIZED {
					t.Errorf("Shutdown after a failed Init = %v, want ERROR_UNINITIALIZED", r)
				}
				return
			}
			checkSystem(t, l, fx)
			n, ret := l.DeviceGetCount()
			if ret != nvml.SUCCESS || n != len(fx.gpus) {
				t.Fatalf("DeviceGetCount = %d %v, want %d", n, ret, len(fx.gpus))
			}
			for i := range fx.gpus {
				checkGPU(t, l, fx, i)
			}
			if _, ret := l.DeviceGetHandleByIndex(n); ret != nvml.ERROR_INVALID_ARGUMENT {
				t.Errorf("DeviceGetHandleByIndex(%d) = %v, want ERROR_INVALID_ARGUMENT", n, ret)
			}
		})
	}
}

func checkSystem(t *testing.T, l nvml.Interface, fx fixture) {
	t.Helper()
	if v, ret := l.SystemGetDriverVersion(); fx.driver == "" && ret != nvml.ERROR_NOT_SUPPORTED || fx.driver != "" && (ret != nvml.SUCCESS || v != fx.driver) {
		t.Errorf("SystemGetDriverVersion = %q %v, want %q", v, ret, fx.driver)
	}
	if v, ret := l.SystemGetNVMLVersion(); fx.nvmlVer == "" && ret != nvml.ERROR_NOT_SUPPORTED || fx.nvmlVer != "" && (ret != nvml.SUCCESS || v != fx.nvmlVer) {
		t.Errorf("SystemGetNVMLVersion = %q %v, want %q", v, ret, fx.nvmlVer)
	}
	if v, ret := l.SystemGetCudaDriverVersion_v2(); ret != nvml.SUCCESS || v != fx.cuda {
		t.Errorf("SystemGetCudaDriverVersion_v2 = %d %v, want %d", v, ret, fx.cuda)
	}
	if v, ret := l.SystemGetCudaDriverVersion(); ret != nvml.SUCCESS || v != fx.cuda {
		t.Errorf("SystemGetCudaDriverVersion = %d %v, want %d", v, ret, fx.cuda)
	}
}

func cstr(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// wantString checks a string query against a field.
func wantString(t *testing.T, what string, got string, ret nvml.Return, field string) {
	t.Helper()
	if want := sentinel(field); want != nvml.SUCCESS {
		if ret != want {
			t.Errorf("%s = %q %v, want %v (fixture: %q)", what, got, ret, want, field)
		}
	} else if ret != nvml.SUCCESS || got != field {
		t.Errorf("%s = %q %v, want %q", what, got, ret, field)
	}
}

// wantNumber checks a number query against field k of g.
func wantNumber(t *testing.T, what string, got uint64, ret nvml.Return, g fxGPU, k int, scale uint64) {
	t.Helper()
	v, want := g.number(k)
	if ret != want || want == nvml.SUCCESS && got != v*scale {
		t.Errorf("%s = %d %v, want %d %v (fixture: %q)", what, got, ret, v*scale, want, g.f[k])
	}
}

func checkGPU(t *testing.T, l nvml.Interface, fx fixture, i int) {
	t.Helper()
	g := fx.gpus[i]
	h, ret := l.DeviceGetHandleByIndex(i)
	if !g.row {
		if ret != nvml.ERROR_GPU_IS_LOST {
			t.Errorf("GPU %d (lost): DeviceGetHandleByIndex = %v, want ERROR_GPU_IS_LOST", i, ret)
		}
		if g.lostBus != "" {
			if _, ret := l.DeviceGetHandleByPciBusId(g.lostBus); ret != nvml.ERROR_GPU_IS_LOST {
				t.Errorf("GPU %d (lost): DeviceGetHandleByPciBusId(%q) = %v, want ERROR_GPU_IS_LOST", i, g.lostBus, ret)
			}
		}
		return
	}
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU %d: DeviceGetHandleByIndex = %v", i, ret)
	}
	p := func(what string) string { return "GPU " + strconv.Itoa(i) + ": " + what }

	// Identity.
	uuid, ret := h.GetUUID()
	wantString(t, p("GetUUID"), uuid, ret, g.f[fUUID])
	name, ret := h.GetName()
	wantString(t, p("GetName"), name, ret, g.f[fName])
	pci, ret := h.GetPciInfo()
	wantString(t, p("GetPciInfo.BusId"), cstr(pci.BusId[:]), ret, g.f[fBus])
	if idx, ret := h.GetIndex(); ret != nvml.SUCCESS || idx != i {
		t.Errorf("%s = %d %v", p("GetIndex"), idx, ret)
	}
	if mig, ret := h.IsMigDeviceHandle(); ret != nvml.SUCCESS || mig {
		t.Errorf("%s = %v %v", p("IsMigDeviceHandle"), mig, ret)
	}
	if o := fx.owner(uuid); o >= 0 {
		byUUID, ret := l.DeviceGetHandleByUUID(uuid)
		if idx, _ := byUUID.GetIndex(); ret != nvml.SUCCESS || idx != o {
			t.Errorf("DeviceGetHandleByUUID(%q) = GPU %d %v, want GPU %d", uuid, idx, ret, o)
		}
	}
	if sentinel(g.f[fBus]) == nvml.SUCCESS {
		legacy := cstr(pci.BusIdLegacy[:])
		for _, bus := range []string{g.f[fBus], legacy} {
			byBus, ret := l.DeviceGetHandleByPciBusId(bus)
			if idx, _ := byBus.GetIndex(); ret != nvml.SUCCESS || idx != i {
				t.Errorf("DeviceGetHandleByPciBusId(%q) = GPU %d %v, want GPU %d", bus, idx, ret, i)
			}
		}
	}

	// Values.
	m, ret := h.GetMemoryInfo_v2()
	wantNumber(t, p("GetMemoryInfo_v2.Total"), m.Total, ret, g, fMemTotal, 1<<20)
	wantNumber(t, p("GetMemoryInfo_v2.Used"), m.Used, ret, g, fMemUsed, 1<<20)
	wantNumber(t, p("GetMemoryInfo_v2.Free"), m.Free, ret, g, fMemFree, 1<<20)
	if ret == nvml.SUCCESS && m.Total != m.Reserved+m.Used+m.Free {
		t.Errorf("%s: total %d != reserved %d + used %d + free %d", p("GetMemoryInfo_v2"), m.Total, m.Reserved, m.Used, m.Free)
	}
	m1, ret := h.GetMemoryInfo()
	wantNumber(t, p("GetMemoryInfo.Total"), m1.Total, ret, g, fMemTotal, 1<<20)
	wantNumber(t, p("GetMemoryInfo.Free"), m1.Free, ret, g, fMemFree, 1<<20)
	if ret == nvml.SUCCESS && m1.Used != m1.Total-m1.Free {
		t.Errorf("%s: v1 used %d, want total-free %d", p("GetMemoryInfo"), m1.Used, m1.Total-m1.Free)
	}
	u, ret := h.GetUtilizationRates()
	wantNumber(t, p("GetUtilizationRates.Gpu"), uint64(u.Gpu), ret, g, fUtil, 1)
	temp, ret := h.GetTemperature(nvml.TEMPERATURE_GPU)
	wantNumber(t, p("GetTemperature"), uint64(temp), ret, g, fTemp, 1)
	wantPower := nvml.ERROR_NOT_SUPPORTED
	if g.reset() {
		wantPower = nvml.ERROR_RESET_REQUIRED
	}
	if _, ret := h.GetPowerUsage(); ret != wantPower {
		t.Errorf("%s = %v, want %v", p("GetPowerUsage"), ret, wantPower)
	}

	checkMIG(t, h, g, i, name)
	checkProcs(t, l, h, fx, i)
}

func checkMIG(t *testing.T, h nvml.Device, g fxGPU, i int, parentName string) {
	t.Helper()
	p := func(what string) string { return "GPU " + strconv.Itoa(i) + ": " + what }
	mode, want := g.migMode()
	cur, pending, ret := h.GetMigMode()
	if ret != want || want == nvml.SUCCESS && (cur != mode || pending != mode) {
		t.Errorf("%s = %d/%d %v, want %d %v (fixture: %q)", p("GetMigMode"), cur, pending, ret, mode, want, g.f[fMIG])
	}
	slots, ret := h.GetMaxMigDeviceCount()
	if g.reset() {
		if ret != nvml.ERROR_RESET_REQUIRED {
			t.Errorf("%s = %v, want ERROR_RESET_REQUIRED", p("GetMaxMigDeviceCount"), ret)
		}
		return
	}
	if ret != nvml.SUCCESS || (mode == 1) != (slots > 0) || slots < len(g.mig) {
		t.Errorf("%s = %d %v (MIG mode %d, %d MIG devices in -L)", p("GetMaxMigDeviceCount"), slots, ret, mode, len(g.mig))
	}
	found := 0
	for k := range slots {
		mh, ret := h.GetMigDeviceHandleByIndex(k)
		m, ok := g.mig[k]
		if !ok {
			if ret != nvml.ERROR_NOT_FOUND {
				t.Errorf("%s = %v, want ERROR_NOT_FOUND", p("GetMigDeviceHandleByIndex("+strconv.Itoa(k)+")"), ret)
			}
			continue
		}
		found++
		q := func(what string) string { return p("MIG " + strconv.Itoa(k) + " " + what) }
		if ret != nvml.SUCCESS {
			t.Errorf("%s = %v", q("handle"), ret)
			continue
		}
		if is, ret := mh.IsMigDeviceHandle(); ret != nvml.SUCCESS || !is {
			t.Errorf("%s = %v %v", q("IsMigDeviceHandle"), is, ret)
		}
		if u, ret := mh.GetUUID(); ret != nvml.SUCCESS || u != m.uuid {
			t.Errorf("%s = %q %v, want %q", q("GetUUID"), u, ret, m.uuid)
		}
		if n, ret := mh.GetName(); ret != nvml.SUCCESS || n != parentName+" MIG "+m.profile {
			t.Errorf("%s = %q %v, want %q", q("GetName"), n, ret, parentName+" MIG "+m.profile)
		}
		parent, ret := mh.GetDeviceHandleFromMigDeviceHandle()
		if idx, _ := parent.GetIndex(); ret != nvml.SUCCESS || idx != i {
			t.Errorf("%s = GPU %d %v", q("GetDeviceHandleFromMigDeviceHandle"), idx, ret)
		}
		if _, ret := mh.GetMemoryInfo_v2(); ret != g.migShared(fMemTotal, fMemFree) {
			t.Errorf("%s = %v, want %v", q("GetMemoryInfo_v2"), ret, g.migShared(fMemTotal, fMemFree))
		}
		if _, ret := mh.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
			t.Errorf("%s succeeded: the fixture lists processes by parent GPU only", q("GetComputeRunningProcesses"))
		}
	}
	if found != len(g.mig) {
		t.Errorf("GPU %d: %d MIG devices through NVML, -L lists %d", i, found, len(g.mig))
	}
}

func checkProcs(t *testing.T, l nvml.Interface, h nvml.Device, fx fixture, i int) {
	t.Helper()
	want, wantRet := fx.procsOf(i)
	got, ret := h.GetComputeRunningProcesses()
	if ret != wantRet || len(got) != len(want) {
		t.Errorf("GPU %d: GetComputeRunningProcesses = %+v %v, want %d processes %v", i, got, ret, len(want), wantRet)
		return
	}
	for k, w := range want {
		pi := got[k]
		mem := uint64(0xFFFFFFFFFFFFFFFF) // NVML_VALUE_NOT_AVAILABLE for [N/A]
		if v, err := strconv.ParseUint(w.mem, 10, 64); err == nil {
			mem = v << 20
		}
		if strconv.Itoa(int(pi.Pid)) != w.pid || pi.UsedGpuMemory != mem || pi.GpuInstanceId != 0xFFFFFFFF || pi.ComputeInstanceId != 0xFFFFFFFF {
			t.Errorf("GPU %d: process %d = %+v, want pid %s, %d bytes (%s)", i, k, pi, w.pid, mem, w.uuid)
		}
		name, ret := l.SystemGetProcessName(int(pi.Pid))
		wantString(t, "SystemGetProcessName("+w.pid+")", name, ret, w.name)
	}
	if len(got) == 0 && ret == nvml.SUCCESS {
		if g, ret := h.GetGraphicsRunningProcesses(); ret != nvml.SUCCESS || len(g) != 0 {
			t.Errorf("GPU %d: GetGraphicsRunningProcesses = %v %v", i, g, ret)
		}
	}
}

// TestFleetCoverage pins what the generic checks must have seen, so a
// parsing slip on either side cannot make them vacuous.
func TestFleetCoverage(t *testing.T) {
	want := map[string]struct {
		init  nvml.Return
		count int
		check func(t *testing.T, l nvml.Interface)
	}{
		"driver-not-loaded": {init: nvml.ERROR_DRIVER_NOT_LOADED},
		"driver-mismatch":   {init: nvml.ERROR_LIB_RM_VERSION_MISMATCH},
		"nvml-missing":      {init: nvml.ERROR_LIBRARY_NOT_FOUND},
		"bin-missing":       {init: nvml.ERROR_LIBRARY_NOT_FOUND},
		"garbage":           {init: nvml.ERROR_UNKNOWN},
		"no-devices":        {count: 0},
		"a100x4": {count: 4, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(1)
			procs, ret := h.GetComputeRunningProcesses() // two: go-nvml's first buffer holds one
			if ret != nvml.SUCCESS || len(procs) != 2 || procs[0].Pid != 30112 || procs[0].UsedGpuMemory != 20480<<20 {
				t.Errorf("GPU 1 processes %+v %v", procs, ret)
			}
			if n, _ := l.SystemGetProcessName(30112); n != "/home/bob/runs/lr=3e-4,bs=64/bin/python3" {
				t.Errorf("process name %q", n)
			}
			if v, _ := l.SystemGetCudaDriverVersion_v2(); v != 12020 {
				t.Errorf("CUDA %d", v)
			}
		}},
		"lost-gpu": {count: 4, check: func(t *testing.T, l nvml.Interface) {
			if _, ret := l.DeviceGetHandleByIndex(1); ret != nvml.ERROR_GPU_IS_LOST {
				t.Errorf("GPU 1: %v", ret)
			}
			if _, ret := l.DeviceGetHandleByPciBusId("00000000:34:00.0"); ret != nvml.ERROR_GPU_IS_LOST {
				t.Errorf("GPU 1 by bus: %v", ret)
			}
		}},
		"h100-mig": {count: 1, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			mig, _ := h.GetMigDeviceHandleByIndex(2)
			if u, _ := mig.GetUUID(); u != "MIG-00000002-0000-0000-0000-000000000002" {
				t.Errorf("MIG 2 UUID %q", u)
			}
			if n, _ := mig.GetName(); n != "NVIDIA H100 80GB HBM3 MIG 1g.10gb" {
				t.Errorf("MIG 2 name %q", n)
			}
			if _, ret := h.GetUtilizationRates(); ret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("utilization on MIG: %v", ret)
			}
			byUUID, ret := l.DeviceGetHandleByUUID("MIG-00000001-0000-0000-0000-000000000001")
			if is, _ := byUUID.IsMigDeviceHandle(); ret != nvml.SUCCESS || !is {
				t.Errorf("MIG by UUID: %v", ret)
			}
		}},
		"perm-denied": {count: 1, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			if _, ret := h.GetMemoryInfo_v2(); ret != nvml.ERROR_NO_PERMISSION {
				t.Errorf("memory %v", ret)
			}
			if _, ret := h.GetComputeRunningProcesses(); ret != nvml.ERROR_NO_PERMISSION {
				t.Errorf("processes %v", ret)
			}
			mig, _ := h.GetMigDeviceHandleByIndex(0)
			if _, ret := mig.GetMemoryInfo_v2(); ret != nvml.ERROR_NO_PERMISSION {
				t.Errorf("MIG memory %v", ret)
			}
		}},
		"requires-reset": {count: 2, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			if _, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret != nvml.ERROR_RESET_REQUIRED {
				t.Errorf("GPU 0 temperature %v", ret)
			}
			if u, ret := h.GetUUID(); ret != nvml.SUCCESS || u != "GPU-00000000-0000-0000-0000-000000000000" {
				t.Errorf("GPU 0 UUID %q %v", u, ret)
			}
			h, _ = l.DeviceGetHandleByIndex(1)
			if v, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret != nvml.SUCCESS || v != 58 {
				t.Errorf("GPU 1 temperature %d %v", v, ret)
			}
		}},
		"err-gpu": {count: 2, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			if _, ret := h.GetName(); ret != nvml.ERROR_UNKNOWN {
				t.Errorf("GPU 0 name %v", ret)
			}
			if m, ret := h.GetMemoryInfo_v2(); ret != nvml.SUCCESS || m.Total != 46068<<20 || m.Used != 0 {
				t.Errorf("GPU 0 memory %+v %v", m, ret)
			}
		}},
		"gb10-unified": {count: 1, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			if _, ret := h.GetMemoryInfo_v2(); ret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("memory %v", ret)
			}
			if p, ret := h.GetPciInfo(); ret != nvml.SUCCESS || p.Domain != 0xF || cstr(p.BusId[:]) != "0000000F:01:00.0" {
				t.Errorf("PCI %+v %v", p, ret)
			}
		}},
		"empty-uuid": {count: 5, check: func(t *testing.T, l nvml.Interface) {
			h, _ := l.DeviceGetHandleByIndex(0)
			procs, ret := h.GetComputeRunningProcesses()
			if ret != nvml.SUCCESS || len(procs) != 1 || procs[0].Pid != 7001 {
				t.Errorf("GPU 0 (first GPU-) processes %+v %v", procs, ret)
			}
		}},
		"warning-mixed": {count: 2},
		"hang":          {count: 1},
	}
	seen := map[string]bool{}
	for _, dir := range fixtureDirs(t) {
		name := filepath.Base(dir)
		w, ok := want[name]
		if !ok {
			continue // TestFleet still checks it
		}
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "delay")); err == nil {
				dir = shortDelay(t, dir)
			}
			l, ret := session(t, dir)
			if ret != w.init {
				t.Fatalf("Init = %v, want %v", ret, w.init)
			}
			if ret != nvml.SUCCESS {
				l.Shutdown()
				return
			}
			if n, _ := l.DeviceGetCount(); n != w.count {
				t.Errorf("DeviceGetCount = %d, want %d", n, w.count)
			}
			if w.check != nil {
				w.check(t, l)
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("fixture %s is gone", name)
		}
	}
}

// TestVersionedSymbols checks that go-nvml picks the newest versions: it
// looks them up with dlsym at load and falls back to v1 names otherwise.
func TestVersionedSymbols(t *testing.T) {
	l, ret := session(t, filepath.Join(fleet, "a100x4"))
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for _, sym := range []string{
		"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
		"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetPciInfo_v3",
		"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3",
		"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMemoryInfo_v2",
		"nvmlSystemGetCudaDriverVersion_v2", "nvmlErrorString",
	} {
		if err := l.Extensions().LookupSymbol(sym); err != nil {
			t.Errorf("%s: %v", sym, err)
		}
	}
	if s := nvml.ERROR_GPU_IS_LOST.Error(); s != "GPU is lost" {
		t.Errorf("ERROR_GPU_IS_LOST.Error() = %q: not the library's nvmlErrorString", s)
	}
}

// TestReinit checks that Shutdown and Init on another fixture serve the new
// fixture, and that Init/Shutdown nest.
func TestReinit(t *testing.T) {
	for _, c := range []struct {
		fixture string
		count   int
	}{{"a100x4", 4}, {"requires-reset", 2}, {"a100x4", 4}} {
		l := library(t)
		t.Setenv(EnvFixtureDir, filepath.Join(fleet, c.fixture))
		if ret := l.Init(); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if n, _ := l.DeviceGetCount(); n != c.count {
			t.Errorf("%s: count %d, want %d", c.fixture, n, c.count)
		}
		if ret := l.Init(); ret != nvml.SUCCESS { // nested: no reload
			t.Fatal(ret)
		}
		if ret := l.Shutdown(); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if ret := l.Shutdown(); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		if _, ret := l.DeviceGetCount(); ret != nvml.ERROR_UNINITIALIZED {
			t.Errorf("after Shutdown: %v, want ERROR_UNINITIALIZED", ret)
		}
	}
}

// TestNoLibrary: a path without the library is go-nvml's own
// ERROR_LIBRARY_NOT_FOUND (what a host without a driver answers).
func TestNoLibrary(t *testing.T) {
	missing := nvml.New(nvml.WithLibraryPath(filepath.Join(t.TempDir(), LibName)))
	if ret := missing.Init(); ret != nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Errorf("Init = %v, want ERROR_LIBRARY_NOT_FOUND", ret)
	}
}

// TestLDLibraryPath runs a child that loads NVML the way gssh-helper does,
// by soname, with Build's directory on LD_LIBRARY_PATH (the dynamic loader
// reads it only at process start, hence the child).
func TestLDLibraryPath(t *testing.T) {
	if os.Getenv("GSSH_NVMLFAKE_CHILD") == "1" {
		if ret := nvml.Init(); ret != nvml.SUCCESS {
			t.Fatalf("Init: %v", ret)
		}
		defer nvml.Shutdown()
		n, ret := nvml.DeviceGetCount()
		h, _ := nvml.DeviceGetHandleByIndex(0)
		u, _ := h.GetUUID()
		t.Logf("CHILD count=%d ret=%d uuid=%s", n, ret, u)
		return
	}
	dir := Build(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLDLibraryPath$", "-test.v")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "LD_LIBRARY_PATH=") || strings.HasPrefix(e, EnvFixtureDir+"=")
	}), "GSSH_NVMLFAKE_CHILD=1", "LD_LIBRARY_PATH="+dir, EnvFixtureDir+"="+filepath.Join(fleet, "a100x4"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CHILD count=4 ret=0 uuid=GPU-00000000-0000-0000-0000-000000000000") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestCompilesCleanly: the C file builds without warnings as C99.
func TestCompilesCleanly(t *testing.T) {
	Build(t) // skips without gcc
	if runtime.GOOS != "linux" {
		t.Skip("linux only (CI runs on linux)")
	}
	out, err := exec.Command("gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror",
		"-shared", "-fPIC", "-O2", "-o", filepath.Join(t.TempDir(), LibName), SourcePath(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
