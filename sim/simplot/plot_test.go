package simplot

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/gssh/gssh/sim"
)

// SeriesOf is the time-weighted mean of the step function the samples
// make, span by span.
func TestSeriesOf(t *testing.T) {
	end := time.Duration(Buckets) * time.Minute // a span is a minute
	res := &sim.Result{Samples: []sim.Sample{
		{After: 0, Queued: 4, Booked: 2},
		{After: 30 * time.Second, Queued: 0, Booked: 1}, // half of span 0
		{After: 3 * time.Minute, Queued: 10, Booked: 8}, // spans 1, 2 at 0 and 1; from span 3 on
	}}
	s := SeriesOf("p", res, end)
	if len(s.At) != Buckets || s.At[0] != 30*time.Second || s.At[Buckets-1] != end-30*time.Second {
		t.Fatalf("points at %v … %v (%d)", s.At[0], s.At[len(s.At)-1], len(s.At))
	}
	want := map[int][2]float64{0: {2, 1.5}, 1: {0, 1}, 2: {0, 1}, 3: {10, 8}, Buckets - 1: {10, 8}}
	for k, w := range want {
		if math.Abs(s.Queued[k]-w[0]) > 1e-9 || math.Abs(s.Booked[k]-w[1]) > 1e-9 {
			t.Errorf("span %d: queued %v booked %v, want %v", k, s.Queued[k], s.Booked[k], w)
		}
	}
	if s := SeriesOf("p", res, 0); len(s.At) != 0 {
		t.Errorf("no run, %d points", len(s.At))
	}
}

func TestSVG(t *testing.T) {
	hosts, err := sim.ParseLab("1x4xA100-80G", 0)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []sim.Job{{Name: "a", GPUs: 4, Runtime: time.Hour}, {Name: "b", GPUs: 1, Runtime: time.Hour, Submit: time.Minute}}
	c := &sim.Comparison{Trace: "t.csv", Lab: "1x4xA100-80G", GPUs: 4}
	for _, p := range sim.Policies[:2] {
		cfg := sim.Config{Hosts: hosts, Jobs: jobs, Policy: p.Policy}
		res, err := sim.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Results, c.Reports = append(c.Results, res), append(c.Reports, sim.NewReport(p.Name, cfg, res))
	}
	var buf bytes.Buffer
	if err := SVG(&buf, c, 6*vg.Inch, 4*vg.Inch); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range []string{"<svg", "jobs waiting", "GPUs booked (of 4)", ">gssh<", ">fifo<", "</svg>"} {
		if !strings.Contains(out, s) {
			t.Errorf("the SVG lacks %q", s)
		}
	}
	if err := SVG(&buf, &sim.Comparison{}, vg.Inch, vg.Inch); err == nil {
		t.Error("an empty comparison was drawn")
	}
}
