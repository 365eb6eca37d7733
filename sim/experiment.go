package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/sim/trace"
)

// Policy is a named policy to compare.
type Policy struct {
	Name   string
	Policy sched.Policy
	About  string // what it is, in a few words
}

// Policies are the policies `gssh sim` compares, all configurations of
// the same planner: gssh's own and three baselines.
var Policies = []Policy{
	{"gssh", sched.DefaultPolicy(), "priority class, then fair-share 1 + age 1 (max_age 30d) + size 0.1 (small first); best fit; EASY backfill"},
	{"fifo", sched.Policy{Order: sched.OrderFIFO, Fit: sched.FitFirst, Backfill: sched.BackfillNone}, "submit order, strict (head-of-line blocking); first fit"},
	{"fifo-backfill", sched.Policy{Order: sched.OrderFIFO, Fit: sched.FitFirst, Backfill: sched.BackfillEasy, ReserveDepth: 1}, "submit order with EASY backfill; first fit"},
	{"firstfit", sched.Policy{Order: sched.OrderPriority, Fit: sched.FitFirst, Backfill: sched.BackfillSkip}, "priority then submit order; any job that fits starts (skip); first fit"},
}

// Variants are the other policies --policy may name: the multifactor
// settings the default was compared with (docs/simulator.md, Choosing the
// defaults).
var Variants = []Policy{
	{"fairshare-only", sched.Policy{Order: sched.OrderFair, Fit: sched.FitBest, Backfill: sched.BackfillEasy, Weights: sched.FairShareAlone, MaxAge: 7 * 24 * time.Hour},
		"priority class, then fair-share alone (max_age 7d); best fit; EASY backfill"},
	{"age-size", sched.Policy{Order: sched.OrderFair, Fit: sched.FitBest, Backfill: sched.BackfillEasy, Weights: sched.Weights{Age: 1, Size: 0.1}},
		"priority class, then age 1 (max_age 30d) + size 0.1 (small first), no fair-share; best fit; EASY backfill"},
	{"deep", sched.Policy{Order: sched.OrderFair, Fit: sched.FitBest, Backfill: sched.BackfillEasy, ReserveDepth: 8},
		"as gssh, with reservations for the first 8 waiting jobs"},
}

// ParsePolicies reads --policy: comma-separated names of Policies and
// Variants.
func ParsePolicies(s string) ([]Policy, error) {
	var out []Policy
	all := slices.Concat(Policies, Variants)
	for _, name := range strings.Split(s, ",") {
		i := slices.IndexFunc(all, func(p Policy) bool { return p.Name == name })
		if i < 0 {
			names := make([]string, len(all))
			for k, p := range all {
				names[k] = p.Name
			}
			return nil, fmt.Errorf("--policy %q: no policy %q; give some of %s, comma-separated", s, name, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(out, func(p Policy) bool { return p.Name == name }) {
			return nil, fmt.Errorf("--policy %q: %q given twice", s, name)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Setup is one comparison: a trace replayed on a lab under policies.
type Setup struct {
	Lab      string // the spec, for the report
	Hosts    []sched.Host
	Trace    *trace.Trace
	Policies []Policy
	// Load, when > 0, scales the trace's arrival times so that its load
	// on the lab is Load (trace.ScaleToLoad; durations stay).
	Load    float64
	Convert Convert
	// Progress, when set, is each policy's Config.Progress: it is called
	// from every policy's goroutine at once, and settles len(Trace.Jobs)
	// jobs per policy at most.
	Progress func(settled int)
}

// ComparisonSchema names the JSON document of a Comparison (gssh sim
// --json). Durations in it are seconds, to the millisecond, in fields
// ending _s (v1 had nanoseconds: makespan, mean_wait, ...); walltime is
// the --walltime rule in words ("2× the real run time").
const ComparisonSchema = "gssh.sim/v2"

// Comparison is what Compare found.
type Comparison struct {
	Schema      string    `json:"schema"` // ComparisonSchema
	Trace       string    `json:"trace"`
	Lab         string    `json:"lab"`
	GPUs        int       `json:"gpus"`
	Jobs        int       `json:"jobs"`
	Users       int       `json:"users"`
	UsersMadeUp bool      `json:"users_made_up"`
	NaturalLoad float64   `json:"natural_load"` // the trace's load on the lab as it is
	Load        float64   `json:"load"`         // after scaling
	Scale       float64   `json:"arrival_scale"`
	Walltime    string    `json:"walltime"`
	Warnings    []string  `json:"warnings"`
	Reports     []Report  `json:"policies"`
	Results     []*Result `json:"-"`
}

// MaxHorizon bounds a replay's virtual time: the last arrival plus every
// job's run time and its walltime's slack, one after another, the worst
// case. Far beyond any trace, and far within what time.Duration holds.
const MaxHorizon = 100 * 365 * 24 * time.Hour

// checkHorizon refuses a replay that could outrun MaxHorizon (an --load
// of 1e-6 stretches arrivals over millennia; a run time of 200 years).
func checkHorizon(name string, jobs []Job) error {
	var last, runs float64 // seconds
	for _, j := range jobs {
		last = max(last, j.Submit.Seconds())
		runs += max(j.Runtime, j.Walltime).Seconds()
	}
	if h := MaxHorizon.Seconds(); last+runs > h || math.IsNaN(last+runs) {
		return fmt.Errorf("%s: the replay could run past %d years of virtual time (the last arrival %.0f days in, %.0f days of run time in all): give a higher --load or a trace of shorter jobs",
			name, int(MaxHorizon.Hours()/24/365), last/86400, runs/86400)
	}
	return nil
}

// Compare runs s's policies, in parallel, each over its own copy of the
// queue, and reports them side by side. s.Trace is left as it is.
func Compare(ctx context.Context, s Setup) (*Comparison, error) {
	t := *s.Trace
	t.Jobs = slices.Clone(t.Jobs)
	s.Trace = &t
	gpus, largest := Capacity(s.Hosts)
	c := &Comparison{Schema: ComparisonSchema, Trace: s.Trace.Name, Lab: s.Lab, GPUs: gpus, Jobs: len(s.Trace.Jobs), UsersMadeUp: s.Trace.UsersMadeUp,
		Walltime: s.Convert.Walltime.String(), Warnings: append([]string{}, s.Trace.Warnings...), Scale: 1}
	users := map[string]bool{}
	anonymous := 0
	for _, j := range s.Trace.Jobs {
		if j.User == "" {
			anonymous++
			continue
		}
		users[j.User] = true
	}
	c.Users = len(users)
	if anonymous > 0 && len(users) > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %d jobs have no user: together they count as one more user, with no name", s.Trace.Name, anonymous))
	}
	c.NaturalLoad = s.Trace.Load(gpus, largest)
	if s.Load > 0 {
		f, err := s.Trace.ScaleToLoad(s.Load, gpus, largest)
		if err != nil {
			return nil, err
		}
		c.Scale = f
	}
	c.Load = s.Trace.Load(gpus, largest)
	jobs, warnings, err := Jobs(s.Trace, s.Convert)
	if err != nil {
		return nil, err
	}
	if err := checkHorizon(s.Trace.Name, jobs); err != nil {
		return nil, err
	}
	c.Warnings = append(c.Warnings, warnings...)
	c.Reports, c.Results = make([]Report, len(s.Policies)), make([]*Result, len(s.Policies))
	errs := make([]error, len(s.Policies))
	var wg sync.WaitGroup
	for i, p := range s.Policies {
		wg.Go(func() {
			cfg := Config{Hosts: s.Hosts, Jobs: jobs, Policy: p.Policy, Progress: s.Progress}
			res, err := Run(ctx, cfg)
			if err != nil {
				errs[i] = fmt.Errorf("policy %s: %w", p.Name, err)
				return
			}
			c.Results[i], c.Reports[i] = res, NewReport(p.Name, cfg, res)
			c.Reports[i].About = p.About
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}
