package main

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gssh/gssh/sim/simplot"
)

// SVG writes doc's plot to w: the jobs waiting (top) and the GPUs booked
// (bottom) over [0, end_s), in days, one line per policy; width × height
// in points. An undrawable doc (simplot.Doc.Check) is an error, and
// nothing is written.
func SVG(w io.Writer, doc simplot.Doc, width, height vg.Length) error {
	panels, err := Panels(doc)
	if err != nil {
		return err
	}
	canvas := vgsvg.New(width, height)
	drawPanels(draw.New(canvas), panels...)
	_, err = canvas.WriteTo(w)
	return err
}

// Panels are doc's two plots, jobs waiting and GPUs booked over time, for
// a canvas of any format.
func Panels(doc simplot.Doc) ([]*plot.Plot, error) {
	if err := doc.Check(); err != nil {
		return nil, err
	}
	days := func(s float64) float64 { return s / 86400 }
	queue, gpus := plot.New(), plot.New()
	queue.Title.Text = fmt.Sprintf("%s on %s (load %.2f): jobs waiting", doc.Trace, doc.Lab, doc.Load)
	queue.Y.Label.Text = "jobs waiting"
	gpus.Title.Text = fmt.Sprintf("GPUs booked (of %d)", doc.GPUs)
	gpus.Y.Label.Text = "GPUs"
	gpus.X.Label.Text = "days after the first arrival"
	gpus.Y.Min, gpus.Y.Max = 0, float64(doc.GPUs)
	for _, p := range []*plot.Plot{queue, gpus} {
		p.X.Min, p.X.Max = 0, days(doc.End)
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	for i, s := range doc.Series {
		for _, panel := range []struct {
			p *plot.Plot
			y []float64
		}{{queue, s.Queued}, {gpus, s.Booked}} {
			xys := make(plotter.XYs, len(s.At))
			for k := range xys {
				xys[k].X, xys[k].Y = days(s.At[k]), panel.y[k]
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
