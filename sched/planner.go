package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// A Planner plans as Plan does, and keeps what one plan sets up (each
// host's ledger, the verdict caches, the scratch of the checks) for the
// next, so that a caller planning pass after pass (a controller, a
// simulator's thousands of passes) does not make them afresh each time.
// A host's verdicts on the job shapes it was asked about are kept from
// one plan to the next while its facts, its units and what holds them
// are the same. A host's units are listed once per Snapshot.GPUs (or
// taken from Prepare): a caller that changes a host's GPUs in place,
// rather than giving a new slice, must Prepare it again. The zero value
// is ready to use. A Planner is not safe for concurrent use.
//
// The Decisions a Planner returns are read, not changed, and only until
// its next plan: that one reuses their Pending and its Rejected lists.
// What the caller keeps longer it copies; a Start's Placement, and every
// string, are the caller's for good.
type Planner struct {
	store  []node  // the nodes, in the order of Input.Hosts
	sorted []*node // the same, in name order
	byName map[string]*node
	// holders are the ledgers' holders, each slot's a part of one of
	// them, in turn: a plan's ledgers are compared with the last plan's.
	holders [2][]Holder
	turn    int
	pending []Pending // the last plan's Decisions.Pending
	scratch scratch
	picks   pickerBuf
}

// pendings is an empty Decisions.Pending (never nil) of room for n.
func (p *Planner) pendings(n int) []Pending {
	if p.pending == nil {
		p.pending = make([]Pending, 0, n)
	}
	p.pending = slices.Grow(p.pending[:0], n)
	return p.pending
}

// maxShapes is how many job shapes a Planner numbers before it starts
// afresh (its caches with it).
const maxShapes = 1024

// Plan is Plan(in), made with p's buffers.
func (p *Planner) Plan(in Input) Decisions { return p.plan(in, true, nil) }

// nodes is Planner.nodes, made by a Planner of its own, holders' ends
// unknown.
func nodes(hosts []Host, running []job.Job, cluster string) []*node {
	return new(Planner).nodes(hosts, running, cluster, nil, false)
}

// nodes makes the plan's view of hosts, in name order: their units
// (Prepare's, or listed now), and each host's ledger: the bookings of the
// active jobs of running, in their order, each holder expected to end at
// ends(job) (nil: unknown), then those of the host's jobs of other queues
// (Host.Others). Host names are unique (the inventory's): a running job
// is booked on the host of its placement's name. keep: the nodes may
// keep the verdicts of the last plan where nothing they read changed
// (a plan with memos and no forecast's gone). The nodes, and what they
// point to, are p's until the next call; the caller's hosts and jobs stay
// as they were.
func (p *Planner) nodes(hosts []Host, running []job.Job, cluster string, ends func(*job.Job) time.Time, keep bool) []*node {
	s := &p.scratch
	s.reset()
	if s.nshapes >= maxShapes {
		s.shapes.clear()
		s.nshapes = 0
		s.reasons = s.reasons[:0]
		for i := range p.store {
			p.store[i].cache = p.store[i].cache[:0]
		}
	}
	if cap(p.store) < len(hosts) {
		p.store = slices.Grow(p.store[:cap(p.store)], len(hosts)-cap(p.store))
	}
	p.store = p.store[:len(hosts)]
	p.sorted = slices.Grow(p.sorted[:0], len(hosts))[:len(hosts)]
	for i := range hosts {
		n := &p.store[i]
		last := n.held // the last plan's ledger, to compare
		clear(n.extra)
		*n = node{Host: &hosts[i], cluster: cluster, scratch: s, held: n.spare, spare: last, extra: n.extra, counts: n.counts, jobs: n.jobs[:0],
			version: n.version, cache: n.cache, was: n.was, reservedLast: len(n.holds) > 0, listed: n.listed}
		n.units = n.unitsOf()
		n.held = slices.Grow(n.held[:0], len(n.units))[:len(n.units)]
		clear(n.held)
		n.counts = slices.Grow(n.counts[:0], len(n.units))[:len(n.units)]
		clear(n.counts)
		p.sorted[i] = n
	}
	byName := func(a, b *node) int { return cmp.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(p.sorted, byName) {
		slices.SortStableFunc(p.sorted, byName)
	}
	if p.byName == nil {
		p.byName = make(map[string]*node, len(hosts))
	}
	clear(p.byName)
	for _, n := range p.sorted {
		p.byName[n.Name] = n
	}
	p.ledgers(running, ends)
	for _, n := range p.sorted {
		now := factsOf(n, keep)
		if !now.keep || !n.was.keep || n.reservedLast || !now.same(&n.was) || !sameLedger(n.held, n.spare) {
			n.changed() // the verdicts kept are stale
		}
		n.was = now
	}
	return p.sorted
}

// ledgers books the active jobs of running, and each node's jobs of
// other queues, on p's nodes (see nodes). Each slot's holders get a part
// of one array, as long as they fit: every GPU held is found its slot and
// counted first, then the parts are cut and the holders put in, in the
// order found. A job's holder is put once: the slots it holds alone share
// it. A booking the plan adds moves the slot's holders out (its part is
// full).
func (p *Planner) ledgers(running []job.Job, ends func(*job.Job) time.Time) {
	s := &p.scratch
	refs, jobs := s.holds[:0], 0
	var last *node // the last job's: jobs placed one after the other often share a host
	for i := range running {
		j := &running[i]
		if !j.State.Active() || j.Placement.Host == "" {
			continue
		}
		n := last
		if n == nil || n.Name != j.Placement.Host {
			if n = p.byName[j.Placement.Host]; n == nil {
				continue
			}
			last = n
		}
		jobs++
		for k := range j.Placement.GPUs {
			slot := n.slotOf(&j.Placement, k)
			n.counts[slot]++
			refs = append(refs, holding{n, slot, i})
		}
	}
	for _, n := range p.sorted {
		for k := range n.Others {
			jobs++
			pl := &n.Others[k].Job.Placement
			for g := range pl.GPUs {
				slot := n.slotOf(pl, g)
				n.counts[slot]++
				refs = append(refs, holding{n, slot, -1 - k})
			}
		}
	}
	s.holds = refs
	p.turn ^= 1
	arena := p.holders[p.turn]
	if need := jobs + len(refs); cap(arena) < need {
		arena = make([]Holder, need+need/4)
		p.holders[p.turn] = arena
	}
	arena = arena[:cap(arena)]
	off := jobs // the jobs' holders first, then the shared slots' parts
	for _, n := range p.sorted {
		for slot, c := range n.counts {
			if c > 1 {
				n.held[slot].Holders, off = arena[off:off:off+c], off+c
			}
		}
	}
	put := -1
	for i, r := range refs {
		if i == 0 || r.job != refs[i-1].job || r.n != refs[i-1].n {
			put++
			h := &arena[put]
			r.n.jobs = append(r.n.jobs, h)
			if r.job >= 0 {
				j := &running[r.job]
				*h = holderOf(j)
				if ends != nil {
					h.Ends = ends(j)
				}
			} else {
				k := -1 - r.job
				o := &r.n.Others[k]
				*h = holderOf(&o.Job)
				h.Job, h.OtherID, h.Queue = otherBase+job.ID(k), o.Job.ID, o.Queue
			}
		}
		b := &r.n.held[r.slot]
		if r.n.counts[r.slot] == 1 {
			b.Holders = arena[put : put+1 : put+1]
		} else {
			b.Holders = append(b.Holders, arena[put])
		}
	}
}

// holding is one GPU a job holds, as the ledger is made: its node, its
// slot there, and the job: its index in the running jobs, or -1-k for the
// node's Others[k].
type holding struct {
	n    *node
	slot int
	job  int
}

// facts is what the checks read of a node's host besides its units'
// GPUs and its ledger, as one plan found them: a node keeps its verdicts
// for the next plan only if they are the same then.
type facts struct {
	// keep: the plan kept verdicts at all (memos, no forecast's gone),
	// and the host has no drain by gssh drain (its window is measured
	// from the plan's time) and no GPU recovering.
	keep       bool
	name       string
	labels     []string
	reservePct float64
	drain      bool
	state      gpuinfo.HostState
	info       *gpuinfo.HostInfo
	infoVals   [3]uint64 // *CPUs, *MemTotal, *MemAvailable (0: nil)
	cpuIDs     []int
	units      *unit // the host's units, Prepare's (nil: none)
	nunits     int
	cluster    string
}

func factsOf(n *node, keep bool) facts {
	f := facts{keep: keep && n.Drained == nil && len(n.Recovering) == 0, name: n.Name, labels: n.Labels, reservePct: n.ReservePct, drain: n.Drain,
		state: n.Snapshot.State, info: n.Snapshot.HostInfo, nunits: len(n.units), cluster: n.cluster}
	if len(n.units) > 0 {
		f.units = &n.units[0]
	}
	if hi := f.info; hi != nil {
		f.cpuIDs = hi.CPUIDs
		if hi.CPUs != nil {
			f.infoVals[0] = uint64(*hi.CPUs) + 1
		}
		if hi.MemTotal != nil {
			f.infoVals[1] = *hi.MemTotal + 1
		}
		if hi.MemAvailable != nil {
			f.infoVals[2] = *hi.MemAvailable + 1
		}
	}
	return f
}

// same reports whether f and g are alike (keep aside).
func (f *facts) same(g *facts) bool {
	return f.name == g.name && slices.Equal(f.labels, g.labels) && f.reservePct == g.reservePct && f.drain == g.drain && f.state == g.state &&
		f.info == g.info && f.infoVals == g.infoVals && slices.Equal(f.cpuIDs, g.cpuIDs) && f.units == g.units && f.nunits == g.nunits && f.cluster == g.cluster
}

// sameLedger reports whether ledgers a and b hold alike: slot by slot,
// the same holders in the same order, alike in all the checks read (all
// but their ends).
func sameLedger(a, b []Booking) bool {
	if len(a) != len(b) {
		return false
	}
	var lastA, lastB *Holder // the pair last found alike: the units a job holds alone share its holder
	for i := range a {
		ha, hb := a[i].Holders, b[i].Holders
		if len(ha) != len(hb) {
			return false
		}
		for k := range ha {
			if x, y := &ha[k], &hb[k]; x != lastA || y != lastB {
				if !sameHolder(x, y) {
					return false
				}
				lastA, lastB = x, y
			}
		}
	}
	return true
}

func sameHolder(a, b *Holder) bool {
	return a.Job == b.Job && a.Mem == b.Mem && a.Planned == b.Planned && a.Session == b.Session && a.Attempt == b.Attempt &&
		a.User == b.User && a.Priority == b.Priority && a.CPUs == b.CPUs && a.HostMem == b.HostMem && a.Queue == b.Queue && a.OtherID == b.OtherID &&
		(a.Array == b.Array || a.Array != nil && b.Array != nil && *a.Array == *b.Array) && slices.Equal(a.CPUIDs, b.CPUIDs)
}
