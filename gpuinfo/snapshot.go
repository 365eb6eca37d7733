// Package gpuinfo holds what gssh knows of a host's GPUs: the Snapshot a
// probe produces and the document gssh-helper prints. It has no
// dependencies beyond the standard library, so the helper (which links NVML
// through cgo) stays small and gssh's SSH code stays out of it; package
// probe re-exports these types.
//
// Facts a tool could not read are nil or a state, never a zero: a GPU that
// reports `[N/A]` memory has nil MemTotal, and a GPU that fails with `ERR!`
// is Health "error" even when it shows 0 MiB used.
package gpuinfo

// HostState says whether a host's GPUs could be read, and if not, why.
// The JSON and table output print these strings.
type HostState string

// Host states. Transport states come from sshexec.Reason; the rest from the probe.
const (
	HostOK              HostState = "ok"
	HostUnreachable     HostState = "unreachable"
	HostTimeout         HostState = "timeout"
	HostAuthFailed      HostState = "auth failed"
	HostKeyMismatch     HostState = "host key mismatch"
	HostKeyUnknown      HostState = "host key unknown"
	HostConfigError     HostState = "ssh config error"
	HostDriverNotLoaded HostState = "driver not loaded"  // nvidia-smi exit 9: cannot talk to the driver
	HostDriverMismatch  HostState = "driver mismatch"    // exit 18: Driver/library version mismatch
	HostNVMLNotFound    HostState = "nvml not found"     // libnvidia-ml.so cannot be loaded (e.g. non-interactive SSH env)
	HostSMIMissing      HostState = "nvidia-smi missing" // exit 127 / command not found
	HostNoDevices       HostState = "no devices"         // "No devices were found": a host without GPUs
	HostDegraded        HostState = "degraded"           // some GPU lost or failed: the others are listed
	HostProbeError      HostState = "probe error"        // output gssh could not understand
	HostUnknownHost     HostState = "unknown host"       // sshexec.ErrUnknownHost: not in the inventory, not resolvable
	HostConnectionLost  HostState = "connection lost"    // sshexec.ErrNoOutcome: the session ended without an exit status
	HostTransportError  HostState = "error"              // a transport failure sshexec could not classify
)

// Snapshot is one host's GPUs at one moment.
type Snapshot struct {
	Host      string    `json:"name"`
	State     HostState `json:"state"`
	Error     string    `json:"error,omitempty"`  // the text behind a state other than ok
	Source    string    `json:"source,omitempty"` // "nvidia-smi" or "nvml": who answered
	SourceWhy string    `json:"source_reason,omitempty"`
	Driver    string    `json:"driver_version,omitempty"` // a string: "418.87.01" is not a number
	CUDA      string    `json:"cuda_version,omitempty"`
	Warnings  []string  `json:"warnings"`
	GPUs      []GPU     `json:"gpus"`
	// HostInfo is the host's own CPUs and memory (/proc/meminfo,
	// /proc/self/status); nil when the probe could not read any of them.
	HostInfo *HostInfo `json:"host,omitempty"`

	// MissingFields are the nvidia-smi --query-gpu fields the host's
	// nvidia-smi does not know (an old driver: R418 has no
	// mig.mode.current), left out of its query: the facts they give are
	// unknown on every GPU of the host. Empty when none.
	MissingFields []string `json:"missing_fields,omitempty"`

	// ProcsBogus: the helper dropped NVML's process records (HelperDoc.ProcsBogus);
	// probe.Fallback fills them from nvidia-smi. Not part of the JSON output.
	ProcsBogus bool `json:"-"`
}

// Health of one GPU.
type Health string

// GPU health states. Only HealthOK GPUs are schedulable.
const (
	HealthOK            Health = "ok"
	HealthLost          Health = "lost"           // listed before or by -L / an error line, but unreadable now
	HealthRequiresReset Health = "requires reset" // `[GPU requires reset]`
	HealthError         Health = "error"          // `ERR!` or `[Unknown Error]` in an identity field
)

// GPU is one physical GPU. Memory is in bytes (nvidia-smi reports MiB; the
// parser converts). Nil means the tool could not say; see MemoryState.
type GPU struct {
	Index       int      `json:"index"`
	UUID        string   `json:"uuid"` // "" when the driver reports `GPU-` alone (corpus 020)
	BusID       string   `json:"pci_bus_id"`
	Name        string   `json:"name"`
	MemTotal    *uint64  `json:"memory_total_bytes"`              // nvidia-smi memory.total
	MemUsed     *uint64  `json:"memory_used_bytes"`               // memory.used
	MemFree     *uint64  `json:"memory_free_bytes"`               // memory.free (read, never total-used: reserved memory exists)
	MemReserved *uint64  `json:"memory_reserved_bytes,omitempty"` // NVML only (nvmlMemory_v2_t.reserved): held by the driver
	MemoryState string   `json:"memory_state,omitempty"`          // why memory is nil: "not supported", "insufficient permissions", "unified memory"...
	UtilPct     *int     `json:"utilization_pct"`                 // utilization.gpu; nil on MIG, [N/A]
	TempC       *int     `json:"temperature_c"`                   // temperature.gpu
	PowerW      *float64 `json:"power_w,omitempty"`               // NVML only: nvmlDeviceGetPowerUsage, milliwatts / 1000
	Health      Health   `json:"health"`
	HealthWhy   string   `json:"health_reason,omitempty"`
	// NVMLCode is the NVML return code behind a Health other than ok when
	// NVML answered (e.g. 15 = NVML_ERROR_GPU_IS_LOST); 0 otherwise.
	NVMLCode int    `json:"nvml_error_code,omitempty"`
	MIGMode  string `json:"mig_mode,omitempty"` // mig.mode.current: "Enabled", "Disabled", "" when not supported or unknown (Snapshot.MissingFields)
	MIG      []MIG  `json:"mig_devices,omitempty"`
	// Procs are the compute processes on this GPU. ProcsKnown is false when
	// the list could not be read (permissions): an empty list then does not
	// mean the GPU is idle.
	Procs      []Proc `json:"processes"`
	ProcsKnown bool   `json:"processes_known"`
}

// MIG is one MIG device of a GPU (from `nvidia-smi -L`, or NVML).
type MIG struct {
	Index    int     `json:"index"`              // the "Device N" number within its parent
	UUID     string  `json:"uuid"`               // "MIG-..."; what CUDA_VISIBLE_DEVICES takes
	Profile  string  `json:"profile"`            // e.g. "3g.40gb"
	MemTotal *uint64 `json:"memory_total_bytes"` // NVML only; nil from nvidia-smi -L
	MemUsed  *uint64 `json:"memory_used_bytes"`
	MemFree  *uint64 `json:"memory_free_bytes,omitempty"`
	// MemoryState says why memory is nil (e.g. "insufficient permissions", corpus 055).
	MemoryState string `json:"memory_state,omitempty"`
}

// Proc is one compute process on a GPU.
type Proc struct {
	PID       int     `json:"pid"`
	Name      string  `json:"name"`
	User      string  `json:"user,omitempty"`    // from ps (nvidia-smi path) or /proc/PID's owner (helper); "" when unknown
	UsedBytes *uint64 `json:"used_memory_bytes"` // used_gpu_memory; nil when [N/A] (Windows/WDDM)
	GPUUUID   string  `json:"gpu_uuid"`          // the GPU's UUID, or the MIG device's "MIG-..." UUID when NVML knows it
	// Helper only, where /proc/PID allows (nil / "" otherwise):
	UID       *int   `json:"uid,omitempty"`             // real uid (/proc/PID/status Uid:)
	SessionID *int   `json:"session_id,omitempty"`      // sid (/proc/PID/stat field 6)
	StartTime *int64 `json:"start_ticks,omitempty"`     // starttime in clock ticks since boot (/proc/PID/stat field 22)
	JobID     string `json:"gssh_job_id,omitempty"`     // GSSH_JOB_ID from /proc/PID/environ
	ClusterID string `json:"gssh_cluster_id,omitempty"` // GSSH_CLUSTER_ID, the state file's id
	Attempt   string `json:"gssh_attempt,omitempty"`    // GSSH_ATTEMPT
	// EnvRead: the helper could read /proc/PID/environ, so JobID,
	// ClusterID and Attempt being "" means the process carries none of
	// them. False through nvidia-smi (no environment at all), for another
	// user's process, and for one not visible in /proc (another PID
	// namespace): its GSSH_* marks are then unknown, not absent.
	EnvRead bool `json:"environ_read,omitempty"`
}

// Schedulable reports whether a job may be placed on g.
func (g GPU) Schedulable() bool { return g.Health == HealthOK }

// IdleUsedMax is the most GPU memory, in bytes, that may be in use on a
// GPU with no process on it (the driver keeps a few MiB, a CUDA context
// takes hundreds).
const IdleUsedMax = 256 << 20

// Invisible is the GPU memory, in bytes, that g's processes do not
// account for: memory.used less the used_memory of every process listed
// (nvidia-smi's memory.used and --query-compute-apps, or NVML's), when
// that is more than the driver keeps (Slack): memory some process holds
// though none is visible, such as one in a container or another PID
// namespace (NVML lists host pids, and a probe inside a container sees
// no process at all: corpus 031). It is 0 when that cannot be told: the
// process list or the memory in use unknown, or a process whose memory
// is unknown (Windows/WDDM).
func (g GPU) Invisible() uint64 {
	return Unaccounted(g.MemTotal, g.MemUsed, g.ProcsKnown, g.Procs)
}

// Slack is how much of a GPU's memory of total bytes may be in use with
// no process accounting for it: IdleUsedMax, and 1 % of the total, for
// what the driver reserves (drivers before R510 count that reserved
// memory as used: about 0.6 % of an A100's). total nil: IdleUsedMax.
func Slack(total *uint64) uint64 {
	if total == nil {
		return IdleUsedMax
	}
	return IdleUsedMax + *total/100
}

// Unaccounted is used less what procs use, when that is more than
// Slack(total) and can be told (used known, the list known, every
// process's memory known); 0 otherwise. GPU.Invisible applies it to a
// whole GPU; the planner to one MIG device and its processes.
func Unaccounted(total, used *uint64, known bool, procs []Proc) uint64 {
	if used == nil || !known {
		return 0
	}
	var sum uint64
	for _, p := range procs {
		if p.UsedBytes == nil {
			return 0
		}
		sum += *p.UsedBytes
	}
	if *used <= sum || *used-sum <= Slack(total) {
		return 0
	}
	return *used - sum
}
