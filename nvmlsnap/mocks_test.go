package nvmlsnap

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gssh/gssh/gpuinfo"
)

const mib = 1 << 20

// completeServer stubs, on every device of a whole-server mock, the getters
// Collect needs that the mock leaves out (they would panic): PCI bus id
// (the mock's GetPciInfo has no BusId), memory v2 (from the mock's
// MemoryInfo; with v2 false it answers ERROR_FUNCTION_NOT_FOUND so Collect
// must fall back to the mock's own GetMemoryInfo), utilization,
// temperature, power and an empty process list.
func completeServer(s *server.Server, v2 bool) {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		orig := dev.GetPciInfoFunc
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p, ret := orig()
			p.BusId = cBusID(dev.PciBusID)
			return p, ret
		}
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			if !v2 {
				return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
			}
			m := dev.MemoryInfo
			return nvml.Memory_v2{Total: m.Total, Used: m.Used, Free: m.Free}, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i)}, nvml.SUCCESS
		}
		dev.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(30 + i), nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(100000 + 1500*i), nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
}

// cBusID is s as NVML's char[32] busId.
func cBusID(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < len(b)-1; i++ {
		b[i] = int8(s[i])
	}
	return b
}

// newDevice is a healthy hand-stubbed GPU: totalMiB of memory of which 1 GiB
// is used and 512 MiB reserved, 42 % busy, 55 °C, 123.456 W, MIG off, no
// processes. Tests replace single Func fields to break one getter.
func newDevice(i int, uuid, name string, totalMiB uint64) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: cBusID(fmt.Sprintf("00000000:%02X:00.0", 7+16*i))}, nvml.SUCCESS
		},
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			t := totalMiB * mib
			return nvml.Memory_v2{Total: t, Used: 1024 * mib, Reserved: 512 * mib, Free: t - 1536*mib}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 42, Memory: 7}, nvml.SUCCESS },
		GetTemperatureFunc:      func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 55, nvml.SUCCESS },
		GetPowerUsageFunc:       func() (uint32, nvml.Return) { return 123456, nvml.SUCCESS },
		GetMigModeFunc:          func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.SUCCESS
		},
	}
}

// healthyGPU is what Collect must make of newDevice(i, uuid, name, totalMiB).
func healthyGPU(i int, uuid, name string, totalMiB uint64) gpuinfo.GPU {
	t := totalMiB * mib
	return gpuinfo.GPU{
		Index: i, UUID: uuid, BusID: fmt.Sprintf("00000000:%02X:00.0", 7+16*i), Name: name,
		MemTotal: ptr(t), MemUsed: ptr(uint64(1024 * mib)), MemFree: ptr(t - 1536*mib), MemReserved: ptr(uint64(512 * mib)),
		UtilPct: ptr(42), TempC: ptr(55), PowerW: ptr(123.456),
		Health: gpuinfo.HealthOK, MIGMode: MIGDisabled, Procs: []gpuinfo.Proc{}, ProcsKnown: true,
	}
}

// newLib is a hand-stubbed NVML with devs, driver 570.133.20 / CUDA 12.8,
// and every symbol present. It does not stub SystemGetProcessName: a test
// that needs it sets it.
func newLib(devs ...nvml.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "570.133.20", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12080, nvml.SUCCESS },
		SystemGetNVMLVersionFunc:       func() (string, nvml.Return) { return "12.570.133.20", nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
}

// fakeProcs is a ProcInfo over a map.
type fakeProcs map[int]ProcDetails

func (f fakeProcs) Lookup(pid int) (ProcDetails, bool) {
	d, ok := f[pid]
	return d, ok
}

// jsonOf renders v for comparisons and failure messages.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON fails when got and want render differently.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
		t.Errorf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}
