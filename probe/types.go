package probe

import (
	"context"

	"github.com/gssh/gssh/gpuinfo"
)

// Source produces a snapshot of one host.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// The snapshot types live in gpuinfo (no dependencies, so gssh-helper stays
// small); probe re-exports them for its callers.
type (
	Snapshot  = gpuinfo.Snapshot
	GPU       = gpuinfo.GPU
	MIG       = gpuinfo.MIG
	Proc      = gpuinfo.Proc
	Health    = gpuinfo.Health
	HostState = gpuinfo.HostState
	HelperDoc = gpuinfo.HelperDoc
	HostInfo  = gpuinfo.HostInfo
)

// Host states and GPU health, as in gpuinfo.
const (
	HostOK              = gpuinfo.HostOK
	HostUnreachable     = gpuinfo.HostUnreachable
	HostTimeout         = gpuinfo.HostTimeout
	HostAuthFailed      = gpuinfo.HostAuthFailed
	HostKeyMismatch     = gpuinfo.HostKeyMismatch
	HostKeyUnknown      = gpuinfo.HostKeyUnknown
	HostConfigError     = gpuinfo.HostConfigError
	HostDriverNotLoaded = gpuinfo.HostDriverNotLoaded
	HostDriverMismatch  = gpuinfo.HostDriverMismatch
	HostNVMLNotFound    = gpuinfo.HostNVMLNotFound
	HostSMIMissing      = gpuinfo.HostSMIMissing
	HostNoDevices       = gpuinfo.HostNoDevices
	HostDegraded        = gpuinfo.HostDegraded
	HostProbeError      = gpuinfo.HostProbeError
	HostUnknownHost     = gpuinfo.HostUnknownHost
	HostConnectionLost  = gpuinfo.HostConnectionLost
	HostTransportError  = gpuinfo.HostTransportError

	HealthOK            = gpuinfo.HealthOK
	HealthLost          = gpuinfo.HealthLost
	HealthRequiresReset = gpuinfo.HealthRequiresReset
	HealthError         = gpuinfo.HealthError

	HelperSchema = gpuinfo.HelperSchema
	SourceNVML   = gpuinfo.SourceNVML
)
