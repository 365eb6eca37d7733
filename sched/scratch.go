package sched

import (
	"slices"

	"github.com/gssh/gssh/job"
)

// scratch is what one plan's checks work in, shared by its nodes (and
// kept by a Planner for the next plan): buffers reused call after call,
// and arenas the answers that live through the plan (or, cached, through
// the next ones) are cut from.
type scratch struct {
	verdicts []Reason // feasible's, one per unit of the host it checks
	// units is where feasible's answers (the units that fit) are cut
	// from; unitsOff is how much of it is taken. Nothing is given back:
	// a full one is left to the answers cut from it.
	units    []*unit
	unitsOff int
	// shapes numbers the job shapes asked about (the node caches go by
	// the number), nshapes of them so far, from plan to plan.
	shapes  shapeMemo[int]
	nshapes int
	options []option  // tryPlace's
	cands   []cand    // tightest's
	best    []*unit   // choose's best units so far
	try     []*unit   // tightest's answer
	holds   []holding // the ledger's GPUs, as nodes makes it
	// live and gone are booking's answer in a what-if.
	live, goneHolders []Holder
	// gone, ends and trial are reserve's: the jobs taken to have ended,
	// a host's ends, and the host once they have.
	gone  map[job.ID]bool
	ends  []ending
	trial node
	// rejected is where the hosts turned down for a job are cut from
	// (rejectedOff taken): they are the plan's answer, good until the
	// next plan (see Planner).
	rejected    []Rejection
	rejectedOff int
	// reasons are pendingReason's last answer for each shape id, and what
	// it was worked out from, from plan to plan.
	reasons []reasonMemo
}

// reasonMemo is one pending reason and the rejections it joins.
type reasonMemo struct {
	rejected []Rejection
	reason   Reason
	set      bool
}

// pendingReason is pendingReason(hosts, req, rejected) for a job of
// shape id (its request is the shape's), kept from the last time it was
// asked for that shape with the same rejections: a Planner's hosts that
// changed nothing give the same verdicts (their texts the same strings,
// compared at once), so a pass that changes nothing joins no words.
func (s *scratch) pendingReason(id int, hosts []*node, req Request, rejected []Rejection) Reason {
	if id < len(s.reasons) && s.reasons[id].set && slices.Equal(s.reasons[id].rejected, rejected) {
		return s.reasons[id].reason
	}
	if id >= len(s.reasons) {
		s.reasons = append(s.reasons, make([]reasonMemo, id+1-len(s.reasons))...)
	}
	m := &s.reasons[id]
	m.reason, m.set = pendingReason(hosts, req, rejected), true
	m.rejected = append(m.rejected[:0], rejected...)
	return m.reason
}

// reset readies s for a new plan.
func (s *scratch) reset() {
	s.rejectedOff = 0
}

// shape is the number of job shape k, from 0 up.
func (s *scratch) shape(k shape) int {
	if id, ok := s.shapes.get(k); ok {
		return id
	}
	id := s.nshapes
	s.nshapes++
	s.shapes.put(k, id)
	return id
}

// takeUnits returns an empty slice of capacity n cut from s.units, its
// own for good.
func (s *scratch) takeUnits(n int) []*unit {
	if len(s.units)-s.unitsOff < n {
		s.units, s.unitsOff = make([]*unit, max(n, 2*len(s.units), 256)), 0
	}
	out := s.units[s.unitsOff : s.unitsOff : s.unitsOff+n]
	s.unitsOff += n
	return out
}

// rejections returns an empty slice of capacity n cut from s.rejected,
// for the answer of one plan: keep the part used with keepRejections.
func (s *scratch) rejections(n int) []Rejection {
	if len(s.rejected)-s.rejectedOff < n {
		// The full one is left to the answers cut from it; the next
		// plan starts over in the new one.
		s.rejected, s.rejectedOff = make([]Rejection, max(n, 2*len(s.rejected))), 0
	}
	return s.rejected[s.rejectedOff : s.rejectedOff : s.rejectedOff+n]
}

// keepRejections takes the first len(rs) of the slice rejections last
// returned, and returns them capped: an append to them copies.
func (s *scratch) keepRejections(rs []Rejection) []Rejection {
	if len(rs) == 0 {
		return nil
	}
	s.rejectedOff += len(rs)
	return rs[:len(rs):len(rs)]
}
