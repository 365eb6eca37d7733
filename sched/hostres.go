package sched

import (
	"fmt"
	"slices"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// A host's own CPUs and memory (--cpus, --host-mem) are booked as GPU
// memory is: what a job asks for counts as taken from the moment it is
// placed, until it ends, whatever it uses. The facts come from the host's
// snapshot (Snapshot.HostInfo, read from /proc); the bookings from the
// jobs holding GPUs there (each job once, however many GPUs it holds). A
// job that asks for neither is never checked, so hosts whose facts are
// unknown take it as before.

// hostLedger is what the gssh jobs on a host book of the host itself.
type hostLedger struct {
	cpus    int          // CPUs booked by live holders
	ids     map[int]bool // the CPU ids they are pinned to
	mem     uint64       // host memory booked by live holders, bytes
	planned uint64       // of mem, what jobs this plan placed booked: not in use yet
	freed   uint64       // host memory booked by the holders taken to be gone
}

// hostLedger adds up the host bookings of n's holders, the ones in gone
// (a what-if) apart. It reads every GPU's booking, so it is only worked
// out for jobs that book host resources.
func (n *node) hostLedger(gone map[job.ID]bool) hostLedger {
	var l hostLedger
	seen := map[job.ID]bool{}
	for _, b := range n.held {
		for _, h := range b.Holders {
			if seen[h.Job] || h.CPUs == 0 && h.HostMem == 0 {
				continue
			}
			seen[h.Job] = true
			if gone[h.Job] {
				l.freed += h.HostMem
				continue
			}
			l.cpus += h.CPUs
			l.mem += h.HostMem
			if h.Planned {
				l.planned += h.HostMem
			}
			for _, id := range h.CPUIDs {
				if l.ids == nil {
					l.ids = map[int]bool{}
				}
				l.ids[id] = true
			}
		}
	}
	return l
}

// freeCPUs is how many CPUs of n a new job may book with ledger l: the
// host's CPU count less those booked, and, where the ids are known, no
// more than the ids no job is pinned to. -1 when the count is unknown.
func (n *node) freeCPUs(l hostLedger) int {
	hi := n.Snapshot.HostInfo
	if hi == nil || hi.CPUs == nil {
		return -1
	}
	free := max(*hi.CPUs-l.cpus, 0)
	if hi.CPUIDs != nil {
		unpinned := 0
		for _, id := range hi.CPUIDs {
			if !l.ids[id] {
				unpinned++
			}
		}
		free = min(free, unpinned)
	}
	return free
}

// checkCPUs: a job with --cpus N needs N of the host's CPUs that no gssh
// job there has booked (and, where the CPU ids are known, N ids no gssh
// job is pinned to). A host whose CPU count is unknown is turned down.
func checkCPUs(n *node, w *want) Reason {
	if w.CPUs <= 0 {
		return Reason{}
	}
	hi := n.Snapshot.HostInfo
	if hi == nil || hi.CPUs == nil {
		return because(CodeCPUs, "CPU count unknown (the probe could not read /proc/self/status or getconf)")
	}
	l := n.hostLedger(n.gone)
	free := n.freeCPUs(l)
	switch {
	case w.CPUs <= free:
		return Reason{}
	case w.quiet:
		return because(CodeCPUs, "")
	case w.CPUs > *hi.CPUs:
		return because(CodeCPUs, fmt.Sprintf("%d CPUs requested, the host has %d", w.CPUs, *hi.CPUs))
	}
	return because(CodeCPUs, fmt.Sprintf("%d of %d CPUs left, booked by gssh jobs", free, *hi.CPUs))
}

// checkHostMem: a job with --host-mem M fits while
//
//	M ≤ MemTotal − Σ booked by the gssh jobs there
//	M ≤ MemAvailable − Σ booked by the jobs this plan placed there
//
// The first is the ledger, as for GPU memory (no reserve: the host's own
// needs are in what it does not report available). The second is the
// live check: never more than /proc/meminfo says is available now, once
// the jobs placed in this plan (which have allocated nothing yet) take
// theirs. Unlike GPU memory, gssh cannot tell which part of the memory in
// use is its running jobs' (no per-job figure is probed), so it counts
// running jobs as having taken their bookings already: MemAvailable
// stands in for both "used now" and "foreign". In a what-if (a
// reservation: "once these jobs end") the memory booked by the jobs gone
// counts as available again, up to MemTotal. Without MemAvailable (Linux
// before 3.14) only the ledger counts; without MemTotal the host is turned
// down.
func checkHostMem(n *node, w *want) Reason {
	if w.HostMem == 0 {
		return Reason{}
	}
	hi := n.Snapshot.HostInfo
	if hi == nil || hi.MemTotal == nil {
		return because(CodeHostMem, "host memory unknown (the probe could not read /proc/meminfo)")
	}
	total := *hi.MemTotal
	l := n.hostLedger(n.gone)
	left := total - min(total, l.mem)
	avail, live := n.availNow(l)
	switch {
	case w.HostMem <= left && (!live || w.HostMem <= avail):
		return Reason{}
	case w.quiet:
		return because(CodeHostMem, "")
	case w.HostMem > total:
		return because(CodeHostMem, fmt.Sprintf("%s host memory requested, the host has %s", units.FormatMem(w.HostMem), units.FormatMem(total)))
	case w.HostMem > left:
		return because(CodeHostMem, fmt.Sprintf("%s host memory requested, %s of %s left, booked by gssh jobs", units.FormatMem(w.HostMem), units.FormatMem(left), units.FormatMem(total)))
	}
	return because(CodeHostMem, fmt.Sprintf("%s host memory requested, only %s available now", units.FormatMem(w.HostMem), units.FormatMem(avail)))
}

// availNow is the host memory available now for a new job with ledger l
// (see checkHostMem), and whether it is known.
func (n *node) availNow(l hostLedger) (uint64, bool) {
	hi := n.Snapshot.HostInfo
	if hi == nil || hi.MemAvailable == nil {
		return 0, false
	}
	avail := *hi.MemAvailable + l.freed
	if hi.MemTotal != nil {
		avail = min(avail, *hi.MemTotal)
	}
	return avail - min(avail, l.planned), true
}

// mayFitHost is mayFit's quick "no" for the host itself: w's CPUs or host
// memory cannot fit beside the bookings of the holders not in gone. Facts
// unknown say nothing here (checkCPUs and checkHostMem turn the host down).
func mayFitHost(n *node, w *want, gone map[job.ID]bool) bool {
	if w.CPUs <= 0 && w.HostMem == 0 {
		return true
	}
	l := n.hostLedger(gone)
	if free := n.freeCPUs(l); w.CPUs > 0 && free >= 0 && w.CPUs > free {
		return false
	}
	hi := n.Snapshot.HostInfo
	return w.HostMem == 0 || hi == nil || hi.MemTotal == nil || l.mem+w.HostMem <= *hi.MemTotal
}

// pinCPUs picks the CPU ids a job with w.CPUs gets on n: the lowest ids no
// gssh job there is pinned to. Nil when w asks for no CPUs or the host's
// CPU ids are unknown (the job then runs unpinned); the feasibility chain
// has made sure enough are free.
func pinCPUs(n *node, w *want) []int {
	hi := n.Snapshot.HostInfo
	if w.CPUs <= 0 || hi == nil || len(hi.CPUIDs) == 0 {
		return nil
	}
	l := n.hostLedger(n.gone)
	ids := make([]int, 0, w.CPUs)
	for _, id := range slices.Sorted(slices.Values(hi.CPUIDs)) {
		if len(ids) == w.CPUs {
			break
		}
		if !l.ids[id] {
			ids = append(ids, id)
		}
	}
	return ids
}
