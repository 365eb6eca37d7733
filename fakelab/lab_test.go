package fakelab_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/fakelab"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/probe"
)

// TestMain lets the test binary be the lab's shim, as gssh is for gssh
// demo: run as nvidia-smi or as the pushed helper on a lab host, it
// answers from the model.
func TestMain(m *testing.M) {
	if code, ok := fakelab.Shim(os.Args, os.Getenv, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func startLab(t *testing.T, hosts []fakelab.HostSpec) *fakelab.Lab {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lab, err := fakelab.Start(fakelab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Hosts: hosts, Shim: exe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	return lab
}

// newFleet is gssh's fleet over the lab's inventory; helper "" probes
// through nvidia-smi only.
func newFleet(t *testing.T, lab *fakelab.Lab, helper string) *fleet.Fleet {
	t.Helper()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if helper == "" {
		helper = filepath.Join(t.TempDir(), "no-helper")
		os.WriteFile(helper, []byte("not an ELF file"), 0o755)
	}
	f, err := fleet.New(fleet.Options{InventoryPath: lab.Inventory, Home: t.TempDir(), LocalUser: me.Username, LocalHost: "ctl", HelperPath: helper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func probeAll(t *testing.T, f *fleet.Fleet) map[string]fleet.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]fleet.Report{}
	for _, r := range f.Probe(ctx, f.Inventory().Hosts, fleet.ProbeOptions{}) {
		out[r.Host.Name] = r
	}
	return out
}

// TestLab: gssh probes a simulated lab over real SSH, through the helper
// and through nvidia-smi; the two agree; a foreign process and a lost GPU
// show; a process started as a gssh job's uses the memory its job booked
// on the MIG device it was given, until it is killed; Close leaves nothing.
func TestLab(t *testing.T) {
	lost := []fakelab.GPUSpec{fakelab.A100, fakelab.A100}
	lost[1].Lost = true
	mig := fakelab.H100
	mig.MIG = []string{"3g.40gb", "1g.10gb"}
	lab := startLab(t, []fakelab.HostSpec{
		{Name: "gpu1", GPUs: lost, Foreign: []fakelab.Foreign{{GPU: 0, Name: "jupyter-lab", Mem: 6 << 30}}},
		{Name: "mig1", GPUs: []fakelab.GPUSpec{mig}},
	})
	exe, _ := os.Executable()
	nvml, smi := probeAll(t, newFleet(t, lab, exe)), probeAll(t, newFleet(t, lab, ""))
	for _, host := range []string{"gpu1", "mig1"} {
		n, s := nvml[host].Snapshot, smi[host].Snapshot
		if n.Source != probe.SourceNVML || s.Source != probe.SourceSMI {
			t.Fatalf("%s: sources %q (%s) and %q (%s)", host, n.Source, n.SourceWhy, s.Source, s.SourceWhy)
		}
		if len(n.GPUs) == 0 || n.HostInfo == nil || n.Driver != fakelab.DefaultDriver || s.Driver != fakelab.DefaultDriver {
			t.Fatalf("%s: %+v", host, n)
		}
		for _, g := range ok(s.GPUs) {
			var ng *gpuinfo.GPU
			for i := range n.GPUs {
				if n.GPUs[i].UUID == g.UUID {
					ng = &n.GPUs[i]
				}
			}
			if ng == nil || *ng.MemTotal != *g.MemTotal || *ng.MemUsed != *g.MemUsed || ng.Name != g.Name || len(ng.MIG) != len(g.MIG) {
				t.Errorf("%s GPU %d: nvml %+v, nvidia-smi %+v", host, g.Index, ng, g)
			}
		}
	}
	g1 := nvml["gpu1"].Snapshot
	if g1.State != gpuinfo.HostDegraded || len(g1.GPUs) != 2 || g1.GPUs[1].Health != gpuinfo.HealthLost {
		t.Errorf("gpu1: want GPU 1 lost: %+v", g1)
	}
	if p := g1.GPUs[0].Procs; len(p) != 1 || p[0].Name != "jupyter-lab" || *p[0].UsedBytes != 6<<30 || p[0].JobID != "" || !p[0].EnvRead {
		t.Errorf("gpu1 GPU 0 processes: %+v", p)
	}
	if s := smi["gpu1"].Snapshot; s.State != gpuinfo.HostDegraded || !strings.Contains(s.Error+strings.Join(s.Warnings, ";"), "GPU") {
		t.Errorf("gpu1 through nvidia-smi: %s %q %q", s.State, s.Error, s.Warnings)
	}
	m := nvml["mig1"].Snapshot.GPUs[0]
	if m.MIGMode != "Enabled" || len(m.MIG) != 2 || m.MIG[0].Profile != "3g.40gb" || *m.MIG[1].MemTotal != 10000<<20 {
		t.Fatalf("mig1 GPU 0: %+v", m)
	}

	// A job's process on MIG device 1, 5000 MiB booked.
	f := newFleet(t, lab, exe)
	sh, err := f.Shell("mig1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := sh.Run(ctx, "mig1", "CUDA_VISIBLE_DEVICES="+m.MIG[1].UUID+" GSSH_JOB_ID=7 GSSH_CLUSTER_ID=c1 GSSH_ATTEMPT=1 GSSH_MEM_PER_GPU=5000 "+
		"setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; echo $HOME", nil)
	if err != nil {
		t.Fatal(err, string(res.Stderr))
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != 2 || lines[1] != lab.Hosts[1].Home {
		t.Fatalf("job start: %q", res.Stdout)
	}
	var job gpuinfo.MIG
	var procs []gpuinfo.Proc
	for range 50 { // the job's shell execs sleep
		g := probeAll(t, f)["mig1"].Snapshot.GPUs[0]
		job, procs = g.MIG[1], g.Procs
		if len(procs) == 1 && procs[0].Name == "sleep" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if *job.MemUsed != 5000<<20 || len(procs) != 1 || procs[0].JobID != "7" || procs[0].Attempt != "1" || procs[0].GPUUUID != job.UUID || procs[0].Name != "sleep" {
		t.Fatalf("the job on MIG 1: %+v, processes %+v", job, procs)
	}
	dir := lab.Dir
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(lines[0])
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && !strings.Contains(string(b), ") Z ") {
		t.Errorf("the job's pid %d still runs after Close: %s", pid, b)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the lab's directory is still there: %v", err)
	}
}

func ok(gpus []gpuinfo.GPU) []gpuinfo.GPU {
	var out []gpuinfo.GPU
	for _, g := range gpus {
		if g.Health == gpuinfo.HealthOK {
			out = append(out, g)
		}
	}
	return out
}
