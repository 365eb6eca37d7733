package simplot

import (
	"math"
	"strings"
	"testing"
	"time"
)

// SeriesOf is the time-weighted mean of the step function the samples
// make, span by span.
func TestSeriesOf(t *testing.T) {
	end := time.Duration(Buckets) * time.Minute // a span is a minute
	steps := []Step{
		{After: 0, Queued: 4, Booked: 2},
		{After: 30 * time.Second, Queued: 0, Booked: 1}, // half of span 0
		{After: 3 * time.Minute, Queued: 10, Booked: 8}, // spans 1, 2 at 0 and 1; from span 3 on
	}
	s := SeriesOf("p", steps, end)
	if len(s.At) != Buckets || s.At[0] != 30 || s.At[Buckets-1] != (end-30*time.Second).Seconds() {
		t.Fatalf("points at %v … %v (%d)", s.At[0], s.At[len(s.At)-1], len(s.At))
	}
	want := map[int][2]float64{0: {2, 1.5}, 1: {0, 1}, 2: {0, 1}, 3: {10, 8}, Buckets - 1: {10, 8}}
	for k, w := range want {
		if math.Abs(s.Queued[k]-w[0]) > 1e-9 || math.Abs(s.Booked[k]-w[1]) > 1e-9 {
			t.Errorf("span %d: queued %v booked %v, want %v", k, s.Queued[k], s.Booked[k], w)
		}
	}
	if s := SeriesOf("p", steps, 0); len(s.At) != 0 {
		t.Errorf("no run, %d points", len(s.At))
	}
}

func TestCheck(t *testing.T) {
	ok := Doc{Schema: Schema, End: 60, Series: []Series{SeriesOf("p", []Step{{Queued: 1}}, time.Minute)}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for want, d := range map[string]Doc{
		`schema "gssh.sim.plot/v0"`:        {Schema: "gssh.sim.plot/v0", End: 60, Series: ok.Series},
		"no policy results to draw":        {Schema: Schema, End: 60},
		"no job ended":                     {Schema: Schema, Series: ok.Series},
		"600 times, 1 queue lengths":       {Schema: Schema, End: 60, Series: []Series{{Policy: "p", At: ok.Series[0].At, Queued: []float64{1}, Booked: ok.Series[0].Booked}}},
		"0 times, 0 queue lengths and 600": {Schema: Schema, End: 60, Series: []Series{{Policy: "p", Booked: ok.Series[0].Booked}}},
	} {
		if err := d.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", want, err)
		}
	}
}
