package main

import (
	"os"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/olekukonko/tablewriter/pkg/twwarp"
	"golang.org/x/term"
)

// tableWidth is the width a terminal table and the lines under it are
// fitted to: the terminal's columns when stdout is one whose size can be
// read, else 100.
func (a *app) tableWidth() int {
	const unknown = 100
	if f, ok := a.stdout.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return unknown
}

// wrapLines wraps each line wider than width (display width) at its
// spaces, its later lines indented by two, with tablewriter's word
// wrapping (twwarp.WrapWords: even line lengths, widths as a terminal
// shows them). A word wider than the width is left whole on a line of
// its own (a path or key is not broken, so it can still be copied); the
// other lines keep to the width (twwarp.WrapString would widen them all
// to the longest word).
func wrapLines(lines []string, width int) []string {
	const indent = "  "
	var out []string
	for _, l := range lines {
		if runewidth.StringWidth(l) <= width {
			out = append(out, l)
			continue
		}
		const tooLong = 1e5 // twwarp's penalty of a line over the width
		for i, words := range twwarp.WrapWords(twwarp.SplitWords(l), 1, max(width-len(indent), 1), tooLong) {
			p := strings.Join(words, " ")
			if i > 0 {
				p = indent + p
			}
			out = append(out, p)
		}
	}
	return out
}

// fitColumns cuts the cells of the columns in cuttable (indexes into
// header) so that the table printTable draws on a terminal (each column
// as wide as its widest cell, two spaces between them) fits width: the
// widest cuttable column loses a column at a time, down to its header and
// minCut, then, where that is still too wide (a terminal under ~90
// columns), down to its header alone; its long cells end in "…". It changes rows in
// place and reports whether it cut any cell; widths are display widths
// (runewidth: a CJK character is 2).
func fitColumns(header []string, rows [][]string, cuttable []int, width int) bool {
	const minCut = 12
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = runewidth.StringWidth(h)
	}
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], runewidth.StringWidth(c))
		}
	}
	total := func() int {
		t := 0
		for _, w := range widths {
			t += w + 2
		}
		return t - 2 // the last column's padding is blank: it does not show
	}
	narrowest := func(least int) {
		floor := func(i int) int { return max(least, runewidth.StringWidth(header[i])) }
		for total() > width {
			widest := -1
			for _, i := range cuttable {
				if widths[i] > floor(i) && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				return // as narrow as it goes
			}
			widths[widest]--
		}
	}
	narrowest(minCut)
	narrowest(0)
	cut := false
	for _, r := range rows {
		for _, i := range cuttable {
			if runewidth.StringWidth(r[i]) > widths[i] {
				r[i] = runewidth.Truncate(r[i], widths[i], "…")
				cut = true
			}
		}
	}
	return cut
}
