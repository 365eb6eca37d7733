package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
)

// IdleUsedMax is the most GPU memory, in bytes, a GPU whose process list
// cannot be read may show in use and still count as idle for an exclusive
// job: the driver keeps a few MiB, a CUDA context takes hundreds.
const IdleUsedMax = 256 * MiB

// Node is one host as the scheduler sees it: inventory facts, the last
// snapshot, and what gssh already booked there.
type Node struct {
	Name       string
	Labels     []string
	ReservePct float64 // GPU memory kept back, percent of each GPU's total, in [0, 100)
	Drain      bool    // no new jobs
	Snapshot   probe.Snapshot
	// Booked holds the gssh jobs already placed on each GPU, by key: a
	// GPU's Key, or a MIG device's UUID (see Bookings). Nil: nothing booked.
	Booked map[string]Booking
}

// Booking is what gssh jobs hold on one GPU (or MIG device).
type Booking struct {
	Jobs      int    // gssh jobs placed there, shared or exclusive
	Mem       uint64 // bytes booked by shared jobs
	Exclusive bool   // an exclusive gssh job holds it
}

// Request is what one job needs.
type Request struct {
	Host      string   // a host name, or "auto" (or "") for any
	Labels    []string // the host must carry all of them
	GPUs      int      // on one host, >= 1
	MemPerGPU uint64   // bytes per GPU; 0 = the GPUs are taken exclusively
}

// Decision is the outcome of Place.
type Decision struct {
	Placement job.Placement // set when OK
	OK        bool
	// Reason says why the job stays queued when !OK, host by host, e.g.
	// "gpu01: 0/8 GPUs with ≥ 40.0 GiB free (GPU 0-7: booked by other gssh
	// jobs); gpu02: drained". Hosts that fail the job's --host or --label
	// are left out of it (they are in Rejected).
	Reason   string
	Rejected []Rejection // every host turned down, in host-name order
}

// Rejection is one host turned down and why.
type Rejection struct {
	Node, Reason string
}

// Key is the Booked key of a whole GPU: its UUID, or "idx:N" when the
// driver reports none.
func Key(g probe.GPU) string {
	if g.UUID == "" {
		return "idx:" + strconv.Itoa(g.Index)
	}
	return g.UUID
}

// A nodeCheck turns a whole host down for req, or returns "".
type nodeCheck func(n *Node, req *Request) string

// A unitCheck turns one GPU or MIG device down for req, or returns "".
type unitCheck func(u *unit, req *Request, n *Node) string

// The feasibility chain, in order; the first reason found is the one shown.
// constraints are the job's own --host and --label: the hosts they turn
// down are left out of Decision.Reason.
var (
	constraints = []nodeCheck{checkHost, checkLabels}
	nodeChecks  = []nodeCheck{checkDrain, checkState}
	unitChecks  = []unitCheck{checkHealth, checkUnitShape, checkExclusive, checkShared}
)

// Place puts req on the first host, in host-name order, that has req.GPUs
// feasible GPUs, and takes that host's first feasible GPUs in index order.
// Multi-GPU jobs get whole GPUs of one host. Place does not change nodes;
// use Node.Book to account for the placement before placing the next job.
func Place(nodes []Node, req Request) Decision {
	var dec Decision
	var pending []string // "host: reason" for hosts that meet the job's constraints
	for _, n := range byName(nodes) {
		units, reason, own := feasible(n, &req)
		switch {
		case reason == "" && !dec.OK:
			dec.OK, dec.Placement = true, placement(n.Name, units)
		case reason != "":
			dec.Rejected = append(dec.Rejected, Rejection{Node: n.Name, Reason: reason})
			if !own {
				pending = append(pending, n.Name+": "+reason)
			}
		}
	}
	if !dec.OK {
		dec.Reason = pendingReason(nodes, req, pending, dec.Rejected)
	}
	return dec
}

// pendingReason joins the reasons of the hosts that meet the job's
// constraints or, when none does, says which constraint no host meets.
func pendingReason(nodes []Node, req Request, pending []string, rejected []Rejection) string {
	switch {
	case len(pending) > 0:
		return strings.Join(pending, "; ")
	case len(nodes) == 0:
		return "no hosts"
	case auto(req.Host):
		return "no host has " + plural(len(req.Labels), "label") + " " + strings.Join(req.Labels, ", ")
	}
	for _, r := range rejected {
		if r.Node == req.Host {
			return r.Node + ": " + r.Reason
		}
	}
	return "no host named " + req.Host
}

// feasible runs the chain over one host. It returns the units to use, or
// the reason the host cannot take req and whether that reason is one of the
// job's own constraints.
func feasible(n *Node, req *Request) (take []unit, reason string, own bool) {
	for _, check := range constraints {
		if r := check(n, req); r != "" {
			return nil, r, true
		}
	}
	for _, check := range nodeChecks {
		if r := check(n, req); r != "" {
			return nil, r, false
		}
	}
	all := units(n)
	if len(all) == 0 {
		return nil, "no GPUs", false
	}
	want := max(req.GPUs, 1)
	var turned []verdict
	for i := range all {
		u := &all[i]
		if r := checkUnit(u, req, n); r != "" {
			turned = append(turned, verdict{u, r})
		} else if len(take) < want {
			take = append(take, *u)
		}
	}
	if len(take) == want {
		return take, "", false
	}
	fit := len(all) - len(turned)
	head := fmt.Sprintf("%d/%d GPUs free", fit, len(all))
	if req.MemPerGPU > 0 {
		head = fmt.Sprintf("%d/%d GPUs with ≥ %s free", fit, len(all), FormatMem(req.MemPerGPU))
	}
	if want > 1 {
		head += fmt.Sprintf(", %d needed", want)
	}
	if len(turned) > 0 {
		head += " (" + summarize(turned) + ")"
	}
	return nil, head, false
}

func checkUnit(u *unit, req *Request, n *Node) string {
	for _, check := range unitChecks {
		if r := check(u, req, n); r != "" {
			return r
		}
	}
	return ""
}

// Node checks.

func checkHost(n *Node, req *Request) string {
	if auto(req.Host) || n.Name == req.Host {
		return ""
	}
	return "not the requested host " + req.Host
}

func checkLabels(n *Node, req *Request) string {
	var missing []string
	for _, l := range req.Labels {
		if !slices.Contains(n.Labels, l) && !slices.Contains(missing, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "lacks " + plural(len(missing), "label") + " " + strings.Join(missing, ", ")
}

func checkDrain(n *Node, _ *Request) string {
	if n.Drain {
		return "drained"
	}
	return ""
}

func checkState(n *Node, _ *Request) string {
	switch n.Snapshot.State {
	case probe.HostOK, probe.HostDegraded:
		return ""
	case "":
		return "not probed yet"
	}
	return string(n.Snapshot.State)
}

// unit is what one job's GPU slot can be: a whole GPU, or a MIG device.
type unit struct {
	key      string // Booked key
	id       string // for CUDA_VISIBLE_DEVICES: a UUID, or the index when there is none
	index    int    // the (parent) GPU's index
	mig      int    // the MIG device's index; -1 for a whole GPU
	gpu      *probe.GPU
	total    *uint64 // bytes; nil when unknown
	used     *uint64
	free     *uint64
	memState string // why memory is unknown
	procs    int    // processes that may be on the unit (for MIG: its own and those not attributed to one)
	broken   string // why the unit cannot take jobs as listed ("MIG device without a UUID")
}

// units lists a host's GPUs, or their MIG devices where they have some,
// in index order.
func units(n *Node) []unit {
	gpus := make([]*probe.GPU, len(n.Snapshot.GPUs))
	for i := range n.Snapshot.GPUs {
		gpus[i] = &n.Snapshot.GPUs[i]
	}
	slices.SortStableFunc(gpus, func(a, b *probe.GPU) int { return cmp.Compare(a.Index, b.Index) })
	size := len(gpus)
	for _, g := range gpus {
		size += len(g.MIG)
	}
	out := make([]unit, 0, size)
	for _, g := range gpus {
		if len(g.MIG) == 0 {
			u := unit{key: Key(*g), id: g.UUID, index: g.Index, mig: -1, gpu: g,
				total: g.MemTotal, used: g.MemUsed, free: g.MemFree, memState: g.MemoryState, procs: len(g.Procs)}
			if u.id == "" {
				u.id = strconv.Itoa(g.Index)
			}
			if g.MIGMode == "Enabled" {
				u.broken = "MIG enabled but no MIG device listed"
			}
			out = append(out, u)
			continue
		}
		migs := make([]*probe.MIG, len(g.MIG))
		for i := range g.MIG {
			migs[i] = &g.MIG[i]
		}
		slices.SortStableFunc(migs, func(a, b *probe.MIG) int { return cmp.Compare(a.Index, b.Index) })
		for _, m := range migs {
			u := unit{key: m.UUID, id: m.UUID, index: g.Index, mig: m.Index, gpu: g,
				total: m.MemTotal, used: m.MemUsed, free: m.MemFree, memState: m.MemoryState}
			if m.UUID == "" {
				u.broken = "MIG device without a UUID"
			}
			for _, p := range g.Procs {
				if p.GPUUUID == m.UUID || !slices.ContainsFunc(g.MIG, func(o probe.MIG) bool { return o.UUID != "" && o.UUID == p.GPUUUID }) {
					u.procs++
				}
			}
			out = append(out, u)
		}
	}
	return out
}

// Unit checks.

func checkHealth(u *unit, _ *Request, _ *Node) string {
	switch h := u.gpu.Health; {
	case u.gpu.Schedulable():
		return ""
	case h == probe.HealthError:
		return "in error state"
	case h == "":
		return "health unknown"
	default:
		return string(h)
	}
}

func checkUnitShape(u *unit, req *Request, _ *Node) string {
	switch {
	case u.broken != "":
		return u.broken
	case u.mig >= 0 && req.GPUs > 1:
		return "MIG device (a job sees only one: ask for 1 GPU)"
	}
	return ""
}

// checkExclusive: an exclusive job needs a unit nothing else uses.
func checkExclusive(u *unit, req *Request, n *Node) string {
	if req.MemPerGPU > 0 {
		return ""
	}
	b := n.Booked[u.key]
	switch {
	case b.Exclusive || b.Jobs > 0 || b.Mem > 0:
		return "in use by gssh jobs"
	case u.procs > 0:
		return "in use by other processes"
	case u.gpu.ProcsKnown:
		return ""
	case u.used == nil:
		return "processes and memory unreadable"
	case *u.used > IdleUsedMax:
		return "memory in use, processes unreadable"
	}
	return ""
}

// checkShared: a shared job fits while the memory booked on the unit plus
// its own stays within the unit's usable memory (total less the host's
// reserve) and within the memory free right now.
func checkShared(u *unit, req *Request, n *Node) string {
	if req.MemPerGPU == 0 {
		return ""
	}
	b := n.Booked[u.key]
	switch {
	case b.Exclusive:
		return "held by an exclusive gssh job"
	case u.total == nil || u.free == nil:
		if u.memState != "" {
			return "memory unknown (" + u.memState + ")"
		}
		return "memory unknown"
	}
	usable := Usable(*u.total, n.ReservePct)
	switch {
	case req.MemPerGPU > usable:
		return "only " + FormatMem(usable) + " usable"
	case b.Mem > usable-req.MemPerGPU:
		return "booked by other gssh jobs"
	case req.MemPerGPU > *u.free:
		return "not enough memory free now"
	}
	return ""
}

// Usable is the memory, in bytes, gssh may book on a GPU of total bytes
// on a host that keeps reservePct percent back.
func Usable(total uint64, reservePct float64) uint64 {
	switch {
	case reservePct <= 0:
		return total
	case reservePct >= 100:
		return 0
	}
	return uint64(float64(total) * (1 - reservePct/100))
}

// Bookings sums what active (launching or running) jobs hold, by host and
// then GPU key: each host's map is its Node.Booked.
func Bookings(jobs []job.Job) map[string]map[string]Booking {
	out := map[string]map[string]Booking{}
	for _, j := range jobs {
		if !j.State.Active() || j.Placement.Host == "" {
			continue
		}
		if out[j.Placement.Host] == nil {
			out[j.Placement.Host] = map[string]Booking{}
		}
		book(out[j.Placement.Host], j.Placement, j.Spec.MemPerGPU)
	}
	return out
}

// book adds one job at p (memPerGPU bytes per GPU, 0 = exclusive) to
// booked and returns the keys of its GPUs.
func book(booked map[string]Booking, p job.Placement, memPerGPU uint64) []string {
	keys := make([]string, len(p.GPUs))
	for i, id := range p.GPUs {
		keys[i] = id
		if i < len(p.Indexes) && id == strconv.Itoa(p.Indexes[i]) {
			keys[i] = "idx:" + id // a GPU without UUID goes by index
		}
		b := booked[keys[i]]
		b.Jobs++
		b.Mem += memPerGPU
		b.Exclusive = b.Exclusive || memPerGPU == 0
		booked[keys[i]] = b
	}
	return keys
}

// Book records a job just placed at p (memPerGPU bytes per GPU, 0 =
// exclusive) in n.Booked, and lowers the live free memory of its GPUs by
// what a shared job booked: the job has not allocated it yet, and the next
// Place of the same pass must not count it as free. It copies what it
// changes, so maps and snapshots the caller shares stay as they were.
// (Jobs already running are counted by Bookings instead: their memory is
// in the snapshot.)
func (n *Node) Book(p job.Placement, memPerGPU uint64) {
	booked := make(map[string]Booking, len(n.Booked)+len(p.GPUs))
	for k, v := range n.Booked {
		booked[k] = v
	}
	keys := book(booked, p, memPerGPU)
	gpus := slices.Clone(n.Snapshot.GPUs)
	if memPerGPU > 0 {
		for _, key := range keys {
			lowerFree(gpus, key, memPerGPU)
		}
	}
	n.Booked, n.Snapshot.GPUs = booked, gpus
}

// lowerFree takes mem bytes off the free memory of the GPU or MIG device
// with Booked key key, copying what it changes.
func lowerFree(gpus []probe.GPU, key string, mem uint64) {
	less := func(free *uint64) *uint64 {
		if free == nil {
			return nil
		}
		v := *free - min(*free, mem)
		return &v
	}
	for i := range gpus {
		g := &gpus[i]
		if Key(*g) == key {
			g.MemFree = less(g.MemFree)
			return
		}
		for j, m := range g.MIG {
			if m.UUID != "" && m.UUID == key {
				g.MIG = slices.Clone(g.MIG)
				g.MIG[j].MemFree = less(m.MemFree)
				return
			}
		}
	}
}

// verdict is one unit turned down and why.
type verdict struct {
	u   *unit
	why string
}

// summarize groups turned-down units by reason, in order of first
// appearance: "GPU 0-3: in use by gssh jobs; GPU 5, GPU 6 MIG 1: lost".
func summarize(vs []verdict) string {
	var order []string
	groups := map[string][]*unit{}
	for _, v := range vs {
		if _, ok := groups[v.why]; !ok {
			order = append(order, v.why)
		}
		groups[v.why] = append(groups[v.why], v.u)
	}
	parts := make([]string, len(order))
	for i, why := range order {
		parts[i] = unitNames(groups[why]) + ": " + why
	}
	return strings.Join(parts, "; ")
}

// unitNames names units for people: whole GPUs as index ranges ("GPU
// 0-3,5"), MIG devices one by one ("GPU 6 MIG 1").
func unitNames(us []*unit) string {
	var idx []int
	var names []string
	for _, u := range us {
		if u.mig < 0 {
			idx = append(idx, u.index)
		}
	}
	if len(idx) > 0 {
		names = append(names, "GPU "+ranges(idx))
	}
	for _, u := range us {
		if u.mig >= 0 {
			names = append(names, fmt.Sprintf("GPU %d MIG %d", u.index, u.mig))
		}
	}
	return strings.Join(names, ", ")
}

// ranges prints ascending ints with runs of three or more shortened:
// [0 1 2 3 5 6] → "0-3,5,6".
func ranges(xs []int) string {
	var b strings.Builder
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		switch {
		case j-i >= 2:
			fmt.Fprintf(&b, "%d-%d", xs[i], xs[j])
		case j == i+1:
			fmt.Fprintf(&b, "%d,%d", xs[i], xs[j])
		default:
			b.WriteString(strconv.Itoa(xs[i]))
		}
		i = j + 1
	}
	return b.String()
}

func placement(host string, us []unit) job.Placement {
	p := job.Placement{Host: host, GPUs: make([]string, len(us)), Indexes: make([]int, len(us))}
	for i, u := range us {
		p.GPUs[i], p.Indexes[i] = u.id, u.index
	}
	return p
}

// byName returns pointers to nodes in name order, leaving nodes as it is.
func byName(nodes []Node) []*Node {
	out := make([]*Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	slices.SortStableFunc(out, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func auto(host string) bool { return host == "" || host == "auto" }

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
