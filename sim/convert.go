package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/sim/trace"
	"github.com/gssh/gssh/units"
)

// Walltime is how a replayed job's walltime (its --timeout) is made from
// what it really runs: EASY backfill goes by walltimes, so the report
// says which rule a run used.
type Walltime struct {
	// Times: the walltime is Times × the run time (1: users who know
	// exactly; 2: the default, users who ask for twice what they need).
	// 0 with Fixed 0: no walltime (the policy's backfill_estimate stands
	// in, and nothing is stopped).
	Times float64
	// Fixed: every job gets this walltime; longer jobs are stopped at it.
	Fixed time.Duration
}

// DefaultWalltime is twice the run time.
var DefaultWalltime = Walltime{Times: 2}

// ParseWalltime reads --walltime: "exact", "xN" (N times the run time,
// N ≥ 1), "none", or a duration (units.ParseWalltime: every job gets it).
func ParseWalltime(s string) (Walltime, error) {
	switch s {
	case "exact":
		return Walltime{Times: 1}, nil
	case "none":
		return Walltime{}, nil
	}
	if n, ok := strings.CutPrefix(s, "x"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || !(f >= 1 && f <= 1000) {
			return Walltime{}, fmt.Errorf("--walltime %q: give xN with N from 1 to 1000, such as x2", s)
		}
		return Walltime{Times: f}, nil
	}
	d, err := units.ParseWalltime(s)
	if err != nil {
		return Walltime{}, fmt.Errorf("--walltime %q: give exact, xN (such as x2), none, or a duration such as 24h", s)
	}
	return Walltime{Fixed: d}, nil
}

func (w Walltime) String() string {
	switch {
	case w.Fixed > 0:
		return "fixed " + w.Fixed.String() + " (longer jobs are stopped)"
	case w.Times == 1:
		return "exact (the real run time)"
	case w.Times > 0:
		return strconv.FormatFloat(w.Times, 'g', -1, 64) + "× the real run time"
	}
	return "none (the backfill estimate stands in)"
}

// of is the walltime of a job that runs d.
func (w Walltime) of(d time.Duration) time.Duration {
	switch {
	case w.Fixed > 0:
		return w.Fixed
	case w.Times > 0:
		if f := math.Ceil(float64(d) * w.Times); f < math.MaxInt64 {
			return time.Duration(f)
		}
		return math.MaxInt64 // no walltime could be longer; Compare refuses such a replay
	}
	return 0
}

// Convert says how trace jobs become replayed jobs.
type Convert struct {
	// FracOf is the GPU memory, in bytes, that a job asking for a fraction
	// of a GPU asks that fraction of (--mem = fraction × FracOf).
	FracOf uint64
	// Priorities maps the trace's priority classes to priorities (0 first
	// ... 10); nil: every job gets 5. A class it does not name gets 5.
	Priorities map[string]int
	Walltime   Walltime
}

// ParsePriorityMap reads --priority-map: "LS=4,BE=6" (class=priority,
// priorities 0 to 10).
func ParsePriorityMap(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		p, err := strconv.Atoi(v)
		if !ok || k == "" || err != nil || p < 0 || p > 10 {
			return nil, fmt.Errorf("--priority-map %q: %q is not CLASS=PRIORITY with a priority from 0 to 10 (such as LS=4,BE=6)", s, kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--priority-map %q: class %q given twice", s, k)
		}
		out[k] = p
	}
	return out, nil
}

// Jobs turns t's jobs into jobs to replay under c, in trace order, and
// warns of the classes the priority map does not name.
func Jobs(t *trace.Trace, c Convert) ([]Job, []string, error) {
	out := make([]Job, len(t.Jobs))
	unmapped := map[string]int{}
	for i, tj := range t.Jobs {
		j := Job{Name: tj.ID, Submit: tj.Submit, User: tj.User, GPUs: tj.GPUs, Priority: 5, Runtime: tj.Duration, Walltime: c.Walltime.of(tj.Duration)}
		if tj.Fraction < 1 {
			if c.FracOf == 0 {
				return nil, nil, fmt.Errorf("%s: job %s asks for %g of a GPU, but no GPU memory is given to take it of (--frac-of)", t.Name, tj.ID, tj.Fraction)
			}
			j.Mem = max(uint64(math.Round(tj.Fraction*float64(c.FracOf))), 1<<20)
		}
		if c.Priorities != nil && tj.Class != "" {
			p, ok := c.Priorities[tj.Class]
			if ok {
				j.Priority = p
			} else {
				unmapped[tj.Class]++
			}
		}
		out[i] = j
	}
	var warnings []string
	for _, class := range slices.Sorted(maps.Keys(unmapped)) {
		warnings = append(warnings, fmt.Sprintf("%s: priority class %q (%d jobs) is not in --priority-map: priority 5", t.Name, class, unmapped[class]))
	}
	return out, warnings, nil
}
