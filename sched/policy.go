package sched

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Order is how the queue is ordered before jobs are offered GPUs.
type Order string

// Orders.
const (
	OrderFIFO     Order = "fifo"     // submit order
	OrderPriority Order = "priority" // priority class (0 first), then submit order
	// OrderFair: priority class, then the multifactor priority
	// (fair-share, age and size, by Policy.Weights; highest first), then
	// submit order.
	OrderFair Order = "fairshare"
)

// Fit is how a job's GPUs are chosen among the hosts that can take it.
type Fit string

// Fits.
const (
	FitFirst Fit = "firstfit" // the first host in name order, its first GPUs in index order
	// FitBest packs: a shared job takes the GPUs with the least usable
	// memory left after it, an exclusive job the host whose free GPUs fit
	// it most tightly; ties by host name and GPU index.
	FitBest Fit = "bestfit"
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
	// BackfillEasy is EASY backfill, deepened: the first ReserveDepth jobs
	// that do not fit get reservations (the earliest time, and the GPUs,
	// at which the running jobs' walltimes and the reservations before
	// leave them room), as do those that waited MaxAge; a job behind them
	// starts now only if it ends before each reservation on the GPUs it
	// takes begins. ReserveDepth 1 is classic EASY.
	BackfillEasy Backfill = "easy"
)

// Defaults of the policy's durations.
const (
	DefaultHalfLife         = 24 * time.Hour      // fair-share usage halves every day
	DefaultBackfillEstimate = 24 * time.Hour      // the walltime assumed for a job without --timeout
	DefaultPreemptAfter     = 10 * time.Minute    // the wait before rebalancing preempts for a job
	DefaultMinRuntime       = 10 * time.Minute    // the least run before a job may be preempted
	DefaultMaxAge           = 30 * 24 * time.Hour // the wait at which the age factor is 1
)

// DefaultReserveDepth is how many waiting jobs, in queue order, get
// reservations by default; MaxReserveDepth is the most a policy may ask.
const (
	DefaultReserveDepth = 1
	MaxReserveDepth     = 1000
)

// MaxAgedReservations is how many jobs past MaxAge, beyond ReserveDepth,
// get reservations in one plan, in queue order: each reservation makes
// the next one's search longer, and a queue of thousands of aged jobs
// would make a pass take seconds.
const MaxAgedReservations = 16

// DefaultWeights are the multifactor weights gssh orders by unless told
// otherwise, chosen with gssh sim (docs/simulator.md, Choosing the
// defaults).
var DefaultWeights = Weights{FairShare: 1, Age: 1, Size: 0.1}

// FairShareAlone are the weights of fair-share alone: jobs go by their
// users' fair-share scores, then in submit order.
var FairShareAlone = Weights{FairShare: 1}

// Policy holds the planner's knobs: the settings of the inventory's
// `policy:` block that Plan reads (the others are their readers': host
// failure is health.Rules, housekeeping job.Keep, the event log's age
// eventlog.Options.MaxAge, the default log cap control.Options.LogLimit;
// inventory.Policy holds them all). The zero value means DefaultPolicy's
// values; a knob left empty takes the default. It is no JSON document
// (the inventory's YAML is its form): its durations carry no JSON
// encoding, so none can reach a document in nanoseconds.
type Policy struct {
	Order    Order    `json:"order"`
	Fit      Fit      `json:"placement"`
	Backfill Backfill `json:"backfill"`
	// FairShare says how usage is weighed over time.
	FairShare FairShare `json:"fairshare"`
	// Users gives users their fair-share weight (default 1), admin rights
	// (the priority bands 0-MaxAdminPriority) and caps.
	Users map[string]UserShare `json:"users,omitempty"`
	// DefaultUser is the caps of a user not in Users, and of a listed
	// user's cap left unset (the inventory's `default_user:`).
	DefaultUser Caps `json:"default_user,omitzero"`
	// BackfillEstimate is the walltime assumed, for reservations only, of
	// a job without --timeout (0 = DefaultBackfillEstimate). Never
	// enforced.
	BackfillEstimate time.Duration `json:"-"`
	// DefaultTimeout is the walltime enforced on a job submitted without
	// --timeout (0 = none).
	DefaultTimeout time.Duration `json:"-"`
	// Rebalance lets every pass preempt preemptible running jobs for a
	// queued job that ranks ahead of them and has waited PreemptAfter
	// (`rebalance: true`; gssh schedule --rebalance asks it of one pass
	// through Input.Rebalance). See Decisions.Preempts.
	Rebalance bool `json:"rebalance,omitempty"`
	// PreemptAfter is how long a job waits before rebalancing may
	// preempt others for it (0 = DefaultPreemptAfter).
	PreemptAfter time.Duration `json:"-"`
	// MinRuntime is the least a job runs, since its latest start, before
	// it may be preempted (0 = DefaultMinRuntime): a job preempted once
	// is not preempted again within MinRuntime of its restart.
	MinRuntime time.Duration `json:"-"`
	// Weights weigh the factors of the multifactor priority under
	// OrderFair (zero: DefaultWeights).
	Weights Weights `json:"weights"`
	// MaxAge is the wait at which a job's age factor reaches 1, and after
	// which it always gets a reservation (0 = DefaultMaxAge).
	MaxAge time.Duration `json:"-"`
	// FavorLarge makes the size factor favour large jobs (more
	// GPU-hours) instead of small ones (the inventory's favor_small:
	// false).
	FavorLarge bool `json:"favor_large,omitempty"`
	// ReserveDepth is how many waiting jobs, in queue order, get
	// reservations under BackfillEasy (0 = DefaultReserveDepth).
	ReserveDepth int `json:"reserve_depth"`
}

// FairShare weighs a user's GPU-seconds over time: with a half-life (a
// GPU-second counts half as much HalfLife later), or summed over a sliding
// Window. Exactly one is set; both zero means HalfLife DefaultHalfLife.
type FairShare struct {
	HalfLife time.Duration `json:"-"`
	Window   time.Duration `json:"-"`
}

// UserShare is one user's share settings.
type UserShare struct {
	Weight float64 `json:"weight"` // > 0; a user of weight 2 may use twice the GPU time of one of weight 1
	// Admin may submit at the priorities 0-MaxAdminPriority (CheckPriority).
	Admin bool `json:"admin,omitempty"`
	// Caps are the user's own caps; a field left 0 takes DefaultUser's.
	Caps
}

// DefaultPolicy is what gssh does unless told otherwise: priority class
// then fair-share order, best fit, EASY backfill, a one-day half-life.
func DefaultPolicy() Policy {
	return Policy{Order: OrderFair, Fit: FitBest, Backfill: BackfillEasy,
		FairShare: FairShare{HalfLife: DefaultHalfLife}, BackfillEstimate: DefaultBackfillEstimate}
}

// WithDefaults fills the knobs left empty from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
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
	if p.FairShare == (FairShare{}) {
		p.FairShare = d.FairShare
	}
	if p.BackfillEstimate == 0 {
		p.BackfillEstimate = d.BackfillEstimate
	}
	if p.PreemptAfter == 0 {
		p.PreemptAfter = DefaultPreemptAfter
	}
	if p.MinRuntime == 0 {
		p.MinRuntime = DefaultMinRuntime
	}
	if p.Weights == (Weights{}) {
		p.Weights = DefaultWeights
	}
	if p.MaxAge == 0 {
		p.MaxAge = DefaultMaxAge
	}
	if p.ReserveDepth == 0 {
		p.ReserveDepth = DefaultReserveDepth
	}
	return p
}

// Weight is user's fair-share weight (1 unless the policy says otherwise).
func (p Policy) Weight(user string) float64 {
	if u, ok := p.Users[user]; ok && u.Weight > 0 {
		return u.Weight
	}
	return 1
}

// Check reports a knob set to a value the planner does not know, naming
// the ones it does, and durations and weights out of range.
func (p Policy) Check() error {
	p = p.WithDefaults()
	for _, k := range []struct {
		name, got string
		known     []string
	}{
		{"order", string(p.Order), []string{string(OrderFIFO), string(OrderPriority), string(OrderFair)}},
		{"placement", string(p.Fit), []string{string(FitFirst), string(FitBest)}},
		{"backfill", string(p.Backfill), []string{string(BackfillNone), string(BackfillSkip), string(BackfillEasy)}},
	} {
		if !slices.Contains(k.known, k.got) {
			return fmt.Errorf("policy %s %q: give one of %s", k.name, k.got, strings.Join(k.known, ", "))
		}
	}
	switch fs := p.FairShare; {
	case fs.HalfLife != 0 && fs.Window != 0:
		return errors.New("policy fairshare: give a half_life or a window, not both")
	case fs.HalfLife < 0 || fs.Window < 0:
		return errors.New("policy fairshare: a half_life or window must be more than 0, such as 24h")
	}
	if p.BackfillEstimate < 0 || p.DefaultTimeout < 0 {
		return errors.New("policy: backfill_estimate and default_timeout take a duration more than 0, such as 24h")
	}
	if p.PreemptAfter < 0 || p.MinRuntime < 0 {
		return errors.New("policy: preempt_after and min_runtime take a duration more than 0, such as 10m")
	}
	if w := p.Weights; w.FairShare < 0 || w.Age < 0 || w.Size < 0 {
		return fmt.Errorf("policy weights: %g, %g, %g: give numbers of 0 or more, at least one more than 0, such as {fairshare: 1, age: 0.5}", w.FairShare, w.Age, w.Size)
	}
	if p.MaxAge < 0 {
		return errors.New("policy max_age: give a duration more than 0, such as 7d")
	}
	if p.ReserveDepth < 0 || p.ReserveDepth > MaxReserveDepth {
		return fmt.Errorf("policy reserve_depth %d: give a number from 1 to %d", p.ReserveDepth, MaxReserveDepth)
	}
	if err := p.DefaultUser.check("policy default_user"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(p.Users)) {
		if w := p.Users[name].Weight; !(w > 0) {
			return fmt.Errorf("policy users %s: weight %g: give a number more than 0, such as 1 or 2", name, w)
		}
		if err := p.Users[name].Caps.check("policy users " + name); err != nil {
			return err
		}
	}
	return nil
}
