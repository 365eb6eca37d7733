package main

import (
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
)

// fitColumns cuts the widest cuttable column first, never below its
// header or 12 columns, and leaves a table that fits alone.
func TestFitColumns(t *testing.T) {
	header := []string{"HOST", "STATE", "SOURCE"}
	rows := [][]string{
		{"gpu01", "degraded: GPU 1 lost: Unable to determine the device handle", "nvidia-smi (no gssh-helper beside /usr/local/bin/gssh)"},
		{"gpu02", "ok", "nvml"},
	}
	if !fitColumns(header, rows, []int{1, 2}, 60) {
		t.Fatal("nothing cut")
	}
	width := 0
	for i := range header {
		w := runewidth.StringWidth(header[i])
		for _, r := range rows {
			w = max(w, runewidth.StringWidth(r[i]))
		}
		width += w + 2
	}
	if width-2 > 60 || !strings.HasSuffix(rows[0][1], "…") || !strings.HasSuffix(rows[0][2], "…") || rows[1][1] != "ok" || rows[0][0] != "gpu01" {
		t.Errorf("width %d, rows %q", width-2, rows)
	}
	small := [][]string{{"gpu01", "ok", "nvml"}}
	if fitColumns(header, small, []int{1, 2}, 60) || small[0][1] != "ok" {
		t.Errorf("a table that fits was cut: %q", small)
	}
	floor := [][]string{{"gpu01", strings.Repeat("x", 40), strings.Repeat("y", 40)}}
	fitColumns(header, floor, []int{1, 2}, 10)
	if w := runewidth.StringWidth(floor[0][1]); w != 12 {
		t.Errorf("cut to %d columns, want the floor of 12: %q", w, floor)
	}
}
