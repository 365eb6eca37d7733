// Package simplot is the plot of a gssh sim replay as data: the jobs
// waiting and the GPUs booked over time, one series per policy, in the
// document (Schema) that `gssh sim --plot` gives gssh-plot on its stdin.
// gssh-plot draws it (gonum.org/v1/plot); this package links no plotting
// library, so the gssh binary carries none.
package simplot

import (
	"errors"
	"fmt"
	"time"
)

// Schema names the plot document (Doc).
const Schema = "gssh.sim.plot/v1"

// Buckets is how many points a line has: the run is cut into this many
// spans of equal length, and each point is its span's time-weighted mean.
const Buckets = 600

// Doc is what the plot draws: a comparison's trace, lab and load for the
// titles, and one series per policy over [0, end_s).
type Doc struct {
	Schema string   `json:"schema"` // Schema
	Trace  string   `json:"trace"`
	Lab    string   `json:"lab"`
	GPUs   int      `json:"gpus"`  // the lab's: the GPUs axis ends there
	Load   float64  `json:"load"`  // as replayed
	End    float64  `json:"end_s"` // the longest makespan, seconds after the first arrival
	Series []Series `json:"policies"`
}

// Series is one policy's lab over time, as the plot draws it: at the
// middle of each of Buckets spans of the run, the time-weighted mean
// number of jobs waiting and of GPUs booked (whole GPUs, and the booked
// part of shared ones).
type Series struct {
	Policy string    `json:"policy"`
	At     []float64 `json:"at_s"` // the middle of each span, seconds after the first arrival
	Queued []float64 `json:"queued"`
	Booked []float64 `json:"booked"`
}

// Step is the lab from After until the next step (sim.Sample's fields the
// plot reads).
type Step struct {
	After  time.Duration
	Queued int     // jobs waiting
	Booked float64 // GPUs booked
}

// SeriesOf makes a series of steps over [0, end) (a step holds from its
// After until the next one's, the last until end). An end of 0 or less
// gives no points.
func SeriesOf(policy string, steps []Step, end time.Duration) Series {
	s := Series{Policy: policy}
	if end <= 0 {
		return s
	}
	width := float64(end) / Buckets
	s.At, s.Queued, s.Booked = make([]float64, Buckets), make([]float64, Buckets), make([]float64, Buckets)
	for k := range s.At {
		s.At[k] = time.Duration((float64(k) + 0.5) * width).Seconds()
	}
	for i, smp := range steps {
		from, to := smp.After, end
		if i+1 < len(steps) {
			to = min(steps[i+1].After, end)
		}
		// Spread [from, to) over the spans it covers, by overlap.
		a, b := float64(max(from, 0)), float64(to)
		if a >= b {
			continue
		}
		for k := min(int(a/width), Buckets-1); k <= min(int(b/width), Buckets-1); k++ {
			lo, hi := max(a, float64(k)*width), min(b, float64(k+1)*width)
			if k == Buckets-1 {
				hi = b
			}
			if hi > lo {
				f := (hi - lo) / width
				s.Queued[k] += f * float64(smp.Queued)
				s.Booked[k] += f * smp.Booked
			}
		}
	}
	return s
}

// Check says what makes d undrawable: another schema, no series, no job
// ended (end_s 0), or a series whose points are not one at, queued and
// booked each.
func (d *Doc) Check() error {
	switch {
	case d.Schema != Schema:
		return fmt.Errorf("plot: schema %q, want %q (gssh and gssh-plot of different releases?)", d.Schema, Schema)
	case len(d.Series) == 0:
		return errors.New("plot: no policy results to draw")
	case !(d.End > 0):
		return errors.New("plot: no job ended, nothing to draw")
	}
	for _, s := range d.Series {
		if len(s.Queued) != len(s.At) || len(s.Booked) != len(s.At) {
			return fmt.Errorf("plot: policy %s has %d times, %d queue lengths and %d GPU counts: want as many of each", s.Policy, len(s.At), len(s.Queued), len(s.Booked))
		}
	}
	return nil
}
