package nvmlsnap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gssh/gssh/gpuinfo"
)

func TestWholeServerMocks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv      *server.Server
		v2       bool
		gpuName  string
		totalMiB uint64
	}{
		{"dgxa100", dgxa100.New(), false, "Mock NVIDIA A100-SXM4-40GB", 40960},
		{"dgxh100", dgxh100.New(), true, "NVIDIA H100 80GB HBM3", 81920},
		{"dgxh200", dgxh200.New(), true, "NVIDIA H200 141GB HBM3e", 144384},
	} {
		t.Run(tc.name, func(t *testing.T) {
			completeServer(tc.srv, tc.v2)
			doc := Collect(tc.srv, nil, Self{SHA256: "abc"})
			if doc.Schema != gpuinfo.HelperSchema || doc.SHA256 != "abc" || doc.InitCode != 0 || doc.InitError != "" {
				t.Fatalf("header: %+v", doc)
			}
			if doc.Driver != "550.54.15" || doc.CUDA != "12.4" || doc.NVML != "12.550.54.15" {
				t.Errorf("versions: driver %q cuda %q nvml %q", doc.Driver, doc.CUDA, doc.NVML)
			}
			if len(doc.GPUs) != 8 {
				t.Fatalf("%d GPUs, want 8", len(doc.GPUs))
			}
			if len(doc.Warnings) != 0 || doc.ProcsBogus {
				t.Errorf("warnings %q, bogus %v", doc.Warnings, doc.ProcsBogus)
			}
			seen := map[string]bool{}
			for i, g := range doc.GPUs {
				dev := tc.srv.Devices[i].(*server.Device)
				total := tc.totalMiB * mib
				want := gpuinfo.GPU{
					Index: i, UUID: dev.UUID, BusID: strings.Replace(dev.PciBusID, "0000:", "00000000:", 1), Name: tc.gpuName,
					MemTotal: &total, MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(0)),
					UtilPct: ptr(10 * i), TempC: ptr(30 + i), PowerW: ptr(100 + 1.5*float64(i)),
					Health: gpuinfo.HealthOK, MIGMode: MIGDisabled, Procs: []gpuinfo.Proc{}, ProcsKnown: true,
				}
				if tc.v2 {
					want.MemReserved = ptr(uint64(0))
				}
				sameJSON(t, "gpu", g, want)
				if !strings.HasPrefix(g.UUID, "GPU-") || seen[g.UUID] {
					t.Errorf("gpu %d: uuid %q not a distinct GPU- uuid", i, g.UUID)
				}
				seen[g.UUID] = true
			}
			if n := len(tc.srv.ShutdownCalls()); n != 1 {
				t.Errorf("Shutdown called %d times, want 1", n)
			}
			a, _ := json.Marshal(doc)
			b, _ := json.Marshal(Collect(tc.srv, nil, Self{SHA256: "abc"}))
			if string(a) != string(b) {
				t.Errorf("two collections differ:\n%s\n%s", a, b)
			}
		})
	}
}

func TestInitLibraryNotFound(t *testing.T) {
	// Only Init is stubbed: any other call (Shutdown included) panics.
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	doc := Collect(lib, nil, Self{SHA256: "feed"})
	if doc.InitCode != 12 || doc.InitError != "ERROR_LIBRARY_NOT_FOUND" {
		t.Errorf("init: %d %q", doc.InitCode, doc.InitError)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":"gssh.helper/v1","helper_sha256":"feed","init_error":"ERROR_LIBRARY_NOT_FOUND","init_code":12,"gpus":[],"warnings":[]}`
	if string(b) != want {
		t.Errorf("document:\ngot  %s\nwant %s", b, want)
	}
}

func TestDeviceCountFails(t *testing.T) {
	lib := newLib()
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	doc := Collect(lib, nil, Self{})
	if doc.InitCode != int(nvml.ERROR_UNKNOWN) || !strings.Contains(doc.InitError, "nvmlDeviceGetCount") {
		t.Errorf("init: %d %q", doc.InitCode, doc.InitError)
	}
	if len(doc.GPUs) != 0 || doc.GPUs == nil {
		t.Errorf("gpus: %#v", doc.GPUs)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
}

func TestHandleFailures(t *testing.T) {
	for _, tc := range []struct {
		ret    nvml.Return
		health gpuinfo.Health
		state  string
	}{
		{nvml.ERROR_GPU_IS_LOST, gpuinfo.HealthLost, gpuinfo.FieldGPULost},
		{nvml.ERROR_RESET_REQUIRED, gpuinfo.HealthRequiresReset, gpuinfo.FieldRequiresReset},
		{nvml.ERROR_NO_PERMISSION, gpuinfo.HealthError, gpuinfo.FieldNoPermission},
	} {
		t.Run(tc.ret.Error(), func(t *testing.T) {
			d0 := newDevice(0, "GPU-0000", "NVIDIA A40", 46068)
			d2 := newDevice(2, "GPU-2222", "NVIDIA A40", 46068)
			d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
				return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 512 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}}, nvml.SUCCESS
			}
			lib := newLib(d0, nil, d2)
			orig := lib.DeviceGetHandleByIndexFunc
			lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
				if i == 1 {
					return nil, tc.ret
				}
				return orig(i)
			}
			doc := Collect(lib, fakeProcs{4242: {Name: "python3"}}, Self{})
			if len(doc.GPUs) != 3 {
				t.Fatalf("%d GPUs, want 3", len(doc.GPUs))
			}
			want0 := healthyGPU(0, "GPU-0000", "NVIDIA A40", 46068)
			want0.Procs = []gpuinfo.Proc{{PID: 4242, Name: "python3", UsedBytes: ptr(uint64(512 * mib)), GPUUUID: "GPU-0000"}}
			sameJSON(t, "gpu 0", doc.GPUs[0], want0)
			sameJSON(t, "gpu 1", doc.GPUs[1], gpuinfo.GPU{
				Index: 1, Health: tc.health, HealthWhy: tc.ret.Error(), NVMLCode: int(tc.ret),
				MemoryState: tc.state, Procs: []gpuinfo.Proc{},
			})
			sameJSON(t, "gpu 2", doc.GPUs[2], healthyGPU(2, "GPU-2222", "NVIDIA A40", 46068))
			if doc.ProcsBogus || len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], "gpu 1") {
				t.Errorf("bogus %v, warnings %q", doc.ProcsBogus, doc.Warnings)
			}
		})
	}
}

func TestIdentityFailures(t *testing.T) {
	t.Run("uuid lost", func(t *testing.T) {
		// Only GetUUID is stubbed: a lost GPU must not be asked anything else.
		lost := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }}
		doc := Collect(newLib(lost, newDevice(1, "GPU-1", "NVIDIA L4", 23034)), nil, Self{})
		sameJSON(t, "gpu 0", doc.GPUs[0], gpuinfo.GPU{
			Index: 0, Health: gpuinfo.HealthLost, HealthWhy: "ERROR_GPU_IS_LOST", NVMLCode: 15,
			MemoryState: gpuinfo.FieldGPULost, Procs: []gpuinfo.Proc{},
		})
		sameJSON(t, "gpu 1", doc.GPUs[1], healthyGPU(1, "GPU-1", "NVIDIA L4", 23034))
	})
	t.Run("name lost", func(t *testing.T) {
		d := newDevice(0, "GPU-0", "", 23034)
		d.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
		d.GetMemoryInfo_v2Func = nil // must not be called
		g := Collect(newLib(d), nil, Self{}).GPUs[0]
		if g.Health != gpuinfo.HealthLost || g.UUID != "GPU-0" || g.NVMLCode != 15 || g.MemTotal != nil || g.ProcsKnown {
			t.Errorf("got %s", jsonOf(t, g))
		}
	})
	t.Run("name unknown error", func(t *testing.T) {
		d := newDevice(0, "GPU-0", "", 46068)
		d.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
		g := Collect(newLib(d), nil, Self{}).GPUs[0]
		want := healthyGPU(0, "GPU-0", "", 46068)
		want.Health, want.HealthWhy, want.NVMLCode = gpuinfo.HealthError, "ERROR_UNKNOWN", int(nvml.ERROR_UNKNOWN)
		sameJSON(t, "gpu", g, want)
	})
	t.Run("bare GPU- uuid", func(t *testing.T) {
		g := Collect(newLib(newDevice(0, "GPU-", "Tesla K80", 11441)), nil, Self{}).GPUs[0]
		if g.UUID != "" || g.Health != gpuinfo.HealthOK {
			t.Errorf("uuid %q health %q", g.UUID, g.Health)
		}
	})
}

func TestMemoryStates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gpuName  string
		v2, v1   nvml.Return
		state    string
		health   gpuinfo.Health
		reserved bool
	}{
		{"not supported", "NVIDIA RTX A4000", nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, gpuinfo.FieldNotSupported, gpuinfo.HealthOK, false},
		{"unified memory", "NVIDIA GB10", nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED, gpuinfo.MemoryUnified, gpuinfo.HealthOK, false},
		{"no permission", "NVIDIA A100-SXM4-80GB", nvml.ERROR_NO_PERMISSION, nvml.SUCCESS, gpuinfo.FieldNoPermission, gpuinfo.HealthOK, false},
		{"reset required", "NVIDIA A100-SXM4-80GB", nvml.ERROR_RESET_REQUIRED, nvml.SUCCESS, gpuinfo.FieldRequiresReset, gpuinfo.HealthRequiresReset, false},
		{"v2 missing falls back to v1", "Tesla V100-SXM2-16GB", nvml.ERROR_FUNCTION_NOT_FOUND, nvml.SUCCESS, "", gpuinfo.HealthOK, false},
		{"v2 version mismatch falls back to v1", "Tesla T4", nvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.SUCCESS, "", gpuinfo.HealthOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevice(0, "GPU-0", tc.gpuName, 16384)
			d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 1}, tc.v2 }
			d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
				if tc.v1 != nvml.SUCCESS {
					return nvml.Memory{}, tc.v1
				}
				return nvml.Memory{Total: 16384 * mib, Used: 10 * mib, Free: 16374 * mib}, nvml.SUCCESS
			}
			g := Collect(newLib(d), nil, Self{}).GPUs[0]
			want := healthyGPU(0, "GPU-0", tc.gpuName, 16384)
			want.MemTotal, want.MemUsed, want.MemFree, want.MemReserved = nil, nil, nil, nil
			if tc.state == "" {
				want.MemTotal, want.MemUsed, want.MemFree = ptr(uint64(16384*mib)), ptr(uint64(10*mib)), ptr(uint64(16374*mib))
			}
			want.MemoryState, want.Health = tc.state, tc.health
			if tc.health != gpuinfo.HealthOK {
				want.HealthWhy, want.NVMLCode = tc.v2.Error(), int(tc.v2)
			}
			sameJSON(t, "gpu", g, want)
		})
	}
	t.Run("old driver without the v2 symbol", func(t *testing.T) {
		d := newDevice(0, "GPU-0", "Tesla P100", 16280)
		d.GetMemoryInfo_v2Func = nil // panics if called
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 16280 * mib}, nvml.SUCCESS }
		lib := newLib(d)
		lib.ExtensionsFunc = func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if s == "nvmlDeviceGetMemoryInfo_v2" {
					return nvml.ERROR_FUNCTION_NOT_FOUND
				}
				return nil
			}}
		}
		g := Collect(lib, nil, Self{}).GPUs[0]
		if g.MemTotal == nil || *g.MemTotal != 16280*mib || g.MemReserved != nil || g.MemoryState != "" {
			t.Errorf("got %s", jsonOf(t, g))
		}
	})
}

func TestOtherGetterStates(t *testing.T) {
	d := newDevice(0, "GPU-0", "NVIDIA A100-SXM4-40GB", 40960)
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	g := Collect(newLib(d, newDevice(1, "GPU-1", "NVIDIA A100-SXM4-40GB", 40960)), nil, Self{}).GPUs
	want := healthyGPU(0, "GPU-0", "NVIDIA A100-SXM4-40GB", 40960)
	want.UtilPct, want.TempC, want.PowerW = nil, nil, nil
	sameJSON(t, "gpu 0", g[0], want)
	sameJSON(t, "gpu 1", g[1], healthyGPU(1, "GPU-1", "NVIDIA A100-SXM4-40GB", 40960))

	t.Run("reset required from utilization", func(t *testing.T) {
		d := newDevice(0, "GPU-0", "NVIDIA H100 80GB HBM3", 81559)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_RESET_REQUIRED }
		g := Collect(newLib(d), nil, Self{}).GPUs[0]
		if g.Health != gpuinfo.HealthRequiresReset || g.NVMLCode != 16 || g.UtilPct != nil || g.MemTotal == nil {
			t.Errorf("got %s", jsonOf(t, g))
		}
	})
}

// migParent is an A100 in MIG mode with a 1g.5gb and a 3g.20gb device in
// slots 0 and 2 (slot 1 empty), GPU instances 9 and 2; pid 5150 runs on
// the 3g.20gb device. The parent's process list is not stubbed: it is only
// asked when a MIG device's list cannot be read.
func migParent(memRet nvml.Return) (*mock.Device, []*mock.Device) {
	parent := newDevice(0, "GPU-a100", "NVIDIA A100-SXM4-40GB", 40960)
	parent.GetMigModeFunc = func() (int, int, nvml.Return) {
		return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
	}
	parent.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	parent.GetComputeRunningProcessesFunc = nil // in MIG mode, processes come from the MIG handles
	if memRet != nvml.SUCCESS {
		parent.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, memRet }
	}
	mig := func(uuid, name string, gi int, totalMiB, usedMiB uint64, procs []nvml.ProcessInfo) *mock.Device {
		return &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return name, nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				if memRet != nvml.SUCCESS {
					return nvml.Memory{}, memRet
				}
				return nvml.Memory{Total: totalMiB * mib, Used: usedMiB * mib, Free: (totalMiB - usedMiB) * mib}, nvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS },
		}
	}
	migs := []*mock.Device{
		mig("MIG-11111111-2222-3333-4444-555555555555", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 9, 4864, 13, nil),
		mig("MIG-66666666-7777-8888-9999-000000000000", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", 2, 19968, 11091,
			[]nvml.ProcessInfo{{Pid: 5150, UsedGpuMemory: 11000 * mib, GpuInstanceId: 2, ComputeInstanceId: 0}}),
	}
	parent.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		switch i {
		case 0:
			return migs[0], nvml.SUCCESS
		case 2:
			return migs[1], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return parent, migs
}

func TestMIG(t *testing.T) {
	parent, _ := migParent(nvml.SUCCESS)
	procs := fakeProcs{5150: {Name: "python", UID: ptr(1000), User: "alice"}}
	doc := Collect(newLib(parent, newDevice(1, "GPU-b", "NVIDIA A100-SXM4-40GB", 40960)), procs, Self{})
	want := healthyGPU(0, "GPU-a100", "NVIDIA A100-SXM4-40GB", 40960)
	want.UtilPct, want.MIGMode = nil, MIGEnabled
	want.MIG = []gpuinfo.MIG{
		{Index: 0, UUID: "MIG-11111111-2222-3333-4444-555555555555", Profile: "1g.5gb",
			MemTotal: ptr(uint64(4864 * mib)), MemUsed: ptr(uint64(13 * mib)), MemFree: ptr(uint64(4851 * mib))},
		{Index: 1, UUID: "MIG-66666666-7777-8888-9999-000000000000", Profile: "3g.20gb",
			MemTotal: ptr(uint64(19968 * mib)), MemUsed: ptr(uint64(11091 * mib)), MemFree: ptr(uint64(8877 * mib))},
	}
	want.Procs = []gpuinfo.Proc{{PID: 5150, Name: "python", User: "alice", UID: ptr(1000),
		UsedBytes: ptr(uint64(11000 * mib)), GPUUUID: "MIG-66666666-7777-8888-9999-000000000000"}}
	sameJSON(t, "mig gpu", doc.GPUs[0], want)
	sameJSON(t, "other gpu", doc.GPUs[1], healthyGPU(1, "GPU-b", "NVIDIA A100-SXM4-40GB", 40960))
	if doc.ProcsBogus || len(doc.Warnings) != 0 {
		t.Errorf("bogus %v warnings %q", doc.ProcsBogus, doc.Warnings)
	}
}

// Corpus 055: in a container, memory of a MIG GPU is Insufficient
// Permissions. The MIG devices are still listed, size unknown, and the
// other GPU is untouched.
func TestMIGParentMemoryNoPermission(t *testing.T) {
	parent, _ := migParent(nvml.ERROR_NO_PERMISSION)
	doc := Collect(newLib(parent, newDevice(1, "GPU-b", "NVIDIA A100-SXM4-40GB", 40960)), fakeProcs{5150: {Name: "python"}}, Self{})
	g := doc.GPUs[0]
	if g.Health != gpuinfo.HealthOK || g.MemTotal != nil || g.MemoryState != gpuinfo.FieldNoPermission {
		t.Errorf("parent: %s", jsonOf(t, g))
	}
	if len(g.MIG) != 2 {
		t.Fatalf("mig devices: %s", jsonOf(t, g.MIG))
	}
	for i, m := range g.MIG {
		if !strings.HasPrefix(m.UUID, "MIG-") || m.Profile == "" || m.MemTotal != nil || m.MemoryState != gpuinfo.FieldNoPermission {
			t.Errorf("mig %d: %s", i, jsonOf(t, m))
		}
	}
	if !g.ProcsKnown || len(g.Procs) != 1 || g.Procs[0].GPUUUID != g.MIG[1].UUID {
		t.Errorf("processes: %s", jsonOf(t, g.Procs))
	}
	sameJSON(t, "other gpu", doc.GPUs[1], healthyGPU(1, "GPU-b", "NVIDIA A100-SXM4-40GB", 40960))
}

func TestMIGFailures(t *testing.T) {
	t.Run("device count fails", func(t *testing.T) {
		parent, _ := migParent(nvml.SUCCESS)
		parent.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
		parent.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
		doc := Collect(newLib(parent), nil, Self{})
		g := doc.GPUs[0]
		if g.Health != gpuinfo.HealthOK || g.MIGMode != MIGEnabled || len(g.MIG) != 0 || g.ProcsKnown || len(doc.Warnings) != 2 {
			t.Errorf("got %s warnings %q", jsonOf(t, g), doc.Warnings)
		}
	})
	t.Run("mig lists and whole-GPU list unreadable", func(t *testing.T) {
		parent, migs := migParent(nvml.SUCCESS)
		migs[0].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		parent.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
		doc := Collect(newLib(parent), fakeProcs{}, Self{})
		if g := doc.GPUs[0]; g.ProcsKnown || len(g.Procs) != 0 || len(g.MIG) != 2 || len(doc.Warnings) != 1 {
			t.Errorf("got %s, warnings %q", jsonOf(t, g), doc.Warnings)
		}
	})
	t.Run("mig lists unreadable, whole-GPU list by instance", func(t *testing.T) {
		parent, migs := migParent(nvml.SUCCESS)
		for _, m := range migs {
			m.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		}
		parent.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{
				{Pid: 21198, UsedGpuMemory: 7484 * mib, GpuInstanceId: 2, ComputeInstanceId: 0},
				{Pid: 21180, UsedGpuMemory: 2296 * mib, GpuInstanceId: 9, ComputeInstanceId: 0},
				{Pid: 21181, UsedGpuMemory: 1272 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
			}, nvml.SUCCESS
		}
		doc := Collect(newLib(parent), fakeProcs{21180: {Name: "memhog"}, 21181: {Name: "memhog"}, 21198: {Name: "gpu_burn"}}, Self{})
		g := doc.GPUs[0]
		sameJSON(t, "processes", g.Procs, []gpuinfo.Proc{
			{PID: 21180, Name: "memhog", UsedBytes: ptr(uint64(2296 * mib)), GPUUUID: g.MIG[0].UUID},
			{PID: 21181, Name: "memhog", UsedBytes: ptr(uint64(1272 * mib)), GPUUUID: "GPU-a100"},
			{PID: 21198, Name: "gpu_burn", UsedBytes: ptr(uint64(7484 * mib)), GPUUUID: g.MIG[1].UUID},
		})
		if !g.ProcsKnown || doc.ProcsBogus || len(doc.Warnings) != 0 {
			t.Errorf("known %v bogus %v warnings %q", g.ProcsKnown, doc.ProcsBogus, doc.Warnings)
		}
	})
	t.Run("mig enabled, no mig devices", func(t *testing.T) {
		parent, _ := migParent(nvml.SUCCESS)
		parent.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
		g := Collect(newLib(parent), nil, Self{}).GPUs[0]
		if !g.ProcsKnown || len(g.MIG) != 0 || g.MIG == nil {
			t.Errorf("got %s", jsonOf(t, g))
		}
	})
	t.Run("mig not supported", func(t *testing.T) {
		d := newDevice(0, "GPU-0", "NVIDIA GeForce RTX 4090", 24564)
		d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
		g := Collect(newLib(d), nil, Self{}).GPUs[0]
		if g.MIGMode != "" || g.Health != gpuinfo.HealthOK || !g.ProcsKnown {
			t.Errorf("got %s", jsonOf(t, g))
		}
	})
}

// withProcs gives d the records recs.
func withProcs(d *mock.Device, recs ...nvml.ProcessInfo) *mock.Device {
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return recs, nvml.SUCCESS }
	return d
}

func TestBogusProcessesDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []nvml.ProcessInfo
		why  string
	}{
		{"corpus 051 stride mismatch", []nvml.ProcessInfo{
			{Pid: 27513, UsedGpuMemory: 173015040, GpuInstanceId: 27783, ComputeInstanceId: 0},
			{Pid: 173015040, UsedGpuMemory: 27817, GpuInstanceId: 173015040, ComputeInstanceId: 0},
			{Pid: 0, UsedGpuMemory: 0, GpuInstanceId: 0, ComputeInstanceId: 0},
		}, "gpu instance id 27783 while MIG is off"},
		{"corpus 052 MPS uint32 max", []nvml.ProcessInfo{
			{Pid: 4126076, UsedGpuMemory: 2928672768},
			{Pid: 4294967295, UsedGpuMemory: 4126048},
		}, "pid 4294967295"},
		{"more memory than the GPU has", []nvml.ProcessInfo{
			{Pid: 3001, UsedGpuMemory: 100000 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
		}, "more than the device's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := withProcs(newDevice(1, "GPU-good", "NVIDIA A40", 46068),
				nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
			bad := withProcs(newDevice(0, "GPU-bad", "NVIDIA A40", 46068), tc.recs...)
			// No SystemGetProcessName, and a ProcInfo that fails the test:
			// bogus records are never enriched.
			doc := Collect(newLib(bad, good), failProcs{t}, Self{})
			if !doc.ProcsBogus {
				t.Fatal("ProcsBogus not set")
			}
			for _, g := range doc.GPUs {
				if g.ProcsKnown || g.Procs == nil || len(g.Procs) != 0 {
					t.Errorf("gpu %d: known %v procs %s", g.Index, g.ProcsKnown, jsonOf(t, g.Procs))
				}
			}
			if len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], "gpu 0 (GPU-bad)") || !strings.Contains(doc.Warnings[0], tc.why) {
				t.Errorf("warnings %q, want one naming gpu 0 and %q", doc.Warnings, tc.why)
			}
		})
	}
}

type failProcs struct{ t *testing.T }

func (f failProcs) Lookup(pid int) (ProcDetails, bool) {
	f.t.Errorf("Lookup(%d) of a bogus record", pid)
	return ProcDetails{}, false
}

func TestBogus(t *testing.T) {
	total := ptr(uint64(46068 * mib))
	for _, tc := range []struct {
		name string
		recs []nvml.ProcessInfo
		mig  bool
		want string // substring; "" = not bogus
	}{
		{"corpus 051 before more processes started: one record, valid", []nvml.ProcessInfo{{Pid: 27513, UsedGpuMemory: 173015040}}, false, ""},
		{"three real processes", []nvml.ProcessInfo{
			{Pid: 27513, UsedGpuMemory: 173015040, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
			{Pid: 27783, UsedGpuMemory: 173015040, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
			{Pid: 27817, UsedGpuMemory: 173015040, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
		}, false, ""},
		{"memory not available (WDDM)", []nvml.ProcessInfo{{Pid: 77, UsedGpuMemory: ^uint64(0), GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}}, false, ""},
		{"MIG on: instance ids are real", []nvml.ProcessInfo{{Pid: 21180, UsedGpuMemory: 2296 * mib, GpuInstanceId: 2, ComputeInstanceId: 0}}, true, ""},
		{"MIG off: instance id", []nvml.ProcessInfo{{Pid: 21180, UsedGpuMemory: 2296 * mib, GpuInstanceId: 2}}, false, "gpu instance id 2"},
		{"MIG off: compute instance id", []nvml.ProcessInfo{{Pid: 21180, UsedGpuMemory: 2296 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 5}}, false, "compute instance id 5"},
		{"pid 0", []nvml.ProcessInfo{{Pid: 0, UsedGpuMemory: mib}}, false, "pid 0"},
		{"pid above PID_MAX_LIMIT", []nvml.ProcessInfo{{Pid: 173015040, UsedGpuMemory: mib}}, false, "above the kernel's limit"},
		{"pid equals another record's memory", []nvml.ProcessInfo{{Pid: 2 * mib, UsedGpuMemory: mib}, {Pid: 4000, UsedGpuMemory: 2 * mib}}, false, "equals another record's used memory"},
		{"corpus 051", []nvml.ProcessInfo{
			{Pid: 27513, UsedGpuMemory: 173015040, GpuInstanceId: 27783},
			{Pid: 173015040, UsedGpuMemory: 27817, GpuInstanceId: 173015040},
			{Pid: 0},
		}, false, "27783"},
		{"corpus 052", []nvml.ProcessInfo{{Pid: 4126076, UsedGpuMemory: 2928672768}, {Pid: 4294967295, UsedGpuMemory: 4126048}}, false, "4294967295"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits := make([]*uint64, len(tc.recs))
			for i := range limits {
				limits[i] = total
			}
			got := Bogus(tc.recs, tc.mig, limits)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Bogus = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProcessesEnriched(t *testing.T) {
	d0 := withProcs(newDevice(0, "GPU-0", "NVIDIA H100 80GB HBM3", 81559),
		nvml.ProcessInfo{Pid: 9001, UsedGpuMemory: 30000 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
		nvml.ProcessInfo{Pid: 812, UsedGpuMemory: ^uint64(0), GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
		nvml.ProcessInfo{Pid: 4321, UsedGpuMemory: 2000 * mib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF},
	)
	d1 := withProcs(newDevice(1, "GPU-1", "NVIDIA H100 80GB HBM3", 81559),
		nvml.ProcessInfo{Pid: 9001, UsedGpuMemory: 500 * mib}) // a v1 driver: ids 0
	d2 := newDevice(2, "GPU-2", "NVIDIA H100 80GB HBM3", 81559)
	d2.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	lib := newLib(d0, d1, d2)
	var asked []int
	lib.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) {
		asked = append(asked, pid)
		if pid == 4321 {
			return "/usr/bin/Xorg", nvml.SUCCESS
		}
		return "", nvml.ERROR_NOT_FOUND
	}
	procs := fakeProcs{
		9001: {Name: "python3", UID: ptr(1001), User: "bob", SessionID: ptr(8800), StartTicks: ptr(int64(123456789)), JobID: "j-42"},
		812:  {Name: "torchrun", UID: ptr(0), User: "root", SessionID: ptr(1)},
	}
	doc := Collect(lib, procs, Self{})
	want0 := []gpuinfo.Proc{
		{PID: 812, Name: "torchrun", User: "root", GPUUUID: "GPU-0", UID: ptr(0), SessionID: ptr(1)},
		{PID: 4321, Name: "/usr/bin/Xorg", UsedBytes: ptr(uint64(2000 * mib)), GPUUUID: "GPU-0"},
		{PID: 9001, Name: "python3", User: "bob", UsedBytes: ptr(uint64(30000 * mib)), GPUUUID: "GPU-0",
			UID: ptr(1001), SessionID: ptr(8800), StartTime: ptr(int64(123456789)), JobID: "j-42"},
	}
	sameJSON(t, "gpu 0 processes", doc.GPUs[0].Procs, want0)
	want1 := []gpuinfo.Proc{{PID: 9001, Name: "python3", User: "bob", UsedBytes: ptr(uint64(500 * mib)), GPUUUID: "GPU-1",
		UID: ptr(1001), SessionID: ptr(8800), StartTime: ptr(int64(123456789)), JobID: "j-42"}}
	sameJSON(t, "gpu 1 processes", doc.GPUs[1].Procs, want1)
	if !doc.GPUs[0].ProcsKnown || !doc.GPUs[1].ProcsKnown {
		t.Error("readable lists not known")
	}
	if g := doc.GPUs[2]; g.ProcsKnown || len(g.Procs) != 0 || g.Health != gpuinfo.HealthOK {
		t.Errorf("unreadable list: %s", jsonOf(t, g))
	}
	if len(asked) != 1 || asked[0] != 4321 {
		t.Errorf("SystemGetProcessName asked for %v, want only [4321]", asked)
	}
	if doc.ProcsBogus || len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], "gpu 2") {
		t.Errorf("bogus %v warnings %q", doc.ProcsBogus, doc.Warnings)
	}
}

func TestHelpers(t *testing.T) {
	for v, want := range map[int]string{12020: "12.2", 12040: "12.4", 11080: "11.8", 13000: "13.0", 10010: "10.1", 0: "", -1: ""} {
		if got := CUDAVersion(v); got != want {
			t.Errorf("CUDAVersion(%d) = %q, want %q", v, got, want)
		}
	}
	for _, tc := range []struct {
		p    nvml.PciInfo
		want string
	}{
		{nvml.PciInfo{BusId: cBusID("00000000:07:00.0")}, "00000000:07:00.0"},
		{nvml.PciInfo{BusId: cBusID("00000000:1a:00.0")}, "00000000:1A:00.0"},
		{nvml.PciInfo{BusIdLegacy: [16]int8{'0', '0', '0', '0', ':', '8', '1', ':', '0', '0', '.', '0'}}, "00000000:81:00.0"},
		{nvml.PciInfo{}, ""},
	} {
		if got := BusID(tc.p); got != tc.want {
			t.Errorf("BusID = %q, want %q", got, tc.want)
		}
	}
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb":     "1g.5gb",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb+me": "1g.10gb+me",
		"NVIDIA A100-SXM4-40GB":                "",
	} {
		if got := MIGProfile(name); got != want {
			t.Errorf("MIGProfile(%q) = %q, want %q", name, got, want)
		}
	}
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_NOT_SUPPORTED: "not supported", nvml.ERROR_NO_PERMISSION: "insufficient permissions",
		nvml.ERROR_GPU_IS_LOST: "gpu is lost", nvml.ERROR_TIMEOUT: "timeout",
	} {
		if got := State(ret); got != want {
			t.Errorf("State(%d) = %q, want %q", ret, got, want)
		}
	}
}
