// Command gssh-plot draws the plot of a gssh sim replay as an SVG: it
// reads one gssh.sim.plot/v1 document (sim/simplot.Doc) from FILE, or
// from stdin without one, and writes the SVG on stdout. `gssh sim --plot
// FILE.svg` runs it (found through $GSSH_PLOT, beside gssh, or on PATH)
// and writes the file. It is its own binary so that gssh links no
// plotting library (gonum.org/v1/plot brings fonts and PDF, EPS, LaTeX
// and image back ends). Exit status 0, 1 on an unreadable or undrawable
// document or a failed write, 2 on bad usage.
//
//	go build -trimpath -ldflags '-s -w' ./cmd/gssh-plot
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"gonum.org/v1/plot/vg"

	"github.com/gssh/gssh/sim/simplot"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is the whole command; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gssh-plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gssh-plot [-width IN] [-height IN] [FILE.json] > plot.svg\n\nDraws a "+simplot.Schema+" document (what gssh sim --plot passes on stdin) as an SVG.")
		fs.PrintDefaults()
	}
	width := fs.Float64("width", 9, "the SVG's width, in inches")
	height := fs.Float64("height", 6, "the SVG's height, in inches")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 1 || !(*width > 0 && *width <= 100) || !(*height > 0 && *height <= 100) {
		fs.Usage()
		return 2
	}
	name, in := "stdin", stdin
	if fs.NArg() == 1 {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "gssh-plot:", err)
			return 1
		}
		defer f.Close()
		name, in = fs.Arg(0), f
	}
	var doc simplot.Doc
	if err := json.NewDecoder(in).Decode(&doc); err != nil {
		fmt.Fprintf(stderr, "gssh-plot: %s: not a %s document: %v\n", name, simplot.Schema, err)
		return 1
	}
	out := bufio.NewWriter(stdout)
	err := SVG(out, doc, vg.Length(*width)*vg.Inch, vg.Length(*height)*vg.Inch)
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "gssh-plot: %s: %v\n", name, err)
		return 1
	}
	return 0
}
