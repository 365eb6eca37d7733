package main

import (
	"os"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"
)

// tableWidth is the width a terminal table is fitted to: the terminal's
// columns when stdout is one wider than 100, else 100.
func (a *app) tableWidth() int {
	const least = 100
	if f, ok := a.stdout.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > least {
			return w
		}
	}
	return least
}

// fitColumns cuts the cells of the columns in cuttable (indexes into
// header) so that the table printTable draws on a terminal (each column
// as wide as its widest cell, two spaces between them) fits width: the
// widest cuttable column loses a column at a time, down to at least its
// header and minCut, its long cells ending in "…". It changes rows in
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
	floor := func(i int) int { return max(minCut, runewidth.StringWidth(header[i])) }
	for total() > width {
		widest := -1
		for _, i := range cuttable {
			if widths[i] > floor(i) && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break // as narrow as it goes
		}
		widths[widest]--
	}
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
