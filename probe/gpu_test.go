//go:build gpu && unix

package probe

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSMIOnRealGPU runs SMIScript against the machine's own nvidia-smi
// (go test -tags gpu; never in normal CI) and checks the snapshot against
// `nvidia-smi -L`. Start a GPU process first to see a non-empty process
// list.
func TestSMIOnRealGPU(t *testing.T) {
	list, err := exec.Command("nvidia-smi", "-L").Output()
	if err != nil {
		t.Fatalf("nvidia-smi -L: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := SMI(shRunner{env: os.Environ()}, "local").Snapshot(ctx)
	if err != nil || s.State != HostOK {
		t.Fatalf("state %q (%s), error %v, warnings %q", s.State, s.Error, err, s.Warnings)
	}
	want := strings.Count(string(list), "\nGPU ") + 1
	if len(s.GPUs) != want || s.Driver == "" {
		t.Errorf("%d GPUs, driver %q; nvidia-smi -L lists %d", len(s.GPUs), s.Driver, want)
	}
	for _, g := range s.GPUs {
		if !strings.HasPrefix(g.UUID, "GPU-") || !strings.Contains(string(list), g.UUID) || g.Health != HealthOK || !g.ProcsKnown {
			t.Errorf("GPU %+v", g)
		}
		if g.MemTotal == nil && g.MemoryState == "" {
			t.Errorf("GPU %d: memory unknown without a reason", g.Index)
		}
		for _, p := range g.Procs {
			t.Logf("GPU %d: pid %d %s user %q uses %v bytes", g.Index, p.PID, p.Name, p.User, show(p.UsedBytes))
		}
	}
	t.Logf("%+v", s)
}
