package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/gssh/gssh/sim/simplot"
)

// doc is two policies' plot over a 2-hour run on 4 GPUs.
func doc() simplot.Doc {
	end := 2 * time.Hour
	return simplot.Doc{Schema: simplot.Schema, Trace: "t.csv", Lab: "1x4xA100-80G", GPUs: 4, Load: 1.25, End: end.Seconds(), Series: []simplot.Series{
		simplot.SeriesOf("gssh", []simplot.Step{{Queued: 1, Booked: 4}, {After: time.Hour, Booked: 1}}, end),
		simplot.SeriesOf("fifo", []simplot.Step{{Queued: 1, Booked: 4}, {After: time.Hour, Booked: 1}}, end),
	}}
}

func TestSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := SVG(&buf, doc(), 6*vg.Inch, 4*vg.Inch); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range []string{"<svg", "t.csv on 1x4xA100-80G (load 1.25): jobs waiting", "GPUs booked (of 4)", "days after the first arrival", ">gssh<", ">fifo<", "</svg>"} {
		if !strings.Contains(out, s) {
			t.Errorf("the SVG lacks %q", s)
		}
	}
	buf.Reset()
	if err := SVG(&buf, simplot.Doc{Schema: simplot.Schema}, vg.Inch, vg.Inch); err == nil || buf.Len() != 0 {
		t.Errorf("an empty document was drawn: %v, %d bytes", err, buf.Len())
	}
}

// The document comes on stdin or from a file; the SVG goes to stdout;
// what cannot be drawn exits 1 saying why, bad usage 2.
func TestRun(t *testing.T) {
	in, err := json.Marshal(doc())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "plot.json")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {file}, {"-width", "3", "-height", "2", file}} {
		var out, errb bytes.Buffer
		if code := run(args, bytes.NewReader(in), &out, &errb); code != 0 || !strings.Contains(out.String(), "<svg") || errb.Len() != 0 {
			t.Errorf("%q: exit %d, %d bytes, stderr %q", args, code, out.Len(), errb.String())
		}
	}
	for _, c := range []struct {
		args  []string
		stdin string
		code  int
		err   string
	}{
		{nil, "{", 1, "gssh-plot: stdin: not a gssh.sim.plot/v1 document: unexpected EOF"},
		{nil, `{"schema": "gssh.sim/v2"}`, 1, `gssh-plot: stdin: plot: schema "gssh.sim/v2", want "gssh.sim.plot/v1"`},
		{nil, `{"schema": "gssh.sim.plot/v1", "end_s": 60}`, 1, "plot: no policy results to draw"},
		{[]string{filepath.Join(t.TempDir(), "none.json")}, "", 1, "none.json: no such file or directory"},
		{[]string{file, file}, "", 2, "usage: gssh-plot"},
		{[]string{"-width", "0"}, "", 2, "usage: gssh-plot"},
		{[]string{"-bogus"}, "", 2, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, strings.NewReader(c.stdin), &out, &errb); code != c.code || !strings.Contains(errb.String(), c.err) || out.Len() != 0 {
			t.Errorf("%q < %q: exit %d, stdout %d bytes, stderr %q; want exit %d, %q", c.args, c.stdin, code, out.Len(), errb.String(), c.code, c.err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, nil, &out, &errb); code != 0 || !strings.Contains(errb.String(), "usage: gssh-plot") {
		t.Errorf("-h: exit %d, %q", code, errb.String())
	}
}
