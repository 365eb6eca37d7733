package sched

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/units"
)

// Validate says at submit time whether req can ever fit on hosts: an error
// for the user, not a pending reason. It turns down a GPU count of less than
// 1, an unknown host, labels no (requested) host carries, more GPUs than any
// matching host has, and more memory per GPU than any matching GPU can give
// (its total less the host's reserve), and more CPUs (--cpus) or host
// memory (--host-mem, against MemTotal) than any matching host has or
// reports; each error names the largest there is and what to give
// instead. What may pass (drain, busy GPUs, a host down) is the planner's business: a
// host whose GPUs are not known now (unreachable, degraded) could fit, so
// it lets the request pass.
func Validate(hosts []Host, req Request) error {
	if req.GPUs < 1 {
		return fmt.Errorf("%d GPUs requested: ask for at least 1", req.GPUs)
	}
	if len(hosts) == 0 {
		return errors.New("no hosts to run on: list some in the inventory")
	}
	sorted := nodes(hosts, nil, "")
	w := &want{Request: req}
	var named, cands []*node
	for _, n := range sorted {
		if checkHost(n, w).ok() {
			named = append(named, n)
		}
	}
	if len(named) == 0 {
		return fmt.Errorf("unknown host %q; the hosts are %s", req.Host, strings.Join(nodeNames(sorted), ", "))
	}
	for _, n := range named {
		if checkLabels(n, w).ok() {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return labelError(named, req)
	}
	for _, n := range cands {
		if !gpusKnown(n) {
			return nil
		}
	}
	if err := capacityError(cands, req); err != nil {
		return err
	}
	return hostCapacityError(cands, req)
}

// hostCapacityError checks --cpus and --host-mem against the CPU count and
// MemTotal of hosts whose snapshots are complete; nil when some host has
// enough of each (not necessarily the same one: the planner decides).
func hostCapacityError(cands []*node, req Request) error {
	where := "any host"
	if !auto(req.Host) {
		where = req.Host
	}
	if req.CPUs > 0 {
		most, mostHost := -1, ""
		for _, n := range cands {
			if hi := n.Snapshot.HostInfo; hi != nil && hi.CPUs != nil && *hi.CPUs > most {
				most, mostHost = *hi.CPUs, n.Name
			}
		}
		switch {
		case most < 0:
			return fmt.Errorf("--cpus %d: %s reports no CPU count (the probe reads /proc/self/status and getconf _NPROCESSORS_ONLN; see gssh gpus --json); leave --cpus out", req.CPUs, where)
		case most < req.CPUs:
			return fmt.Errorf("--cpus %d: more CPUs than %s has (the most is %d, on %s); give --cpus %d or less", req.CPUs, where, most, mostHost, most)
		}
	}
	if req.HostMem > 0 {
		var most uint64
		mostHost := ""
		for _, n := range cands {
			if hi := n.Snapshot.HostInfo; hi != nil && hi.MemTotal != nil && (mostHost == "" || *hi.MemTotal > most) {
				most, mostHost = *hi.MemTotal, n.Name
			}
		}
		switch {
		case mostHost == "":
			return fmt.Errorf("--host-mem %s: %s reports no memory size (the probe reads /proc/meminfo; see gssh gpus --json); leave --host-mem out", units.FormatMem(req.HostMem), where)
		case most < req.HostMem:
			return fmt.Errorf("--host-mem %s: more host memory than %s has (the most is %s, on %s); give --host-mem %dM or less",
				units.FormatMem(req.HostMem), where, units.FormatMem(most), mostHost, most>>20)
		}
	}
	return nil
}

// gpusKnown reports whether n's snapshot lists all its GPUs: a degraded
// host's too (a lost GPU is listed, its memory unknown: it counts toward
// the host's GPUs, not toward a memory a request could get).
func gpusKnown(n *node) bool {
	switch n.Snapshot.State {
	case gpuinfo.HostOK, gpuinfo.HostNoDevices, gpuinfo.HostDegraded:
		return true
	}
	return false
}

func labelError(named []*node, req Request) error {
	if !auto(req.Host) {
		n := named[0]
		has := "no labels"
		if len(n.Labels) > 0 {
			has = units.Plural(len(n.Labels), "label", "labels") + " " + strings.Join(n.Labels, ", ")
		}
		return fmt.Errorf("host %s %s (it has %s)", n.Name, checkLabels(n, &want{Request: req}).Text, has)
	}
	var inUse []string
	for _, n := range named {
		for _, l := range n.Labels {
			if !slices.Contains(inUse, l) {
				inUse = append(inUse, l)
			}
		}
	}
	slices.Sort(inUse)
	msg := fmt.Sprintf("no host has %s %s", units.Plural(len(req.Labels), "label", "labels"), strings.Join(req.Labels, ", "))
	if len(inUse) == 0 {
		return errors.New(msg + " (no host has any label)")
	}
	return fmt.Errorf("%s; the labels in use are %s", msg, strings.Join(inUse, ", "))
}

// capacityError checks GPU count and memory on hosts whose GPUs are all
// known; nil when one of them could take req once idle.
func capacityError(cands []*node, req Request) error {
	var (
		mostGPUs     = -1
		mostGPUsHost string
		migSkipped   bool
		bestMem      uint64 // the most each of req.GPUs units of one host can give
		bestMemHost  *node
		bestTotal    uint64
		memState     string // why memory is unknown, when no unit knows it
	)
	for _, n := range cands {
		var usable []unit
		for _, u := range n.units {
			switch {
			case u.broken != "":
			case u.mig >= 0 && req.GPUs > 1:
				migSkipped = true
			default:
				usable = append(usable, u)
			}
		}
		if len(usable) > mostGPUs {
			mostGPUs, mostGPUsHost = len(usable), n.Name
		}
		if len(usable) < req.GPUs {
			continue
		}
		if req.MemPerGPU == 0 {
			return nil
		}
		var known []unit
		for _, u := range usable {
			if u.total != nil {
				known = append(known, u)
			} else if memState == "" {
				memState = u.memState
			}
		}
		if len(known) < req.GPUs {
			continue
		}
		slices.SortStableFunc(known, func(a, b unit) int { return cmp.Compare(*b.total, *a.total) })
		kth := known[req.GPUs-1]
		if give := Usable(*kth.total, n.ReservePct); bestMemHost == nil || give > bestMem {
			bestMem, bestMemHost, bestTotal = give, n, *kth.total
		}
	}

	gpus := fmt.Sprintf("%d %s", req.GPUs, units.Plural(req.GPUs, "GPU", "GPUs"))
	if mostGPUs < req.GPUs {
		var msg string
		switch {
		case !auto(req.Host) && mostGPUs == 0:
			msg = fmt.Sprintf("%s requested, but %s has none", gpus, req.Host)
		case !auto(req.Host):
			msg = fmt.Sprintf("%s requested, but %s has %d", gpus, req.Host, mostGPUs)
		case mostGPUs == 0:
			msg = fmt.Sprintf("%s requested, but no host has any", gpus)
		default:
			msg = fmt.Sprintf("%s requested, but the most on one host is %d (%s)", gpus, mostGPUs, mostGPUsHost)
		}
		if migSkipped {
			msg += "; MIG devices take 1-GPU jobs only"
		}
		return errors.New(msg)
	}
	if bestMemHost == nil {
		why := ""
		if memState != "" {
			why = " (" + memState + ")"
		}
		return fmt.Errorf("%s per GPU requested, but no GPU reports its memory%s; leave --mem out to take whole GPUs", units.FormatMem(req.MemPerGPU), why)
	}
	if bestMem >= req.MemPerGPU {
		return nil
	}
	most := "the most a GPU can give is"
	if req.GPUs > 1 {
		most = fmt.Sprintf("the most %d GPUs of one host can each give is", req.GPUs)
	}
	return fmt.Errorf("%s per GPU requested, but %s %s (%s: %s total, %g%% reserved)",
		units.FormatMem(req.MemPerGPU), most, units.FormatMem(bestMem), bestMemHost.Name, units.FormatMem(bestTotal), max(bestMemHost.ReservePct, 0))
}

func nodeNames(ns []*node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}
