package main

import (
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
)

// fitColumns cuts the widest cuttable column first, down to its header
// and 12 columns, then, on a terminal too narrow for that, to its header;
// a table that fits is left alone.
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
	fitColumns(header, floor, []int{1, 2}, 33)
	if w := runewidth.StringWidth(floor[0][1]); w != 12 {
		t.Errorf("cut to %d columns, want the floor of 12: %q", w, floor)
	}
	// Narrower than that, the columns go down to their headers.
	fitColumns(header, floor, []int{1, 2}, 10)
	if floor[0][1] != "xxxx…" || floor[0][2] != "yyyyy…" {
		t.Errorf("cut to %q, want the headers' widths", floor)
	}
}

// wrapLines wraps a line wider than the width at its spaces, by display
// width (… and ü are one column, 世 two), its later lines indented;
// a word wider than the width stands alone, the others keep to it.
func TestWrapLines(t *testing.T) {
	long := "/" + strings.Repeat("p", 40)
	in := []string{
		"short",
		"nosuch: unreachable: nosuch.invalid:22: cannot resolve \"nosuch.invalid\": no such host (check …)",
		"gpu01: über " + strings.Repeat("ü… ", 12) + "世界 " + long + " and then some words after the path",
	}
	out := wrapLines(in, 30)
	if out[0] != "short" {
		t.Errorf("a line that fits changed: %q", out[0])
	}
	text := strings.Join(out, "\n")
	for i, l := range out {
		w := runewidth.StringWidth(l)
		if w > 30 && strings.TrimSpace(l) != long {
			t.Errorf("line %d is %d columns:\n%s", i, w, text)
		}
		if strings.HasSuffix(l, " ") {
			t.Errorf("line %d ends in a space: %q", i, l)
		}
		if first := strings.HasPrefix(l, "short") || strings.HasPrefix(l, "nosuch") || strings.HasPrefix(l, "gpu01"); !first && !strings.HasPrefix(l, "  ") {
			t.Errorf("line %d is not indented: %q", i, l)
		}
	}
	if !strings.Contains(text, "\n  "+long+"\n") {
		t.Errorf("the long word is not alone on its line:\n%s", text)
	}
	if got := strings.Join(strings.Fields(text), " "); got != strings.Join(strings.Fields(strings.Join(in, " ")), " ") {
		t.Errorf("words lost or changed:\n%s", text)
	}
}

func TestMsCell(t *testing.T) {
	for s, want := range map[float64]string{0: "-", 0.0004: "0.4ms", 0.00981: "9.8ms", 0.00996: "10ms", 0.0131: "13ms", 0.1612: "161ms", 9.9994: "9999ms"} {
		if got := msCell(s); got != want {
			t.Errorf("msCell(%v) = %q, want %q", s, got, want)
		}
	}
}
