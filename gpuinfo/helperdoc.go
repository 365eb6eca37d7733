package gpuinfo

// HelperSchema names the version of the document gssh-helper prints. gssh
// refuses a document of another version (the helper and gssh are built
// together, so a mismatch means a stale helper: it is pushed again).
const HelperSchema = "gssh.helper/v1"

// SourceNVML is Snapshot.Source when the helper answered through NVML.
const SourceNVML = "nvml"

// HelperDoc is the one JSON document gssh-helper prints on stdout, whatever
// happened: NVML failures are data in it, and the helper exits 0 unless it
// could not even write the document.
type HelperDoc struct {
	Schema string `json:"schema"` // HelperSchema
	// SHA256 is the hex sha256 of the helper's own executable
	// (/proc/self/exe), so gssh can tell a damaged or stale copy.
	SHA256 string `json:"helper_sha256"`
	// InitError is set when nvmlInit failed; InitCode is NVML's return code
	// (e.g. 12 = NVML_ERROR_LIBRARY_NOT_FOUND: no driver, or
	// libnvidia-ml.so.1 not loadable). Nothing else is filled then.
	InitError string `json:"init_error,omitempty"`
	InitCode  int    `json:"init_code,omitempty"`

	Driver string `json:"driver_version,omitempty"` // nvmlSystemGetDriverVersion
	CUDA   string `json:"cuda_version,omitempty"`   // nvmlSystemGetCudaDriverVersion_v2, as "12.2"
	NVML   string `json:"nvml_version,omitempty"`   // nvmlSystemGetNVMLVersion

	// GPUs in NVML index order; a GPU whose handle or UUID could not be read
	// is still listed at its index with Health lost/error and NVMLCode.
	GPUs []GPU `json:"gpus"`
	// ProcsBogus is set when NVML's process records were impossible (pid
	// 0 or 0xFFFFFFFF, a pid equal to another record's memory, corpus
	// 051-052): the helper then drops them all, every GPU's ProcsKnown is
	// false, and gssh takes the processes from nvidia-smi instead.
	ProcsBogus bool     `json:"processes_bogus,omitempty"`
	Warnings   []string `json:"warnings"`

	// HostInfo is the host's CPUs and memory, read by the helper from
	// /proc/meminfo and /proc/self/status (ParseHostInfo); nil when none
	// could be read. Filled whether or not NVML answered.
	HostInfo *HostInfo `json:"host,omitempty"`
}
