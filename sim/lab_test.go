package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
)

func TestLabOf(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	const GiB = 1 << 30
	busy := gpuinfo.GPU{Index: 0, UUID: "GPU-a", Name: "A100", Health: gpuinfo.HealthOK, MemTotal: u(80 * GiB), MemUsed: u(40 * GiB), MemFree: u(40 * GiB),
		Procs: []gpuinfo.Proc{{PID: 7, Name: "python", UsedBytes: u(40 * GiB)}}, ProcsKnown: true}
	lost := gpuinfo.GPU{Index: 1, UUID: "GPU-b", Health: gpuinfo.HealthLost}
	mig := gpuinfo.GPU{Index: 0, UUID: "GPU-c", Health: gpuinfo.HealthOK, MemTotal: u(80 * GiB), MIGMode: "Enabled",
		MIG: []gpuinfo.MIG{{Index: 0, UUID: "MIG-c0", MemTotal: u(40 * GiB), MemUsed: u(10 * GiB), MemFree: u(30 * GiB)}}}
	snaps := []gpuinfo.Snapshot{
		{Host: "a", State: gpuinfo.HostOK, GPUs: []gpuinfo.GPU{busy, lost}},
		{Host: "down", State: gpuinfo.HostUnreachable, Error: "connection refused"},
		{Host: "m", State: gpuinfo.HostOK, GPUs: []gpuinfo.GPU{mig}},
	}
	hosts, warnings, err := LabOf(snaps, func(h string) float64 { return map[string]float64{"a": 20}[h] })
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].Name != "a" || hosts[1].Name != "m" || hosts[0].ReservePct != 20 || hosts[1].ReservePct != 0 {
		t.Fatalf("hosts %+v", hosts)
	}
	g := hosts[0].Snapshot.GPUs[0]
	if *g.MemUsed != 0 || *g.MemFree != 80*GiB || len(g.Procs) != 0 || !g.ProcsKnown || g.Name != "A100" || g.UUID != "GPU-a" {
		t.Errorf("the busy GPU is not idle in the lab: %+v", g)
	}
	if *snaps[0].GPUs[0].MemUsed != 40*GiB || len(snaps[0].GPUs[0].Procs) != 1 {
		t.Error("the saved probe was changed")
	}
	if m := hosts[1].Snapshot.GPUs[0].MIG[0]; *m.MemUsed != 0 || *m.MemFree != 40*GiB || *snaps[2].GPUs[0].MIG[0].MemUsed != 10*GiB {
		t.Errorf("MIG device %+v (saved: %+v)", m, snaps[2].GPUs[0].MIG[0])
	}
	if hosts[0].Snapshot.GPUs[1].Health != gpuinfo.HealthLost {
		t.Error("the lost GPU became healthy")
	}
	w := strings.Join(warnings, "\n")
	for _, s := range []string{`host down: its probe lists no GPU (unreachable: connection refused): left out of the lab`, `host a: GPU 1 is "lost" in the probe: it takes no jobs`} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings %q lack %q", w, s)
		}
	}
	if _, _, err := LabOf(snaps[1:2], func(string) float64 { return 0 }); err == nil || !strings.Contains(err.Error(), "no host of the saved probe lists a GPU") {
		t.Errorf("no GPUs: %v", err)
	}
	if _, _, err := LabOf(snaps[:1], func(string) float64 { return 100 }); err == nil || !strings.Contains(err.Error(), "host a: a memory reserve of 100%") {
		t.Errorf("reserve 100: %v", err)
	}
}

// A saved probe with a nameless host, a host twice or a GPU twice is
// refused, never replayed (a nameless host once made the replay spin).
func TestLabOfRefuses(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	g := func(i int) gpuinfo.GPU {
		return gpuinfo.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Health: gpuinfo.HealthOK, MemTotal: u(1 << 34)}
	}
	zero := func(string) float64 { return 0 }
	for want, snaps := range map[string][]gpuinfo.Snapshot{
		"host 1 of the saved probe has no name":      {{Host: "", State: gpuinfo.HostOK, GPUs: []gpuinfo.GPU{g(0)}}},
		"host a is listed twice in the saved probe":  {{Host: "a", GPUs: []gpuinfo.GPU{g(0)}}, {Host: "a", GPUs: []gpuinfo.GPU{g(0)}}},
		"host a: GPU 0 is listed twice in the saved": {{Host: "a", GPUs: []gpuinfo.GPU{g(0), g(0)}}},
	} {
		if _, _, err := LabOf(snaps, zero); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", want, err)
		}
	}
	if _, _, err := LabOf([]gpuinfo.Snapshot{{Host: "a", GPUs: []gpuinfo.GPU{g(0)}}}, func(string) float64 { return math.NaN() }); err == nil {
		t.Error("a NaN reserve was taken")
	}
}

func TestCheckHorizon(t *testing.T) {
	ok := []Job{{Submit: time.Hour, Runtime: time.Hour, Walltime: 2 * time.Hour}}
	if err := checkHorizon("t", ok); err != nil {
		t.Error(err)
	}
	for _, jobs := range [][]Job{
		{{Submit: 101 * 365 * 24 * time.Hour, Runtime: time.Second}},
		{{Runtime: 60 * 365 * 24 * time.Hour}, {Runtime: 60 * 365 * 24 * time.Hour}},
		{{Runtime: time.Hour, Walltime: math.MaxInt64}},
	} {
		if err := checkHorizon("t", jobs); err == nil || !strings.Contains(err.Error(), "the replay could run past 100 years") {
			t.Errorf("%+v: %v", jobs, err)
		}
	}
}
