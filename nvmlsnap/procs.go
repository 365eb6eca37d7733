package nvmlsnap

import "github.com/gssh/gssh/procinfo"

// ProcInfo reads what the host allows about a pid: Collect asks it about
// every pid NVML reports (procinfo.NewFS reads /proc, tests use a fake).
type ProcInfo = procinfo.Source

// ProcDetails is what /proc says about one process.
type ProcDetails = procinfo.Details

// NewProcFS returns a ProcInfo that reads the proc filesystem mounted at root.
func NewProcFS(root string) ProcInfo { return procinfo.NewFS(root) }
