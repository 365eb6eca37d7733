package reap

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// reap decides without SSH, a store or a clock: it links only the
// dependency-free job and gpuinfo, and takes now as an input.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && dep != "github.com/gssh/gssh/reap" && dep != "github.com/gssh/gssh/job" && dep != "github.com/gssh/gssh/gpuinfo" {
			t.Errorf("reap links %s", dep)
		}
	}
	src, err := os.ReadFile("reap.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"time.Now(", "time.Since(", "time.Sleep("} {
		if strings.Contains(string(src), call) {
			t.Errorf("reap.go calls %s: take now as an input", call)
		}
	}
}
