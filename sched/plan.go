package sched

import (
	"fmt"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
)

// Order is how the queue is ordered before jobs are offered GPUs.
type Order string

// Orders.
const (
	OrderFIFO     Order = "fifo"     // submit order
	OrderPriority Order = "priority" // priority (0 first), then submit order
)

// Fit is how a job's GPUs are chosen among the hosts that can take it.
type Fit string

// Fits.
const (
	FitFirst Fit = "firstfit" // the first host in name order, its first GPUs in index order
)

// Backfill is what happens to the jobs behind one that does not fit now.
type Backfill string

// Backfill rules.
const (
	// BackfillNone: the first job that does not fit because what it needs
	// is taken (Code.Exhausted) blocks every job behind it (strict order):
	// nothing overtakes it. A job no host can take for other reasons
	// (drained, down, a missing label) waits without blocking.
	BackfillNone Backfill = "none"
	// BackfillSkip: the plan goes on past a job that does not fit, so a
	// small job behind it may start first (and a big job may wait long).
	BackfillSkip Backfill = "skip"
)

// Policy holds the planner's knobs. The zero value is DefaultPolicy.
type Policy struct {
	Order    Order    `json:"order"`
	Fit      Fit      `json:"placement"`
	Backfill Backfill `json:"backfill"`
}

// DefaultPolicy is what gssh does unless told otherwise: priority order,
// first fit, and jobs that fit go past those that do not.
func DefaultPolicy() Policy {
	return Policy{Order: OrderPriority, Fit: FitFirst, Backfill: BackfillSkip}
}

// withDefaults fills the knobs left empty from DefaultPolicy.
func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.Order == "" {
		p.Order = d.Order
	}
	if p.Fit == "" {
		p.Fit = d.Fit
	}
	if p.Backfill == "" {
		p.Backfill = d.Backfill
	}
	return p
}

// Check reports a knob set to a value the planner does not know, naming
// the ones it does.
func (p Policy) Check() error {
	p = p.withDefaults()
	for _, k := range []struct {
		name, got string
		known     []string
	}{
		{"order", string(p.Order), []string{string(OrderFIFO), string(OrderPriority)}},
		{"placement", string(p.Fit), []string{string(FitFirst)}},
		{"backfill", string(p.Backfill), []string{string(BackfillNone), string(BackfillSkip)}},
	} {
		known := false
		for _, v := range k.known {
			known = known || v == k.got
		}
		if !known {
			return fmt.Errorf("policy %s %q: give one of %s", k.name, k.got, strings.Join(k.known, ", "))
		}
	}
	return nil
}

// Input is everything one plan is a pure function of.
type Input struct {
	// Now is the time of the plan (walltimes and, later, fair-share usage
	// and reservations are measured against it).
	Now    time.Time
	Policy Policy
	// Hosts are every host of the inventory with its facts and its last
	// snapshot, in any order (the plan goes by name).
	Hosts []Host
	// Running are the jobs that hold GPUs now (launching or running, with
	// their placements): what they book is not offered to the queue.
	// Jobs in other states are ignored.
	Running []job.Job
	// Queue are the queued jobs, in any order.
	Queue []job.Job
	// Cluster is the state's cluster id: GPU processes that carry it (and
	// a job's GSSH_JOB_ID) are that job's. "" matches any.
	Cluster string
}

// Start is a job the plan starts, and where.
type Start struct {
	Job       job.ID        `json:"job"`
	Placement job.Placement `json:"placement"`
}

// Pending is a queued job the plan does not start, and why.
type Pending struct {
	Job    job.ID `json:"job"`
	Reason Reason `json:"reason"`
	// Rejected lists every host turned down and why, in host-name order
	// (empty for a job blocked behind another).
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Decisions is what a pass should do.
type Decisions struct {
	// Starts are the jobs to launch, in the order they were placed; each
	// was placed with the GPUs of the ones before it booked.
	Starts []Start `json:"starts"`
	// Pending holds every queued job not started, in queue order.
	Pending []Pending `json:"pending"`
}

// Plan orders in.Queue by in.Policy and offers each job, in turn, the
// GPUs that in.Running and the jobs placed before it leave, booking what
// it takes. It returns the starts and a reason for every job left queued.
// It is deterministic (hosts go by name, GPUs by index, ties by job id)
// and leaves its input as it is.
func Plan(in Input) Decisions {
	pol := in.Policy.withDefaults()
	hosts := nodes(in.Hosts, Bookings(in.Running), in.Cluster)
	byName := make(map[string]*node, len(hosts))
	for _, n := range hosts {
		byName[n.Name] = n
	}
	out := Decisions{Starts: []Start{}, Pending: []Pending{}}
	var blocker *job.Job
	// failed remembers, per request shape, the decision of a job that did
	// not fit: until the next booking (capacity only shrinks during a plan)
	// every job of that shape gets the same answer, so a queue of thousands
	// of alike jobs is not worked out thousands of times. The key holds
	// everything the checks read of a job.
	failed := map[string]decision{}
	for _, j := range ordered(in.Queue, pol.Order) {
		if blocker != nil {
			out.Pending = append(out.Pending, Pending{Job: j.ID, Reason: because(CodeBlocked,
				fmt.Sprintf("waiting behind job %d, which goes first and does not fit yet (backfill: none)", blocker.ID))})
			continue
		}
		w := wantOf(*j)
		key := w.shape()
		d, seen := failed[key]
		if !seen {
			d = place(hosts, w, pol.Fit)
		}
		if !d.ok {
			failed[key] = d
			out.Pending = append(out.Pending, Pending{Job: j.ID, Reason: d.reason, Rejected: d.rejected})
			if pol.Backfill == BackfillNone && d.exhausted {
				blocker = j
			}
			continue
		}
		byName[d.placement.Host].book(d.placement, w.holder)
		clear(failed)
		out.Starts = append(out.Starts, Start{Job: j.ID, Placement: d.placement})
	}
	return out
}

// shape is the memo key of w: everything a check reads of the job.
func (w *want) shape() string {
	return fmt.Sprintf("%s\x00%q\x00%d\x00%d", w.Host, w.Labels, w.GPUs, w.MemPerGPU)
}

// RequestOf is the placement request of a job spec.
func RequestOf(s job.Spec) Request {
	return Request{Host: s.Host, Labels: s.Labels, GPUs: s.GPUs, MemPerGPU: s.MemPerGPU}
}
