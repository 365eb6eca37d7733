// Package nvmlsnap reads a host's GPUs through NVML (go-nvml, cgo) into one
// gpuinfo.HelperDoc. Only gssh-helper imports it: the gssh binary itself is
// built with CGO_ENABLED=0 and never links NVML.
//
// Every NVML failure is data in the document, never a zero: a getter that
// fails leaves its field nil and says why (MemoryState, Health, a warning),
// and one GPU's failure never affects the others. Collect checks with
// LookupSymbol before calling functions old drivers lack (MIG: R450,
// nvmlDeviceGetMemoryInfo_v2: R510), because the helper is linked lazily and
// calling a missing symbol would kill it.
package nvmlsnap

import (
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gssh/gssh/gpuinfo"
)

// Self describes the helper executable that runs Collect.
type Self struct {
	// SHA256 is the hex sha256 of the helper's own executable
	// (/proc/self/exe); it goes to HelperDoc.SHA256 as it is.
	SHA256 string
}

// Symbols Collect calls only when the loaded libnvidia-ml exports them.
const (
	symMemoryV2      = "nvmlDeviceGetMemoryInfo_v2"          // R510+
	symMigMode       = "nvmlDeviceGetMigMode"                // R450+
	symMaxMigCount   = "nvmlDeviceGetMaxMigDeviceCount"      // R450+
	symMigHandleByIx = "nvmlDeviceGetMigDeviceHandleByIndex" // R450+
)

// MIG mode strings, as nvidia-smi prints mig.mode.current.
const (
	MIGEnabled  = "Enabled"
	MIGDisabled = "Disabled"
)

// Collect reads everything gssh needs from NVML into one document: driver,
// CUDA and NVML versions, and per GPU (in NVML index order) identity,
// memory in bytes, utilization, temperature, power, MIG devices and compute
// processes enriched from procs (may be nil: no enrichment).
//
// lib is nvml.New() in the helper and a mock in tests. When lib.Init fails
// the document carries only Schema, SHA256, InitError and InitCode; when
// nvmlDeviceGetCount fails after a good Init, InitError names it too (the
// GPUs are then unknown, which is not "no GPU"). After a successful Init,
// Collect always calls lib.Shutdown.
func Collect(lib nvml.Interface, procs ProcInfo, self Self) gpuinfo.HelperDoc {
	doc := gpuinfo.HelperDoc{
		Schema:   gpuinfo.HelperSchema,
		SHA256:   self.SHA256,
		GPUs:     []gpuinfo.GPU{},
		Warnings: []string{},
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		doc.InitError, doc.InitCode = ret.Error(), int(ret)
		return doc
	}
	c := &collector{lib: lib, procs: procs, doc: &doc, syms: map[string]bool{}, seen: map[int]lookup{}}
	c.collect()
	if ret := lib.Shutdown(); ret != nvml.SUCCESS {
		doc.Warnings = append(doc.Warnings, "nvml shutdown: "+ret.Error())
	}
	return doc
}

// collector holds the state of one Collect call.
type collector struct {
	lib   nvml.Interface
	procs ProcInfo
	doc   *gpuinfo.HelperDoc
	syms  map[string]bool // LookupSymbol answers, asked once each
	seen  map[int]lookup  // ProcInfo / process-name answers by pid
}

// lookup is what is known about one pid beyond NVML's record.
type lookup struct {
	d  ProcDetails
	ok bool
}

// rawProcs are one GPU's NVML process records before the bogus check.
type rawProcs struct {
	recs []rawProc
	ok   bool // every list of this GPU could be read
}

// rawProc is one NVML process record and where it was found.
type rawProc struct {
	info  nvml.ProcessInfo
	uuid  string  // GPU or MIG device UUID the list was read from
	limit *uint64 // memory total of that device, when known
}

func (c *collector) collect() {
	c.versions()
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		c.doc.InitError, c.doc.InitCode = "nvmlDeviceGetCount: "+ret.Error(), int(ret)
		return
	}
	raws := make([]rawProcs, n)
	for i := 0; i < n; i++ {
		var g gpuinfo.GPU
		g, raws[i] = c.gpu(i)
		c.doc.GPUs = append(c.doc.GPUs, g)
	}
	c.processes(raws)
}

// has reports whether the loaded library exports sym (asked once).
func (c *collector) has(sym string) bool {
	ok, asked := c.syms[sym]
	if !asked {
		ok = c.lib.Extensions().LookupSymbol(sym) == nil
		c.syms[sym] = ok
	}
	return ok
}

func (c *collector) warn(format string, args ...any) {
	c.doc.Warnings = append(c.doc.Warnings, fmt.Sprintf(format, args...))
}

// gpuWarn warns about a failed getter unless ret only restates the GPU's
// health (lost, requires reset), which Health already says.
func (c *collector) gpuWarn(ret nvml.Return, format string, args ...any) {
	if ret != nvml.ERROR_GPU_IS_LOST && ret != nvml.ERROR_RESET_REQUIRED {
		c.warn(format, args...)
	}
}

// versions fills Driver (nvmlSystemGetDriverVersion), CUDA
// (nvmlSystemGetCudaDriverVersion, as "12.2") and NVML
// (nvmlSystemGetNVMLVersion).
func (c *collector) versions() {
	if v, ret := c.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		c.doc.Driver = v
	} else if !unsupported(ret) {
		c.warn("driver version: %s", ret.Error())
	}
	if v, ret := c.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		c.doc.CUDA = CUDAVersion(v)
	} else if !unsupported(ret) {
		c.warn("cuda driver version: %s", ret.Error())
	}
	if v, ret := c.lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		c.doc.NVML = v
	} else if !unsupported(ret) {
		c.warn("nvml version: %s", ret.Error())
	}
}

// CUDAVersion formats the integer nvmlSystemGetCudaDriverVersion gives
// (1000*major + 10*minor, e.g. 12020) as nvidia-smi does ("12.2"); "" for
// a value that is not a version.
func CUDAVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// unsupported reports whether ret says the driver or GPU lacks the function.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// State is the lower-case word for why a fact is missing, the same words
// the nvidia-smi parser uses (gpuinfo.Field*): ERROR_NOT_SUPPORTED → "not
// supported", ERROR_NO_PERMISSION → "insufficient permissions",
// ERROR_GPU_IS_LOST → "gpu is lost", and so on.
func State(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return gpuinfo.FieldNotSupported
	case nvml.ERROR_NO_PERMISSION:
		return gpuinfo.FieldNoPermission
	case nvml.ERROR_GPU_IS_LOST:
		return gpuinfo.FieldGPULost
	case nvml.ERROR_RESET_REQUIRED:
		return gpuinfo.FieldRequiresReset
	case nvml.ERROR_UNKNOWN:
		return gpuinfo.FieldUnknownError
	}
	s := strings.TrimPrefix(ret.Error(), "ERROR_")
	return strings.ToLower(strings.ReplaceAll(s, "_", " "))
}

// severity orders health states: a worse one replaces a better one.
func severity(h gpuinfo.Health) int {
	switch h {
	case gpuinfo.HealthLost:
		return 3
	case gpuinfo.HealthRequiresReset:
		return 2
	case gpuinfo.HealthError:
		return 1
	}
	return 0
}

// note records what ret says about g's health. GPU_IS_LOST anywhere makes it
// lost, RESET_REQUIRED anywhere "requires reset"; ERROR_UNKNOWN makes it
// "error" only from an identity getter (UUID, name, PCI info).
func note(g *gpuinfo.GPU, ret nvml.Return, identity bool) {
	h := gpuinfo.HealthOK
	switch {
	case ret == nvml.ERROR_GPU_IS_LOST:
		h = gpuinfo.HealthLost
	case ret == nvml.ERROR_RESET_REQUIRED:
		h = gpuinfo.HealthRequiresReset
	case ret == nvml.ERROR_UNKNOWN && identity:
		h = gpuinfo.HealthError
	}
	if severity(h) > severity(g.Health) {
		g.Health, g.HealthWhy, g.NVMLCode = h, ret.Error(), int(ret)
	}
}

// handleHealth is the health of a GPU whose handle could not be had.
func handleHealth(ret nvml.Return) gpuinfo.Health {
	switch ret {
	case nvml.ERROR_GPU_IS_LOST:
		return gpuinfo.HealthLost
	case nvml.ERROR_RESET_REQUIRED:
		return gpuinfo.HealthRequiresReset
	}
	return gpuinfo.HealthError
}

// gpu reads GPU i. A GPU whose handle cannot be had, or that NVML reports
// lost, is listed with its health and nothing else.
func (c *collector) gpu(i int) (gpuinfo.GPU, rawProcs) {
	g := gpuinfo.GPU{Index: i, Health: gpuinfo.HealthOK, Procs: []gpuinfo.Proc{}}
	dev, ret := c.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		g.Health, g.HealthWhy, g.NVMLCode = handleHealth(ret), ret.Error(), int(ret)
		g.MemoryState = State(ret)
		c.warn("gpu %d: handle: %s", i, ret.Error())
		return g, rawProcs{}
	}
	if uuid, ret := dev.GetUUID(); ret == nvml.SUCCESS {
		g.UUID = normUUID(uuid)
	} else {
		note(&g, ret, true)
	}
	if g.Health != gpuinfo.HealthLost {
		if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			g.BusID = BusID(pci)
		} else {
			note(&g, ret, true)
		}
	}
	if g.Health != gpuinfo.HealthLost {
		if name, ret := dev.GetName(); ret == nvml.SUCCESS {
			g.Name = name
		} else {
			note(&g, ret, true)
		}
	}
	if g.Health == gpuinfo.HealthLost {
		g.MemoryState = gpuinfo.FieldGPULost
		c.warn("gpu %d: %s", i, g.HealthWhy)
		return g, rawProcs{}
	}
	c.memory(&g, dev)
	if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		g.UtilPct = ptr(int(u.Gpu))
	} else {
		note(&g, ret, false)
	}
	if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		g.TempC = ptr(int(t))
	} else {
		note(&g, ret, false)
	}
	if mw, ret := dev.GetPowerUsage(); ret == nvml.SUCCESS {
		g.PowerW = ptr(float64(mw) / 1000)
	} else {
		note(&g, ret, false)
	}
	migs, listed := c.mig(&g, dev)
	if g.MIGMode == MIGEnabled {
		return g, c.migProcs(&g, dev, migs, listed)
	}
	recs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		note(&g, ret, false)
		if !unsupported(ret) {
			c.gpuWarn(ret, "gpu %d: compute processes: %s", i, ret.Error())
		}
		return g, rawProcs{}
	}
	raw := rawProcs{ok: true}
	for _, r := range recs {
		raw.recs = append(raw.recs, rawProc{info: r, uuid: g.UUID, limit: g.MemTotal})
	}
	return g, raw
}

// normUUID maps the bare "GPU-" some drivers report (corpus 020) to "".
func normUUID(u string) string {
	if u == "GPU-" || u == "MIG-" {
		return ""
	}
	return u
}

// memory fills g's memory from nvmlDeviceGetMemoryInfo_v2 (with reserved),
// or nvmlDeviceGetMemoryInfo where v2 is missing or unsupported; on failure
// MemoryState says why.
func (c *collector) memory(g *gpuinfo.GPU, dev nvml.Device) {
	if c.has(symMemoryV2) {
		m, ret := dev.GetMemoryInfo_v2()
		switch {
		case ret == nvml.SUCCESS:
			g.MemTotal, g.MemUsed, g.MemFree, g.MemReserved = ptr(m.Total), ptr(m.Used), ptr(m.Free), ptr(m.Reserved)
			return
		case unsupported(ret), ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			// fall back to v1
		default:
			c.memoryFailed(g, ret)
			return
		}
	}
	m, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		c.memoryFailed(g, ret)
		return
	}
	g.MemTotal, g.MemUsed, g.MemFree = ptr(m.Total), ptr(m.Used), ptr(m.Free)
}

func (c *collector) memoryFailed(g *gpuinfo.GPU, ret nvml.Return) {
	g.MemoryState = State(ret)
	if unsupported(ret) && gpuinfo.UnifiedMemory(g.Name) {
		g.MemoryState = gpuinfo.MemoryUnified
	}
	note(g, ret, false)
}

// BusID formats the PCI bus id of nvmlDeviceGetPciInfo as nvidia-smi prints
// it ("00000000:07:00.0": 8 hex digits of domain, upper case), from BusId,
// or BusIdLegacy ("0000:07:00.0") when BusId is empty.
func BusID(p nvml.PciInfo) string {
	s := cString(p.BusId[:])
	if s == "" {
		s = cString(p.BusIdLegacy[:])
	}
	s = strings.ToUpper(s)
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) < 8 && strings.Count(s, ":") == 2 {
		s = strings.Repeat("0", 8-len(dom)) + dom + ":" + rest
	}
	return s
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// mig fills g.MIGMode (nvmlDeviceGetMigMode, current mode) and, when MIG
// is enabled, g.MIG from nvmlDeviceGetMigDeviceHandleByIndex over
// nvmlDeviceGetMaxMigDeviceCount slots. It returns the handles of g.MIG in
// the same order (nil for a MIG device whose handle failed) and whether
// every MIG device could be listed. A failure is a warning and a state: it
// never fails the GPU or the others (corpus 055).
func (c *collector) mig(g *gpuinfo.GPU, dev nvml.Device) ([]nvml.Device, bool) {
	if !c.has(symMigMode) {
		return nil, false
	}
	cur, _, ret := dev.GetMigMode()
	switch {
	case ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE:
		g.MIGMode = MIGEnabled
	case ret == nvml.SUCCESS:
		g.MIGMode = MIGDisabled
		return nil, false
	case unsupported(ret):
		return nil, false
	default:
		note(g, ret, false)
		c.gpuWarn(ret, "gpu %d: mig mode: %s", g.Index, ret.Error())
		return nil, false
	}
	g.MIG = []gpuinfo.MIG{}
	if !c.has(symMaxMigCount) || !c.has(symMigHandleByIx) {
		c.warn("gpu %d: mig is enabled but this driver cannot list mig devices", g.Index)
		return nil, false
	}
	slots, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		note(g, ret, false)
		c.gpuWarn(ret, "gpu %d: mig device count: %s", g.Index, ret.Error())
		return nil, false
	}
	var handles []nvml.Device
	listed := true
	for slot := 0; slot < slots; slot++ {
		md, ret := dev.GetMigDeviceHandleByIndex(slot)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		m := gpuinfo.MIG{Index: len(g.MIG)}
		if ret != nvml.SUCCESS {
			note(g, ret, false)
			c.gpuWarn(ret, "gpu %d: mig device %d: %s", g.Index, m.Index, ret.Error())
			m.MemoryState, listed = State(ret), false
			g.MIG, handles = append(g.MIG, m), append(handles, nil)
			continue
		}
		if uuid, ret := md.GetUUID(); ret == nvml.SUCCESS {
			m.UUID = normUUID(uuid)
		} else {
			note(g, ret, false)
			c.gpuWarn(ret, "gpu %d: mig device %d: uuid: %s", g.Index, m.Index, ret.Error())
		}
		if name, ret := md.GetName(); ret == nvml.SUCCESS {
			m.Profile = MIGProfile(name)
		} else {
			note(g, ret, false)
		}
		if mem, ret := md.GetMemoryInfo(); ret == nvml.SUCCESS {
			m.MemTotal, m.MemUsed, m.MemFree = ptr(mem.Total), ptr(mem.Used), ptr(mem.Free)
		} else {
			m.MemoryState = State(ret)
			note(g, ret, false)
		}
		g.MIG, handles = append(g.MIG, m), append(handles, md)
	}
	return handles, listed
}

// MIGProfile takes the profile from a MIG device's nvmlDeviceGetName
// ("NVIDIA A100-SXM4-40GB MIG 1g.5gb" → "1g.5gb"); "" when the name holds
// none.
func MIGProfile(name string) string {
	i := strings.LastIndex(name, "MIG ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(name[i+len("MIG "):])
}

// migProcs reads the compute processes of each MIG device of g
// (nvmlDeviceGetComputeRunningProcesses on the MIG handle), tagged with the
// MIG device's UUID. When a MIG device cannot be listed or read, it asks
// the whole GPU instead (the aggregate list, which needs more privileges)
// and tags each record with the MIG device whose GPU and compute instance
// ids (nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId) it
// names, or the GPU's UUID. The list is known when either way worked.
func (c *collector) migProcs(g *gpuinfo.GPU, dev nvml.Device, handles []nvml.Device, listed bool) rawProcs {
	raw := rawProcs{ok: listed}
	why := "not all listed"
	for n, md := range handles {
		if md == nil {
			raw.ok = false
			continue
		}
		recs, ret := md.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			raw.ok, why = false, ret.Error()
			continue
		}
		for _, r := range recs {
			raw.recs = append(raw.recs, rawProc{info: r, uuid: orUUID(g.MIG[n].UUID, g.UUID), limit: orLimit(g.MIG[n].MemTotal, g.MemTotal)})
		}
	}
	if raw.ok {
		return raw
	}
	recs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		c.gpuWarn(ret, "gpu %d: compute processes: mig devices: %s; whole gpu: %s", g.Index, why, ret.Error())
		return rawProcs{}
	}
	type instance struct{ gi, ci int }
	byInstance := map[instance]int{}
	for n, md := range handles {
		if md == nil {
			continue
		}
		gi, ret1 := md.GetGpuInstanceId()
		ci, ret2 := md.GetComputeInstanceId()
		if ret1 == nvml.SUCCESS && ret2 == nvml.SUCCESS {
			byInstance[instance{gi, ci}] = n
		}
	}
	raw = rawProcs{ok: true}
	for _, r := range recs {
		p := rawProc{info: r, uuid: g.UUID, limit: g.MemTotal}
		if n, ok := byInstance[instance{int(r.GpuInstanceId), int(r.ComputeInstanceId)}]; ok && r.GpuInstanceId != invalidID {
			p.uuid, p.limit = orUUID(g.MIG[n].UUID, g.UUID), orLimit(g.MIG[n].MemTotal, g.MemTotal)
		}
		raw.recs = append(raw.recs, p)
	}
	return raw
}

func orUUID(u, def string) string {
	if u == "" {
		return def
	}
	return u
}

func orLimit(l, def *uint64) *uint64 {
	if l == nil {
		return def
	}
	return l
}

// processes checks every GPU's records (Bogus); if any GPU's are
// impossible, all are dropped and the document says so (ProcsBogus).
// Otherwise each GPU with readable lists gets its processes, enriched from
// ProcInfo and sorted by pid.
func (c *collector) processes(raws []rawProcs) {
	for i, raw := range raws {
		infos := make([]nvml.ProcessInfo, len(raw.recs))
		for j, r := range raw.recs {
			infos[j] = r.info
		}
		if why := Bogus(infos, c.doc.GPUs[i].MIGMode == MIGEnabled, raw.limits()); why != "" {
			c.doc.ProcsBogus = true
			g := c.doc.GPUs[i]
			c.warn("gpu %d (%s): NVML's process records are impossible (%s): processes from NVML dropped on all GPUs", g.Index, g.UUID, why)
		}
	}
	if c.doc.ProcsBogus {
		for i := range c.doc.GPUs {
			c.doc.GPUs[i].Procs, c.doc.GPUs[i].ProcsKnown = []gpuinfo.Proc{}, false
		}
		return
	}
	for i, raw := range raws {
		g := &c.doc.GPUs[i]
		if !raw.ok {
			continue
		}
		g.ProcsKnown = true
		for _, r := range raw.recs {
			g.Procs = append(g.Procs, c.proc(r))
		}
		sort.SliceStable(g.Procs, func(a, b int) bool {
			if g.Procs[a].PID != g.Procs[b].PID {
				return g.Procs[a].PID < g.Procs[b].PID
			}
			return g.Procs[a].GPUUUID < g.Procs[b].GPUUUID
		})
	}
}

func (r rawProcs) limits() []*uint64 {
	l := make([]*uint64, len(r.recs))
	for i, p := range r.recs {
		l[i] = p.limit
	}
	return l
}

// proc turns one record into a Proc: memory from NVML, the rest from
// ProcInfo, the name from nvmlSystemGetProcessName only when ProcInfo has
// none.
func (c *collector) proc(r rawProc) gpuinfo.Proc {
	pid := int(r.info.Pid)
	p := gpuinfo.Proc{PID: pid, GPUUUID: r.uuid}
	if r.info.UsedGpuMemory != notAvailable {
		p.UsedBytes = ptr(r.info.UsedGpuMemory)
	}
	l, asked := c.seen[pid]
	if !asked {
		if c.procs != nil {
			l.d, l.ok = c.procs.Lookup(pid)
		}
		if l.d.Name == "" {
			if name, ret := c.lib.SystemGetProcessName(pid); ret == nvml.SUCCESS {
				l.d.Name = name
			}
		}
		c.seen[pid] = l
	}
	d := l.d
	p.Name, p.UID, p.User, p.SessionID, p.StartTime = d.Name, d.UID, d.User, d.SessionID, d.StartTicks
	p.JobID, p.ClusterID, p.Attempt, p.EnvRead = d.JobID, d.ClusterID, d.Attempt, d.EnvRead
	return p
}

// notAvailable is NVML_VALUE_NOT_AVAILABLE in an unsigned long long
// (usedGpuMemory under WDDM, or when the driver cannot say).
const notAvailable = ^uint64(0)

// Linux limits: no pid is above PID_MAX_LIMIT (4194304 on 64-bit).
const pidMaxLimit = 1 << 22

// invalidID is NVML's "not valid" for pids and GPU/compute instance ids.
const invalidID = 0xFFFFFFFF

// Bogus says why one GPU's nvmlDeviceGetComputeRunningProcesses records
// cannot be real, or "" when they can: pid 0 or 0xFFFFFFFF (corpus 052),
// a pid above Linux's PID_MAX_LIMIT, a pid equal to another record's
// UsedGpuMemory (struct stride mismatch, corpus 051), a GPU or compute
// instance id other than 0 or 0xFFFFFFFF while MIG is off, or more memory
// used than the device has. limits holds each record's device memory total
// in bytes (nil: unknown); it may be shorter than recs.
func Bogus(recs []nvml.ProcessInfo, migEnabled bool, limits []*uint64) string {
	for i, r := range recs {
		switch {
		case r.Pid == 0:
			return "pid 0"
		case r.Pid == invalidID:
			return "pid 4294967295 (0xFFFFFFFF, not a pid)"
		case r.Pid > pidMaxLimit:
			return fmt.Sprintf("pid %d above the kernel's limit", r.Pid)
		}
		for j, o := range recs {
			if j != i && uint64(r.Pid) == o.UsedGpuMemory {
				return fmt.Sprintf("pid %d equals another record's used memory", r.Pid)
			}
		}
		if !migEnabled && r.GpuInstanceId != 0 && r.GpuInstanceId != invalidID {
			return fmt.Sprintf("pid %d has gpu instance id %d while MIG is off", r.Pid, r.GpuInstanceId)
		}
		if !migEnabled && r.ComputeInstanceId != 0 && r.ComputeInstanceId != invalidID {
			return fmt.Sprintf("pid %d has compute instance id %d while MIG is off", r.Pid, r.ComputeInstanceId)
		}
		if i < len(limits) && limits[i] != nil && r.UsedGpuMemory != notAvailable && r.UsedGpuMemory > *limits[i] {
			return fmt.Sprintf("pid %d uses %d bytes, more than the device's %d", r.Pid, r.UsedGpuMemory, *limits[i])
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
