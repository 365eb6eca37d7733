package fleet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gssh/gssh/nvmlfake"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// helperFleet starts one real sshd per fixture whose nvidia-smi and ps are
// the fakes and whose libnvidia-ml.so.1 is the fake (LD_LIBRARY_PATH), all
// serving the same fixture. It returns the pool and the helper binary.
func helperFleet(t testing.TB, fixtures []string) (*sshexec.Pool, *probe.HelperBinary) {
	sshtest.RequireSSHD(t)
	lib := nvmlfake.Build(t)
	bin, err := probe.LoadHelperBinary(nvmlfake.BuildHelper(t))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("..")
	dir := t.TempDir()
	fakebin := filepath.Join(dir, "bin")
	os.MkdirAll(fakebin, 0o755)
	os.Symlink(filepath.Join(root, "probe/testdata/fake-nvidia-smi"), filepath.Join(fakebin, "nvidia-smi"))
	os.Symlink(filepath.Join(root, "probe/testdata/fake-ps"), filepath.Join(fakebin, "ps"))
	key := sshtest.NewKey(t, dir, "")
	hosts := map[string]sshconfig.Settings{}
	var known []string
	for i, fx := range fixtures {
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: fmt.Sprintf("127.0.3.%d", i+1), AuthorizedKeys: []string{key.AuthorizedLine},
			SetEnv: map[string]string{"PATH": fakebin + ":/usr/bin:/bin", "LD_LIBRARY_PATH": lib,
				"GSSH_FAKE_SMI_DIR": filepath.Join(root, "probe/testdata/fleet", fx)}})
		known = append(known, s.KnownHostsLine)
		host, port, _ := net.SplitHostPort(s.Addr)
		p, _ := strconv.Atoi(port)
		hosts[fx] = sshconfig.Settings{Alias: fx, HostName: host, Port: p, User: s.User, IdentityFiles: []string{key.Path},
			IdentitiesExplicit: true, IdentitiesOnly: true, StrictHostKeyChecking: "yes"}
	}
	kh := sshtest.KnownHosts(t, dir, known...)
	for fx, s := range hosts {
		s.UserKnownHostsFiles = []string{kh}
		hosts[fx] = s
	}
	pool := sshexec.NewPool(sshexec.PoolOptions{Resolve: func(h string) (sshconfig.Settings, error) { return hosts[h], nil }})
	t.Cleanup(func() { pool.Close() })
	return pool, bin
}

// The helper (NVML through the fake library, pushed over real SSH) and
// nvidia-smi give the same facts for the same fixture; where the helper
// cannot answer, the fallback gives nvidia-smi's state and says why.
func TestHelperAndSMIAgree(t *testing.T) {
	fixtures := []string{"a100x4", "h100-mig", "lost-gpu", "err-gpu", "requires-reset", "gb10-unified", "empty-uuid",
		"perm-denied", "warning-mixed", "driver-not-loaded", "driver-mismatch", "no-devices", "bin-missing"}
	pool, bin := helperFleet(t, fixtures)
	ctx := context.Background()
	for _, fx := range fixtures {
		t.Run(fx, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			smi, _ := probe.SMI(pool, fx).Snapshot(ctx)
			both, err := probe.Fallback(probe.Helper(pool, fx, bin, nil, false), probe.SMI(pool, fx)).Snapshot(ctx)
			if err != nil && smi.State == probe.HostOK {
				t.Fatalf("fallback: %v", err)
			}
			if both.State != smi.State {
				t.Errorf("state: helper path %q (%s), nvidia-smi %q", both.State, both.SourceWhy, smi.State)
			}
			if both.Source == probe.SourceSMI {
				if both.SourceWhy == "" {
					t.Error("fell back to nvidia-smi without a reason")
				}
				t.Logf("nvidia-smi because: %s", both.SourceWhy)
				return
			}
			compareGPUs(t, both.GPUs, smi.GPUs)
		})
	}
}

func compareGPUs(t *testing.T, nvml, smi []probe.GPU) {
	t.Helper()
	if len(nvml) != len(smi) {
		t.Fatalf("GPU count: nvml %d, nvidia-smi %d", len(nvml), len(smi))
	}
	for i := range nvml {
		a, b := nvml[i], smi[i]
		if a.Health != b.Health || a.Index != b.Index {
			t.Errorf("GPU %d health/index: nvml %d %q, nvidia-smi %d %q", i, a.Index, a.Health, b.Index, b.Health)
		}
		if a.Health != probe.HealthOK {
			continue // an unreadable GPU's other fields differ by source
		}
		for _, f := range []struct {
			name string
			x, y any
		}{
			{"uuid", a.UUID, b.UUID}, {"bus id", a.BusID, b.BusID}, {"name", a.Name, b.Name},
			{"memory total", val(a.MemTotal), val(b.MemTotal)}, {"memory used", val(a.MemUsed), val(b.MemUsed)},
			{"memory free", val(a.MemFree), val(b.MemFree)}, {"utilization", val(a.UtilPct), val(b.UtilPct)},
			{"temperature", val(a.TempC), val(b.TempC)}, {"MIG devices", len(a.MIG), len(b.MIG)},
		} {
			if f.x != f.y {
				t.Errorf("GPU %d %s: nvml %v, nvidia-smi %v", a.Index, f.name, f.x, f.y)
			}
		}
		for k := range min(len(a.MIG), len(b.MIG)) {
			if a.MIG[k].UUID != b.MIG[k].UUID || a.MIG[k].Profile != b.MIG[k].Profile {
				t.Errorf("GPU %d MIG %d: nvml %s %s, nvidia-smi %s %s", a.Index, k, a.MIG[k].UUID, a.MIG[k].Profile, b.MIG[k].UUID, b.MIG[k].Profile)
			}
		}
		if a.ProcsKnown && b.ProcsKnown {
			if len(a.Procs) != len(b.Procs) {
				t.Errorf("GPU %d processes: nvml %d, nvidia-smi %d", a.Index, len(a.Procs), len(b.Procs))
				continue
			}
			for k := range a.Procs {
				if a.Procs[k].PID != b.Procs[k].PID || val(a.Procs[k].UsedBytes) != val(b.Procs[k].UsedBytes) {
					t.Errorf("GPU %d process %d: nvml %d %v, nvidia-smi %d %v", a.Index, k, a.Procs[k].PID, val(a.Procs[k].UsedBytes), b.Procs[k].PID, val(b.Procs[k].UsedBytes))
				}
			}
		}
	}
}

func val[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// BenchmarkProbe compares, per host over real SSH, the helper (warm: already
// pushed; cold: pushed on every iteration) with the nvidia-smi path. Both
// answer from fakes here, so this measures gssh's own cost (sessions, push,
// parse), not NVML against a real nvidia-smi; `make gpu-test` times those.
func BenchmarkProbe(b *testing.B) {
	pool, bin := helperFleet(b, []string{"a100x4"})
	ctx := context.Background()
	if _, err := probe.Helper(pool, "a100x4", bin, nil, false).Snapshot(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("nvidia-smi", func(b *testing.B) {
		for b.Loop() {
			if _, err := probe.SMI(pool, "a100x4").Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helper-warm", func(b *testing.B) {
		for b.Loop() {
			if _, err := probe.Helper(pool, "a100x4", bin, nil, false).Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helper-cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := pool.Run(ctx, "a100x4", `rm -f "$HOME"/.cache/gssh/helper-*`, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := probe.Helper(pool, "a100x4", bin, nil, false).Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
