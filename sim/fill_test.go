package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sched"
)

func TestFill(t *testing.T) {
	hosts, err := ParseLab("1x4xT4-16G", 0)
	if err != nil {
		t.Fatal(err)
	}
	const GiB = 1 << 30
	whole := []Job{{GPUs: 1, Runtime: time.Hour}}
	threeQuarters := []Job{{GPUs: 1, Mem: 12 * GiB, Runtime: time.Hour}}
	cases := []struct {
		name                    string
		jobs                    []Job
		allocated, idle, holes  float64
		placed, drawn           int
		unplaced, demandAtLeast float64
	}{
		// 1.3 × 4 GPUs: the sixth job takes the demand past 5.2; four fit.
		{"whole GPUs", whole, 1, 0, 0, 4, 6, 2, 5.2},
		// One 12 GiB job per 16 GiB GPU; 0.75 of a GPU each: seven reach 5.25.
		{"three quarters", threeQuarters, 0.75, 0, 0.25, 4, 7, 3 * 0.75, 5.2},
	}
	for _, c := range cases {
		for _, fit := range []sched.Fit{sched.FitFirst, sched.FitBest} {
			r, err := Fill(hosts, c.jobs, 1.3, fit, 1)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, fit, err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			if !near(r.Allocated, c.allocated) || !near(r.Idle, c.idle) || !near(r.Holes, c.holes) || r.Placed != c.placed || r.Drawn != c.drawn ||
				!near(r.Unplaced, c.unplaced) || r.Demand < c.demandAtLeast {
				t.Errorf("%s, %s: %+v", c.name, fit, r)
			}
		}
	}
	// A mixed draw: what was placed, what is idle and the holes make the
	// lab; the same seed, the same fill.
	mixed := []Job{{GPUs: 1}, {GPUs: 2}, {GPUs: 1, Mem: 5 * GiB}, {GPUs: 1, Mem: 9 * GiB}, {GPUs: 4}}
	for seed := range uint64(20) {
		r, err := Fill(hosts, mixed, 1.3, sched.FitBest, seed)
		if err != nil {
			t.Fatal(err)
		}
		if s := r.Allocated + r.Idle + r.Holes; math.Abs(s-1) > 1e-9 || r.Allocated > 1 || r.Demand < 5.2 || r.Placed > r.Drawn {
			t.Errorf("seed %d: %+v (allocated + idle + holes = %v)", seed, r, s)
		}
		if again, _ := Fill(hosts, mixed, 1.3, sched.FitBest, seed); !reflect.DeepEqual(r, again) {
			t.Errorf("seed %d: two fills differ", seed)
		}
	}
	// Nothing of the trace fits: said, not looped on.
	if _, err := Fill(hosts, []Job{{GPUs: 8}}, 1.3, sched.FitFirst, 0); err == nil || !strings.Contains(err.Error(), "no job of the trace fits") {
		t.Errorf("a trace of 8-GPU jobs on 4 GPUs: %v", err)
	}
}
