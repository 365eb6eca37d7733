package sched

import (
	"cmp"
	"slices"

	"github.com/gssh/gssh/job"
)

// option is a host that can take a job, with every unit that fits.
type option struct {
	host  *node
	units []*unit // in index order; at least as many as the job needs
}

// choose picks, among the feasible options (in host-name order), the
// host and GPUs a job gets under fit.
//
// FitFirst takes the first host in name order and its first units in
// index order: predictable.
//
// FitBest packs. A shared job (MemPerGPU > 0) takes, on each host, the
// units with the least memory left after it, and the host where those
// leave least in all: large requests still find room later. An exclusive
// job takes the smallest free units (by memory: it takes them whole, so
// the larger GPUs stay for the jobs that need their memory), then the
// host whose free units fit it most tightly (a 1-GPU job does not break
// up the only host with 4 free GPUs when one with a single free GPU
// exists), and its first units by index. Before either, it
// prefers units an EASY reservation holds (it may only be there because
// it ends before the reservation begins): they would idle until then, and
// the units nobody reserved stay for jobs that run longer. Ties break by
// host name, then GPU index.
func choose(fit Fit, options []option, w *want) job.Placement {
	need := max(w.GPUs, 1)
	if fit != FitBest {
		o := options[0]
		return placement(o.host, o.units[:need], w)
	}
	s := options[0].host.scratch
	if s == nil {
		s = new(scratch)
	}
	best := -1
	var bestFit packing
	for i, o := range options {
		fit := tightest(s, o, w, need)
		if best < 0 || fit.before(bestFit) {
			best, bestFit = i, fit
			s.best, s.try = s.try, s.best // s.best: the units just found
		}
	}
	return placement(options[best].host, s.best, w)
}

// packing is how well a job packs on a host's units: the lower, the
// tighter (see tightest).
type packing struct {
	open  int    // unreserved units taken
	whole uint64 // bytes of the units taken whole (an exclusive job)
	left  uint64 // bytes left on the units (a shared job), or units left free on the host (an exclusive one)
}

func (p packing) before(q packing) bool {
	return cmp.Or(cmp.Compare(p.open, q.open), cmp.Compare(p.whole, q.whole), cmp.Compare(p.left, q.left)) < 0
}

// cand is a unit tightest weighs.
type cand struct {
	u    *unit
	open bool // not reserved
	left uint64
}

// tightest puts in s.try the need units of o a job w packs best on, in
// index order: reserved units first, then, for a shared job, those with
// the least memory left after w, and for an exclusive one the smallest (a
// job that takes a GPU whole leaves the larger GPUs to the jobs that
// need their memory, as Slurm admins weight small nodes to go first).
// It returns how they pack: how many are unreserved, the memory of the
// units an exclusive job takes, and what is left (for a shared job the
// bytes left on its units in all, for an exclusive one the host's free
// units left over).
func tightest(s *scratch, o option, w *want, need int) packing {
	cs := slices.Grow(s.cands[:0], len(o.units))[:len(o.units)]
	s.cands = cs
	for i, u := range o.units {
		cs[i] = cand{u: u, open: !o.host.isReserved(u.key)}
		switch {
		case w.MemPerGPU > 0:
			room := o.host.room(u)
			cs[i].left = room - min(room, w.MemPerGPU)
		case u.total != nil:
			cs[i].left = *u.total
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.open != b.open {
			if a.open {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.left, b.left)
	})
	var p packing
	us := slices.Grow(s.try[:0], need)[:need]
	s.try = us
	for i := range need {
		us[i] = cs[i].u
		if w.MemPerGPU > 0 {
			p.left += cs[i].left
		} else {
			p.whole += cs[i].left
		}
		if cs[i].open {
			p.open++
		}
	}
	if w.MemPerGPU == 0 {
		p.left = uint64(len(o.units) - need)
	}
	slices.SortFunc(us, func(a, b *unit) int { return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.mig, b.mig)) })
	return p
}

// room is the memory, in bytes, a new shared job may book on u of n now
// (its usable memory less what is committed there, within what is free).
func (n *node) room(u *unit) uint64 {
	if u.total == nil || u.free == nil {
		return 0
	}
	b, gone := n.booking(u)
	c := u.commitment(b, gone, n.cluster)
	usable := Usable(*u.total, n.ReservePct)
	return min(usable-min(usable, c.gssh+c.foreign), c.free)
}

func placement(n *node, us []*unit, w *want) job.Placement {
	p := job.Placement{Host: n.Name, GPUs: make([]string, len(us)), Indexes: make([]int, len(us))}
	for i, u := range us {
		p.GPUs[i], p.Indexes[i] = u.id, u.index
		p.Share += u.share(w.MemPerGPU)
		if u.mig >= 0 {
			if p.MIG == nil {
				p.MIG = slices.Repeat([]int{-1}, len(us))
			}
			p.MIG[i] = u.mig
		}
	}
	p.CPUs = pinCPUs(n, w)
	return p
}

// share is the part of a whole GPU a job takes on u: 1 for a whole GPU
// taken exclusively, a MIG device's part of its GPU's memory, or mem
// (a --mem job) over the GPU's total memory.
func (u *unit) share(mem uint64) float64 {
	whole := u.gpu.MemTotal
	switch {
	case mem > 0 && whole != nil && *whole > 0:
		return min(float64(mem)/float64(*whole), 1)
	case mem > 0 && u.total != nil && *u.total > 0:
		return min(float64(mem)/float64(*u.total), 1)
	case u.mig >= 0 && whole != nil && u.total != nil && *whole > 0:
		return float64(*u.total) / float64(*whole)
	}
	return 1
}

// decision is where one job goes, or why it cannot go anywhere now.
type decision struct {
	placement job.Placement // set when ok
	ok        bool
	reason    Reason      // why not, when !ok
	rejected  []Rejection // every host turned down, in host-name order
	// exhausted: some host that meets the job's constraints turned it
	// down only for what is taken now (Code.Exhausted).
	exhausted bool
}

// place puts w on one of hosts (in name order) under fit, without booking
// it. The words of why hosts turned the job down are worked out only when
// it fits nowhere and words are wanted (not Terse), or when w is to be
// explained: a job that fits needs none, and most of a plan's work is
// jobs that fit.
func place(hosts []*node, w *want, fit Fit) decision {
	var s *scratch
	if len(hosts) > 0 {
		s = hosts[0].scratch
	}
	if s == nil {
		s = new(scratch)
	}
	w.quiet = !w.explain
	d := tryPlace(s, hosts, w, fit)
	w.quiet = false
	return d
}

// tryPlace is place: the hosts' verdicts on w as it is (quiet or not),
// and when none takes it and words are wanted but w is quiet, each
// host's verdict again with words.
func tryPlace(s *scratch, hosts []*node, w *want, fit Fit) decision {
	var d decision
	id := s.shape(w.shape())
	options := s.options[:0]
	record := !w.quiet || w.terse // rejections kept: with words, or (terse) codes
	if record {
		d.rejected = s.rejections(len(hosts))
	}
	for _, n := range hosts {
		us, why := n.feasibleCached(w, id)
		if !why.ok() {
			if record {
				d.rejected = append(d.rejected, Rejection{Host: n.Name, Reason: why})
			}
			d.exhausted = d.exhausted || why.Code.Exhausted()
			continue
		}
		options = append(options, option{n, us})
	}
	s.options = options[:0]
	if len(options) > 0 {
		d.ok, d.placement = true, choose(fit, options, w)
		if w.explain {
			d.rejected = s.keepRejections(d.rejected)
		} else {
			d.rejected = nil // not shown: its room is taken again
		}
		return d
	}
	if w.quiet && !w.terse {
		// Every host turned w down: now the words, host by host (their
		// codes are the ones already found).
		w.quiet = false
		loud := s.shape(w.shape())
		id = loud
		d.rejected = s.rejections(len(hosts))
		for _, n := range hosts {
			_, why := n.feasibleCached(w, loud)
			d.rejected = append(d.rejected, Rejection{Host: n.Name, Reason: why})
		}
		w.quiet = true
	}
	d.rejected = s.keepRejections(d.rejected)
	switch {
	case !w.quiet || !w.terse:
		d.reason = s.pendingReason(id, hosts, w.Request, d.rejected)
	default:
		d.reason = because(pendingCode(hosts, w.Request, d.rejected), "")
	}
	return d
}
