package sched

import "github.com/gssh/gssh/job"

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
