package units

import (
	"os/exec"
	"strings"
	"testing"
)

// units links the standard library only, so any package may use it.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && dep != "github.com/gssh/gssh/units" {
			t.Errorf("units links %s", dep)
		}
	}
}
