package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Request is what one job needs.
type Request struct {
	Host      string   // a host name, or "auto" (or "") for any
	Labels    []string // the host must carry all of them
	GPUs      int      // on one host, >= 1
	MemPerGPU uint64   // bytes per GPU; 0 = the GPUs are taken exclusively
	CPUs      int      // host CPUs to book (--cpus); 0 = none
	HostMem   uint64   // host memory to book, bytes (--host-mem); 0 = none
}

// want is one job as the checks see it: what it asks for and who it is
// (policies such as per-user caps, reservations and preemption decide on
// the job, not only on its shape).
type want struct {
	Request
	job    job.ID
	holder Holder
	ends   time.Time // now + the job's walltime (or the backfill estimate)
	// wall is the walltime the job is held to (its --timeout, else the
	// policy's default_timeout; 0: none): a drain ahead takes only jobs
	// that end by its start (checkDrain).
	wall time.Duration
	// windowed: some host's drain is still ahead in this plan, so wall
	// is part of the job's shape.
	windowed bool
	// quiet: only codes are wanted, not the words (a first try, which
	// most jobs pass); explain: the job is Input.Explain; terse:
	// Input.Terse, so a job that fits nowhere gets no words either.
	quiet, explain, terse bool
	inTime                int32 // see shape
}

func wantOf(j job.Job) *want {
	return &want{Request: RequestOf(j.Spec), job: j.ID, holder: HolderOf(j)}
}

// A hostCheck turns a whole host down for w, or returns a zero Reason.
type hostCheck func(n *node, w *want) Reason

// A unitCheck turns one GPU or MIG device down for w, or returns a zero
// Reason.
type unitCheck func(u *unit, w *want, n *node) Reason

// The feasibility chain, in order; the first reason found is the one
// shown. constraints are the job's own --host and --label (codes CodeHost
// and CodeLabel): the hosts they turn down are left out of a pending
// reason. Unit checks come in two kinds, as Nomad's do: eligibility, from
// the unit itself (health, shape), and availability, from what holds it
// now (the ledger and the live free memory).
var (
	constraints  = []hostCheck{checkHost, checkLabels}
	hostChecks   = []hostCheck{checkDrain, checkState, checkCPUs, checkHostMem}
	eligibility  = []unitCheck{checkHealth, checkUnitShape}
	availability = []unitCheck{checkExclusive, checkShared, checkReserved}
)

// feasible runs the chain over one host: it returns every unit of n that
// could take one of w's GPUs, in index order, or the reason n cannot take
// w.
func feasible(n *node, w *want) ([]*unit, Reason) {
	for _, check := range constraints {
		if r := check(n, w); !r.ok() {
			return nil, r
		}
	}
	for _, check := range hostChecks {
		if r := check(n, w); !r.ok() {
			return nil, r
		}
	}
	all := n.units
	if len(all) == 0 {
		return nil, because(CodeNoGPUs, "no GPUs")
	}
	need := max(w.GPUs, 1)
	// One look at each unit; the verdicts go to the plan's scratch, so
	// that only a host that fits (its units) or not (its reason) allocates.
	if n.scratch == nil {
		n.scratch = new(scratch)
	}
	s := n.scratch
	s.verdicts = slices.Grow(s.verdicts[:0], len(all))[:len(all)]
	verdicts := s.verdicts
	fits := 0
	for i := range all {
		verdicts[i] = checkUnit(&all[i], w, n)
		if verdicts[i].ok() {
			fits++
		}
	}
	if fits >= need {
		fit := s.takeUnits(fits)
		for i := range all {
			if verdicts[i].ok() {
				fit = append(fit, &all[i])
			}
		}
		return fit, Reason{}
	}
	if w.quiet {
		code := dominantOf(len(all), func(i int) Code { return verdicts[i].Code })
		return nil, because(cmp.Or(code, CodeTooFewGPUs), "")
	}
	turned := make([]verdict, 0, len(all)-fits)
	for i := range all {
		if !verdicts[i].ok() {
			turned = append(turned, verdict{&all[i], verdicts[i]})
		}
	}
	head := fmt.Sprintf("%d/%d GPUs free", fits, len(all))
	if w.MemPerGPU > 0 {
		head = fmt.Sprintf("%d/%d GPUs with ≥ %s free", fits, len(all), units.FormatMem(w.MemPerGPU))
	}
	if need > 1 {
		head += fmt.Sprintf(", %d needed", need)
	}
	code := CodeTooFewGPUs
	if len(turned) > 0 {
		codes := make([]Code, len(turned))
		for i, v := range turned {
			codes[i] = v.why.Code
		}
		code = dominant(codes)
		head += " (" + summarize(n, turned, code) + ")"
	}
	return nil, because(code, head)
}

func checkUnit(u *unit, w *want, n *node) Reason {
	for _, check := range eligibility {
		if r := check(u, w, n); !r.ok() {
			return r
		}
	}
	for _, check := range availability {
		if r := check(u, w, n); !r.ok() {
			return r
		}
	}
	return Reason{}
}

// Host checks.

func checkHost(n *node, w *want) Reason {
	if auto(w.Host) || n.Name == w.Host {
		return Reason{}
	}
	return because(CodeHost, "not the requested host "+w.Host)
}

func checkLabels(n *node, w *want) Reason {
	var missing []string
	for _, l := range w.Labels {
		if !slices.Contains(n.Labels, l) && !slices.Contains(missing, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return Reason{}
	}
	return because(CodeLabel, "lacks "+units.Plural(len(missing), "label", "labels")+" "+strings.Join(missing, ", "))
}

func checkState(n *node, _ *want) Reason {
	switch n.Snapshot.State {
	case gpuinfo.HostOK, gpuinfo.HostDegraded:
		return Reason{}
	case "":
		return because(CodeNotProbed, "not probed yet")
	case gpuinfo.HostNoDevices:
		return because(CodeNoGPUs, string(n.Snapshot.State))
	}
	return because(CodeHostDown, string(n.Snapshot.State))
}

// Eligibility: the unit itself.

func checkHealth(u *unit, _ *want, n *node) Reason {
	switch hl := u.gpu.Health; {
	case hl == gpuinfo.HealthOK && len(n.Recovering) > 0: // Schedulable, read without copying the GPU
		if why, ok := n.Recovering[u.index]; ok {
			return because(CodeUnhealthy, why)
		}
		return Reason{}
	case hl == gpuinfo.HealthOK:
		return Reason{}
	case hl == gpuinfo.HealthError:
		return because(CodeUnhealthy, "in error state")
	case hl == "":
		return because(CodeUnhealthy, "health unknown")
	default:
		return because(CodeUnhealthy, string(hl))
	}
}

func checkUnitShape(u *unit, w *want, _ *node) Reason {
	switch {
	case u.broken != "":
		return because(CodeMIG, u.broken)
	case u.mig >= 0 && w.GPUs > 1:
		return because(CodeMIG, "MIG device (a job sees only one: ask for 1 GPU)")
	}
	return Reason{}
}

// Availability: what holds the unit now.

// checkReserved: a unit reserved for a job that cannot start yet (EASY
// backfill) takes only jobs that end before the reservation begins, or
// (in a reservation's what-if, from n.now) start after it ends. Of the
// reservations in the way, the reason names the earliest.
func checkReserved(u *unit, w *want, n *node) Reason {
	var in *hold
	for i := range n.holds {
		h := &n.holds[i]
		switch {
		case !h.units[u.key], h.job == w.job, !n.now.Before(h.until), !w.ends.IsZero() && w.ends.Before(h.from):
			continue
		}
		if in == nil || h.from.Before(in.from) {
			in = h
		}
	}
	switch {
	case in == nil:
		return Reason{}
	case w.quiet:
		return because(CodeReserved, "")
	}
	return because(CodeReserved, fmt.Sprintf("reserved for job %s from %s", in.ref, in.from.UTC().Format("2006-01-02 15:04 UTC")))
}

// checkExclusive: an exclusive job needs a unit nothing else uses.
func checkExclusive(u *unit, w *want, n *node) Reason {
	if w.MemPerGPU > 0 {
		return Reason{}
	}
	b, gone := n.booking(u)
	switch {
	case b.Jobs() > 0:
		if o, ok := otherHolder(b, true); ok {
			return because(CodeOtherQueue, otherText(o))
		}
		return because(CodeNoFreeGPU, "in use by gssh jobs")
	case u.foreignProcs(b, gone, n.cluster) > 0:
		return because(CodeForeign, "in use by other processes")
	case u.invisible > 0 && len(gone) == 0:
		return because(CodeForeign, "memory held by an invisible process")
	case u.gpu.ProcsKnown:
		return Reason{}
	case u.used == nil:
		return because(CodeForeign, "processes and memory unreadable")
	case *u.used > IdleUsedMax && len(gone) == 0:
		return because(CodeForeign, "memory in use, processes unreadable")
	}
	return Reason{}
}

// checkShared: memory booked is memory taken. A shared job fits while
//
//	its request ≤ usable − Σ max(booked, used now) over the gssh jobs there − foreign
//
// where usable is the unit's total less the host's reserve, "used now" is
// what a job's own processes use on the unit (a job booked 8 GiB that has
// not allocated yet still counts 8; one that grew past its booking counts
// what it uses), and foreign is what is in use there that is no gssh
// job's (other people's processes, the driver). And it never takes more
// than is free right now once the gssh jobs there take the rest of their
// bookings.
func checkShared(u *unit, w *want, n *node) Reason {
	if w.MemPerGPU == 0 {
		return Reason{}
	}
	b, gone := n.booking(u)
	switch {
	case b.Exclusive():
		if o, ok := otherHolder(b, false); ok {
			return because(CodeOtherQueue, otherText(o))
		}
		return because(CodeNoFreeGPU, "held by an exclusive gssh job")
	case u.total == nil || u.free == nil:
		if u.memState != "" {
			return because(CodeMem, "memory unknown ("+u.memState+")")
		}
		return because(CodeMem, "memory unknown")
	}
	m := u.commitment(b, gone, n.cluster)
	usable := Usable(*u.total, n.ReservePct)
	if w.quiet && (w.MemPerGPU > usable || m.gssh+m.foreign > usable-w.MemPerGPU || w.MemPerGPU > m.free) {
		return because(CodeMem, "")
	}
	switch {
	case w.MemPerGPU > usable:
		return because(CodeMem, "only "+units.FormatMem(usable)+" usable")
	case m.gssh > usable-w.MemPerGPU:
		return because(CodeMem, fmt.Sprintf("%s of %s usable left, booked by gssh jobs", units.FormatMem(usable-min(usable, m.gssh)), units.FormatMem(usable)))
	case m.gssh+m.foreign > usable-w.MemPerGPU || w.MemPerGPU > m.free:
		text := fmt.Sprintf("only %s free now", units.FormatMem(min(usable-min(usable, m.gssh+m.foreign), m.free)))
		if u.invisible > 0 {
			text += " (" + units.FormatMem(u.invisible) + " held by an invisible process)"
		}
		return because(CodeMem, text)
	}
	return Reason{}
}

// otherHolder is b's first holder of another gssh queue: any (anyMem),
// or an exclusive one.
func otherHolder(b Booking, anyMem bool) (Holder, bool) {
	for _, h := range b.Holders {
		if h.other() && (anyMem || h.Mem == 0) {
			return h, true
		}
	}
	return Holder{}, false
}

// otherText is the words for a GPU held by h, a job of another queue.
func otherText(h Holder) string {
	return fmt.Sprintf("held by another gssh queue: cluster %s, user %s, job %d", shortQueue(h.Queue), cmp.Or(h.User, "unknown"), h.OtherID)
}

// shortQueue is the first 4 characters of a cluster id, as a short git
// hash is: enough to tell the queues of one lab apart.
func shortQueue(id string) string {
	if len(id) > 4 {
		return id[:4]
	}
	return id
}

// commitment is what a unit has promised, in bytes.
type commitment struct {
	gssh    uint64 // Σ max(booked, used now) over the gssh jobs holding it
	foreign uint64 // in use now by what is no gssh job's
	free    uint64 // free now, less what the gssh jobs there have yet to take
}

// commitment works out u's commitment with holders b (the unit's total and
// free memory are known). What the holders gone use counts as free.
func (u *unit) commitment(b Booking, gone []Holder, cluster string) commitment {
	var c commitment
	var used, pending, freed uint64
	for _, h := range b.Holders {
		mine := u.usedBy(h, cluster)
		used += mine
		c.gssh += max(h.Mem, mine)
		pending += h.Mem - min(h.Mem, mine)
	}
	for _, h := range gone {
		freed += u.usedBy(h, cluster)
	}
	inUse := *u.total - min(*u.total, *u.free)
	if u.used != nil {
		inUse = *u.used
	}
	inUse -= min(inUse, freed)
	c.foreign = inUse - min(inUse, used)
	c.free = *u.free + freed
	c.free -= min(c.free, pending)
	return c
}

// foreignProcs counts the processes that may be on u and belong to no gssh
// job holding it (live or gone).
func (u *unit) foreignProcs(live Booking, gone []Holder, cluster string) int {
	n := u.procs
	for _, p := range u.own {
		if slices.ContainsFunc(live.Holders, func(h Holder) bool { return owns(p, h, cluster) }) ||
			slices.ContainsFunc(gone, func(h Holder) bool { return owns(p, h, cluster) }) {
			n--
		}
	}
	return max(n, 0)
}
