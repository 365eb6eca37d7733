// Package simplot draws a comparison of gssh sim as an SVG (gonum.org/v1/plot):
// the queue length and the GPUs in use over time, one line per policy.
package simplot

import (
	"errors"
	"fmt"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gssh/gssh/sim"
)

// Buckets is how many points a line has: the run is cut into this many
// spans of equal length, and each point is its span's time-weighted mean.
const Buckets = 600

// Series is one policy's lab over time, as the plot draws it: at the
// middle of each of Buckets spans of the run, the time-weighted mean
// number of jobs waiting and of GPUs booked (whole GPUs, and the booked
// part of shared ones).
type Series struct {
	Policy string
	At     []time.Duration // the middle of each span, after the first arrival
	Queued []float64
	Booked []float64
}

// SeriesOf makes res's series over [0, end) (a sample holds from its After
// until the next one's, the last until end). An end of 0 or less gives
// no points.
func SeriesOf(policy string, res *sim.Result, end time.Duration) Series {
	s := Series{Policy: policy}
	if end <= 0 {
		return s
	}
	width := float64(end) / Buckets
	s.At, s.Queued, s.Booked = make([]time.Duration, Buckets), make([]float64, Buckets), make([]float64, Buckets)
	for k := range s.At {
		s.At[k] = time.Duration((float64(k) + 0.5) * width)
	}
	for i, smp := range res.Samples {
		from, to := smp.After, end
		if i+1 < len(res.Samples) {
			to = min(res.Samples[i+1].After, end)
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

// SVG writes c's plot to w: the jobs waiting (top) and the GPUs booked
// (bottom) over the longest makespan of its policies, in days, one line
// per policy; width × height in points.
func SVG(w io.Writer, c *sim.Comparison, width, height vg.Length) error {
	panels, err := Panels(c)
	if err != nil {
		return err
	}
	canvas := vgsvg.New(width, height)
	drawPanels(draw.New(canvas), panels...)
	_, err = canvas.WriteTo(w)
	return err
}

// Panels are c's two plots, jobs waiting and GPUs booked over time, for a
// canvas of any format.
func Panels(c *sim.Comparison) ([]*plot.Plot, error) {
	if len(c.Results) == 0 || len(c.Results) != len(c.Reports) {
		return nil, errors.New("plot: no policy results to draw")
	}
	var end time.Duration
	for _, r := range c.Results {
		end = max(end, r.Makespan)
	}
	if end <= 0 {
		return nil, errors.New("plot: no job ended, nothing to draw")
	}
	queue, gpus := plot.New(), plot.New()
	queue.Title.Text = fmt.Sprintf("%s on %s (load %.2f): jobs waiting", c.Trace, c.Lab, c.Load)
	queue.Y.Label.Text = "jobs waiting"
	gpus.Title.Text = fmt.Sprintf("GPUs booked (of %d)", c.GPUs)
	gpus.Y.Label.Text = "GPUs"
	gpus.X.Label.Text = "days after the first arrival"
	gpus.Y.Min, gpus.Y.Max = 0, float64(c.GPUs)
	for _, p := range []*plot.Plot{queue, gpus} {
		p.X.Min, p.X.Max = 0, end.Hours()/24
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	for i, r := range c.Results {
		s := SeriesOf(c.Reports[i].Policy, r, end)
		for _, panel := range []struct {
			p *plot.Plot
			y []float64
		}{{queue, s.Queued}, {gpus, s.Booked}} {
			xys := make(plotter.XYs, len(s.At))
			for k := range xys {
				xys[k].X, xys[k].Y = s.At[k].Hours()/24, panel.y[k]
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", s.Policy, err)
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			l.Width = vg.Points(1)
			panel.p.Add(l)
			panel.p.Legend.Add(s.Policy, l)
		}
	}
	return []*plot.Plot{queue, gpus}, nil
}

// drawPanels draws the plots one above the other on dc, their axes
// aligned.
func drawPanels(dc draw.Canvas, panels ...*plot.Plot) {
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	plots := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		plots[i] = []*plot.Plot{p}
	}
	for row, cs := range plot.Align(plots, tiles, dc) {
		plots[row][0].Draw(cs[0])
	}
}
