package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --plot's gssh-plot: $GSSH_PLOT, else on PATH (beside the test binary
// there is none); none at all is refused, saying where to put it.
func TestFindPlotter(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gssh-plot")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := &app{env: map[string]string{"GSSH_PLOT": bin}}
	if p, err := a.findPlotter(); err != nil || p != bin {
		t.Errorf("$GSSH_PLOT: %q, %v", p, err)
	}
	a.env["GSSH_PLOT"] = filepath.Join(dir, "none")
	if _, err := a.findPlotter(); err == nil || !strings.Contains(err.Error(), "--plot: $GSSH_PLOT: exec: ") {
		t.Errorf("a missing $GSSH_PLOT: %v", err)
	}
	a.env = map[string]string{}
	t.Setenv("PATH", dir)
	if p, err := a.findPlotter(); err != nil || p != bin {
		t.Errorf("on PATH: %q, %v", p, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := a.findPlotter(); err == nil || !strings.Contains(err.Error(), "gssh sim --plot needs gssh-plot beside gssh (") {
		t.Errorf("none: %v", err)
	}
}

// buildPlotter builds gssh-plot into a directory of the test's and
// returns its path, for the scripts' $GSSH_PLOT.
func buildPlotter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gssh-plot")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gssh/gssh/cmd/gssh-plot").CombinedOutput()
	if err != nil {
		t.Fatalf("build gssh-plot: %v\n%s", err, out)
	}
	return bin
}
