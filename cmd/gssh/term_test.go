package main

import (
	"io"
	"strings"
	"testing"
)

// The escapes act at the start of a line only; anything else reaches the
// job byte for byte.
func TestEscapeReader(t *testing.T) {
	for _, c := range []struct {
		in, out          string
		detached, helped bool
	}{
		{in: "ls\r", out: "ls\r"},
		{in: "~.", out: "", detached: true},
		{in: "echo hi\r~.rest", out: "echo hi\r", detached: true},
		{in: "a~.b", out: "a~.b"},
		{in: "~~x\r", out: "~x\r"},
		{in: "~x", out: "~x"},
		{in: "\r~?\r", out: "\r\r", helped: true},
		{in: "\n~.", out: "\n", detached: true},
	} {
		detached, helped := false, false
		e := &escapeReader{r: strings.NewReader(c.in), detach: func() { detached = true }, help: func() { helped = true }}
		got, err := io.ReadAll(e)
		if err != nil || string(got) != c.out || detached != c.detached || helped != c.helped {
			t.Errorf("%q: got %q (%v), detached %v helped %v; want %q, %v, %v", c.in, got, err, detached, helped, c.out, c.detached, c.helped)
		}
	}
	// Split across reads: "~" at the end of one, "." at the start of the next.
	detached := false
	e := &escapeReader{r: io.MultiReader(strings.NewReader("x\r~"), strings.NewReader(".y")), detach: func() { detached = true }, help: func() {}}
	if got, _ := io.ReadAll(e); string(got) != "x\r" || !detached {
		t.Errorf("split escape: %q, detached %v", got, detached)
	}
}
