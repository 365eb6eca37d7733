package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gssh/gssh/sim"
	"github.com/gssh/gssh/sim/simplot"
)

// plotterName is the plot's own binary: gssh links no plotting library.
const plotterName = "gssh-plot"

// findPlotter is the gssh-plot that --plot runs: $GSSH_PLOT when set, else
// the one beside the running gssh (where `make` puts it), else the first
// on PATH. Found before the replay, so that a long replay does not end in
// a missing binary.
func (a *app) findPlotter() (string, error) {
	if p := a.getenv("GSSH_PLOT"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("--plot: $GSSH_PLOT: %w", err)
		}
		return p, nil
	}
	beside := ""
	if exe, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(exe), plotterName)
		if _, err := exec.LookPath(beside); err == nil {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(plotterName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("--plot: gssh sim --plot needs %s beside gssh (%s; `make` builds bin/%s) or on PATH, or its path in $GSSH_PLOT", plotterName, beside, plotterName)
}

// plotDoc is c's plot: each policy's samples over [0, the longest
// makespan).
func plotDoc(c *sim.Comparison) (simplot.Doc, error) {
	if len(c.Results) == 0 || len(c.Results) != len(c.Reports) {
		return simplot.Doc{}, errors.New("plot: no policy results to draw")
	}
	var end time.Duration
	for _, r := range c.Results {
		end = max(end, r.Makespan)
	}
	if end <= 0 {
		return simplot.Doc{}, errors.New("plot: no job ended, nothing to draw")
	}
	doc := simplot.Doc{Schema: simplot.Schema, Trace: c.Trace, Lab: c.Lab, GPUs: c.GPUs, Load: c.Load, End: end.Seconds()}
	for i, r := range c.Results {
		steps := make([]simplot.Step, len(r.Samples))
		for k, s := range r.Samples {
			steps[k] = simplot.Step{After: s.After, Queued: s.Queued, Booked: s.Booked}
		}
		doc.Series = append(doc.Series, simplot.SeriesOf(c.Reports[i].Policy, steps, end))
	}
	return doc, nil
}

// drawPlot runs gssh-plot (its path) on c's plot document and returns the
// SVG it writes; its failure comes with what it said on stderr.
func drawPlot(ctx context.Context, plotter string, c *sim.Comparison) ([]byte, error) {
	doc, err := plotDoc(c)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, plotter)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &stderr
	if err := cmd.Run(); err != nil {
		if said := strings.TrimSpace(stderr.String()); said != "" {
			return nil, fmt.Errorf("%s: %w: %s", plotter, err, said)
		}
		return nil, fmt.Errorf("%s: %w", plotter, err)
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("%s wrote no SVG", plotter)
	}
	return out.Bytes(), nil
}
