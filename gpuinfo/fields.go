package gpuinfo

import "strings"

// Words for a value a tool could not give, used in GPU.MemoryState,
// MIG.MemoryState and warnings, the same whether nvidia-smi printed a
// bracketed sentinel or NVML returned an error code.
const (
	FieldNA            = "n/a"                      // [N/A] or N/A: not applicable here (fan on a passive card, utilization on MIG)
	FieldNotSupported  = "not supported"            // [Not Supported]: older drivers' word for the same; NVML_ERROR_NOT_SUPPORTED
	FieldNoPermission  = "insufficient permissions" // [Insufficient Permissions]; NVML_ERROR_NO_PERMISSION
	FieldUnknownError  = "unknown error"            // [Unknown Error]: NVML failed for this one field
	FieldRequiresReset = "gpu requires reset"       // [GPU requires reset]: the GPU is unusable until reset
	FieldGPULost       = "gpu is lost"              // [GPU is lost]: fell off the bus
	FieldErr           = "error"                    // ERR!: the driver could not read the field
	FieldEmpty         = "empty"                    // nothing between the commas
	MemoryUnified      = "unified memory"           // GPU.MemoryState of a GPU sharing host memory (GB10): no own VRAM to report
)

// UnifiedMemory reports whether a GPU of this name has no memory of its
// own but shares the host's (DGX Spark's GB10): nvidia-smi reports its
// memory as [N/A] and NVML as not supported; both then say MemoryUnified.
func UnifiedMemory(name string) bool { return strings.Contains(name, "GB10") }
