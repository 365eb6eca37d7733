package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
)

// Request is what one job needs.
type Request struct {
	Host      string   // a host name, or "auto" (or "") for any
	Labels    []string // the host must carry all of them
	GPUs      int      // on one host, >= 1
	MemPerGPU uint64   // bytes per GPU; 0 = the GPUs are taken exclusively
}

// A hostCheck turns a whole host down for req, or returns a zero Reason.
type hostCheck func(h *Host, req *Request) Reason

// A unitCheck turns one GPU or MIG device down for req, or returns a zero
// Reason.
type unitCheck func(u *unit, req *Request, h *Host) Reason

// The feasibility chain, in order; the first reason found is the one shown.
// constraints are the job's own --host and --label (codes CodeHost and
// CodeLabel): the hosts they turn down are left out of a pending reason.
var (
	constraints = []hostCheck{checkHost, checkLabels}
	hostChecks  = []hostCheck{checkDrain, checkState}
	unitChecks  = []unitCheck{checkHealth, checkUnitShape, checkExclusive, checkShared}
)

// feasible runs the chain over one host: it returns every unit of h that
// could take one of req's GPUs, in index order (valid until h is booked),
// or the reason h cannot take req.
func feasible(h *Host, req *Request) ([]*unit, Reason) {
	for _, check := range constraints {
		if r := check(h, req); !r.ok() {
			return nil, r
		}
	}
	for _, check := range hostChecks {
		if r := check(h, req); !r.ok() {
			return nil, r
		}
	}
	all := units(h)
	if len(all) == 0 {
		return nil, because(CodeNoGPUs, "no GPUs")
	}
	want := max(req.GPUs, 1)
	fit := make([]*unit, 0, len(all))
	var turned []verdict
	for i := range all {
		u := &all[i]
		if r := checkUnit(u, req, h); !r.ok() {
			if turned == nil {
				turned = make([]verdict, 0, len(all))
			}
			turned = append(turned, verdict{u, r})
		} else {
			fit = append(fit, u)
		}
	}
	if len(fit) >= want {
		return fit, Reason{}
	}
	head := fmt.Sprintf("%d/%d GPUs free", len(fit), len(all))
	if req.MemPerGPU > 0 {
		head = fmt.Sprintf("%d/%d GPUs with ≥ %s free", len(fit), len(all), FormatMem(req.MemPerGPU))
	}
	if want > 1 {
		head += fmt.Sprintf(", %d needed", want)
	}
	code := CodeTooFewGPUs
	if len(turned) > 0 {
		head += " (" + summarize(turned) + ")"
		codes := make([]Code, len(turned))
		for i, v := range turned {
			codes[i] = v.why.Code
		}
		code = dominant(codes)
	}
	return nil, because(code, head)
}

func checkUnit(u *unit, req *Request, h *Host) Reason {
	for _, check := range unitChecks {
		if r := check(u, req, h); !r.ok() {
			return r
		}
	}
	return Reason{}
}

// Host checks.

func checkHost(h *Host, req *Request) Reason {
	if auto(req.Host) || h.Name == req.Host {
		return Reason{}
	}
	return because(CodeHost, "not the requested host "+req.Host)
}

func checkLabels(h *Host, req *Request) Reason {
	var missing []string
	for _, l := range req.Labels {
		if !slices.Contains(h.Labels, l) && !slices.Contains(missing, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return Reason{}
	}
	return because(CodeLabel, "lacks "+plural(len(missing), "label")+" "+strings.Join(missing, ", "))
}

func checkDrain(h *Host, _ *Request) Reason {
	if h.Drain {
		return because(CodeDrained, "drained")
	}
	return Reason{}
}

func checkState(h *Host, _ *Request) Reason {
	switch h.Snapshot.State {
	case gpuinfo.HostOK, gpuinfo.HostDegraded:
		return Reason{}
	case "":
		return because(CodeNotProbed, "not probed yet")
	case gpuinfo.HostNoDevices:
		return because(CodeNoGPUs, string(h.Snapshot.State))
	}
	return because(CodeHostDown, string(h.Snapshot.State))
}

// Unit checks.

func checkHealth(u *unit, _ *Request, _ *Host) Reason {
	switch hl := u.gpu.Health; {
	case u.gpu.Schedulable():
		return Reason{}
	case hl == gpuinfo.HealthError:
		return because(CodeUnhealthy, "in error state")
	case hl == "":
		return because(CodeUnhealthy, "health unknown")
	default:
		return because(CodeUnhealthy, string(hl))
	}
}

func checkUnitShape(u *unit, req *Request, _ *Host) Reason {
	switch {
	case u.broken != "":
		return because(CodeMIG, u.broken)
	case u.mig >= 0 && req.GPUs > 1:
		return because(CodeMIG, "MIG device (a job sees only one: ask for 1 GPU)")
	}
	return Reason{}
}

// checkExclusive: an exclusive job needs a unit nothing else uses.
func checkExclusive(u *unit, req *Request, h *Host) Reason {
	if req.MemPerGPU > 0 {
		return Reason{}
	}
	busy := func(why string) Reason { return because(CodeNoFreeGPU, why) }
	switch b := h.booked[u.key]; {
	case b.Jobs() > 0:
		return busy("in use by gssh jobs")
	case u.procs > 0:
		return busy("in use by other processes")
	case u.gpu.ProcsKnown:
		return Reason{}
	case u.used == nil:
		return busy("processes and memory unreadable")
	case *u.used > IdleUsedMax:
		return busy("memory in use, processes unreadable")
	}
	return Reason{}
}

// checkShared: a shared job fits while the memory booked on the unit plus
// its own stays within the unit's usable memory (total less the host's
// reserve) and within the memory free right now.
func checkShared(u *unit, req *Request, h *Host) Reason {
	if req.MemPerGPU == 0 {
		return Reason{}
	}
	b := h.booked[u.key]
	switch {
	case b.Exclusive():
		return because(CodeNoFreeGPU, "held by an exclusive gssh job")
	case u.total == nil || u.free == nil:
		if u.memState != "" {
			return because(CodeMem, "memory unknown ("+u.memState+")")
		}
		return because(CodeMem, "memory unknown")
	}
	usable := Usable(*u.total, h.ReservePct)
	switch {
	case req.MemPerGPU > usable:
		return because(CodeMem, "only "+FormatMem(usable)+" usable")
	case b.Mem() > usable-req.MemPerGPU:
		return because(CodeMem, "booked by other gssh jobs")
	case req.MemPerGPU > *u.free:
		return because(CodeMem, "not enough memory free now")
	}
	return Reason{}
}
