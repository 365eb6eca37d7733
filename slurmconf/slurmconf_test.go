package slurmconf_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/slurmconf"
)

// parse reads a Slurm config file back: one map of key=value pairs per
// line that is not a comment (keys as written; the first key, such as
// NodeName, names the line's kind).
func parse(t *testing.T, text string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for l := range strings.Lines(text) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := map[string]string{}
		for i, f := range strings.Fields(l) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("%q: field %q is no key=value", l, f)
			}
			if _, dup := m[k]; dup {
				t.Fatalf("%q: key %s twice", l, k)
			}
			m[k] = v
			if i == 0 {
				m[""] = k
			}
		}
		out = append(out, m)
	}
	return out
}

// lines are the parsed lines whose first key is kind.
func lines(all []map[string]string, kind string) []map[string]string {
	var out []map[string]string
	for _, m := range all {
		if m[""] == kind {
			out = append(out, m)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func gpu(i int, name string) gpuinfo.GPU {
	return gpuinfo.GPU{Index: i, Name: name, Health: gpuinfo.HealthOK, MIGMode: "Disabled"}
}

// hosts: four A100s; a mixed host with a lost GPU; a MIG H100 beside a
// plain one, reached through a jump host; a host with no GPUs; a host
// whose name Slurm cannot take.
func hosts() []slurmconf.Host {
	const gib = 1 << 30
	mig := gpu(0, "NVIDIA H100 80GB HBM3")
	mig.MIGMode = "Enabled"
	for i, p := range []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"} {
		mig.MIG = append(mig.MIG, gpuinfo.MIG{Index: i, Profile: p})
	}
	lost := gpu(2, "NVIDIA GeForce RTX 4090")
	lost.Health, lost.HealthWhy = gpuinfo.HealthLost, "fell off the bus"
	return []slurmconf.Host{
		{Name: "a100", Addr: "10.0.0.11", Labels: []string{"a100", "nvlink"}, CPUs: ptr(64), MemTotal: ptr(uint64(512 * gib)),
			GPUs: []gpuinfo.GPU{gpu(0, "NVIDIA A100-SXM4-80GB"), gpu(1, "NVIDIA A100-SXM4-80GB"), gpu(2, "NVIDIA A100-SXM4-80GB"), gpu(3, "NVIDIA A100-SXM4-80GB")}},
		{Name: "mixed", Addr: "mixed", Labels: []string{"bad label", "ws"}, CPUs: ptr(16), MemTotal: ptr(uint64(64 * gib)),
			GPUs: []gpuinfo.GPU{gpu(0, "NVIDIA GeForce RTX 4090"), gpu(1, "Tesla T4"), lost, gpu(3, "NVIDIA GeForce RTX 4090")}},
		{Name: "h100", Addr: "192.168.5.3", Via: []string{"bastion"}, CPUs: ptr(32), MemTotal: ptr(uint64(256 * gib)),
			GPUs: []gpuinfo.GPU{mig, gpu(1, "NVIDIA H100 80GB HBM3")}},
		{Name: "cpu1", CPUs: ptr(8)},
		{Name: "bad,name", CPUs: ptr(8)},
	}
}

// The files read back as Slurm reads them: one node line per host, the
// GRES counts and types of its healthy GPUs (MIG ones by profile), the
// memory under MemTotal, the labels as features; gres.conf's File= lines
// per GPU, AutoDetect=nvml for the MIG host.
func TestGenerate(t *testing.T) {
	f := slurmconf.Generate(hosts(), slurmconf.Options{Controller: "ctl", FairShareWeight: 1, AgeWeight: 1, SizeWeight: 0.1, HalfLife: 36 * time.Hour,
		Users: []slurmconf.User{{"bob", 0.5}, {"alice", 2}}})
	conf := parse(t, f.SlurmConf)
	one := func(key, want string) {
		t.Helper()
		got := lines(conf, key)
		if len(got) != 1 || got[0][key] != want {
			t.Errorf("slurm.conf %s: %v, want one %s=%s", key, got, key, want)
		}
	}
	one("SlurmctldHost", "ctl")
	one("GresTypes", "gpu")
	one("PriorityType", "priority/multifactor")
	one("PriorityWeightFairshare", "10000")
	one("PriorityWeightJobSize", "1000")
	one("PriorityDecayHalfLife", "1-12:00")
	one("ClusterName", "gssh")
	if p := lines(conf, "PartitionName"); len(p) != 1 || p[0]["PartitionName"] != "gpu" || p[0]["Nodes"] != "ALL" || p[0]["Default"] != "YES" || p[0]["State"] != "UP" {
		t.Errorf("partitions: %v", p)
	}
	nodes := map[string]map[string]string{}
	for _, n := range lines(conf, "NodeName") {
		nodes[n["NodeName"]] = n
		if n["State"] != "UNKNOWN" {
			t.Errorf("%s: State=%s", n["NodeName"], n["State"])
		}
		for _, k := range []string{"Sockets", "CoresPerSocket", "ThreadsPerCore"} {
			if _, ok := n[k]; ok {
				t.Errorf("%s: %s=%s made up", n["NodeName"], k, n[k])
			}
		}
	}
	want := map[string]map[string]string{
		"a100":  {"NodeAddr": "10.0.0.11", "CPUs": "64", "RealMemory": "513803", "Gres": "gpu:a100-sxm4-80gb:4", "Feature": "a100,nvlink"},
		"mixed": {"CPUs": "16", "RealMemory": "64226", "Gres": "gpu:rtx_4090:2,gpu:tesla_t4:1", "Feature": "ws"},
		"h100":  {"NodeAddr": "192.168.5.3", "CPUs": "32", "RealMemory": "256902", "Gres": "gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2,gpu:h100_80gb_hbm3:1"},
		"cpu1":  {"CPUs": "8"},
	}
	if len(nodes) != len(want) {
		t.Errorf("nodes %v, want %d", nodes, len(want))
	}
	for name, w := range want {
		n := nodes[name]
		for _, k := range []string{"NodeAddr", "CPUs", "RealMemory", "Gres", "Feature"} {
			if n[k] != w[k] {
				t.Errorf("%s: %s=%q, want %q", name, k, n[k], w[k])
			}
		}
	}
	if len(f.Left) != 1 || !strings.HasPrefix(f.Left[0], "bad,name: ") {
		t.Errorf("left out: %q", f.Left)
	}
	for _, s := range []string{"# mixed: GPU 2 left out: it reads lost (fell off the bus)", "# h100: gssh reaches it through bastion",
		`# mixed: label "bad label" left out`, "# left out: bad,name: "} {
		if !strings.Contains(f.SlurmConf, s) {
			t.Errorf("slurm.conf lacks %q", s)
		}
	}

	gres := parse(t, f.GresConf)
	files := map[string][]string{}
	for _, g := range lines(gres, "NodeName") {
		if g["AutoDetect"] != "" {
			files[g["NodeName"]] = append(files[g["NodeName"]], "AutoDetect="+g["AutoDetect"])
			continue
		}
		if g["Name"] != "gpu" {
			t.Errorf("gres.conf line %v: Name", g)
		}
		files[g["NodeName"]] = append(files[g["NodeName"]], g["Type"]+"@"+g["File"])
	}
	wantFiles := map[string]string{
		"a100":  "a100-sxm4-80gb@/dev/nvidia0 a100-sxm4-80gb@/dev/nvidia1 a100-sxm4-80gb@/dev/nvidia2 a100-sxm4-80gb@/dev/nvidia3",
		"mixed": "rtx_4090@/dev/nvidia0 tesla_t4@/dev/nvidia1 rtx_4090@/dev/nvidia3",
		"h100":  "AutoDetect=nvml",
	}
	if len(files) != len(wantFiles) {
		t.Errorf("gres.conf nodes: %v", files)
	}
	for n, w := range wantFiles {
		if got := strings.Join(files[n], " "); got != w {
			t.Errorf("gres.conf %s: %s, want %s", n, got, w)
		}
	}

	for _, s := range []string{"sacctmgr -i add account gssh Description='users of gssh'\n",
		"sacctmgr -i add user alice account=gssh fairshare=20\n", "sacctmgr -i add user bob account=gssh fairshare=5\n"} {
		if !strings.Contains(f.Sacctmgr, s) {
			t.Errorf("sacctmgr.sh lacks %q:\n%s", s, f.Sacctmgr)
		}
	}
	if !strings.HasPrefix(f.Sacctmgr, "#!/bin/sh\n") || strings.Index(f.Sacctmgr, "alice") > strings.Index(f.Sacctmgr, "bob") {
		t.Errorf("sacctmgr.sh:\n%s", f.Sacctmgr)
	}
}

// --autodetect: one AutoDetect=nvml line, no File= lines; slurm.conf the same.
func TestAutoDetect(t *testing.T) {
	plain := slurmconf.Generate(hosts(), slurmconf.Options{})
	auto := slurmconf.Generate(hosts(), slurmconf.Options{AutoDetect: true})
	g := parse(t, auto.GresConf)
	if len(g) != 1 || g[0][""] != "AutoDetect" || g[0]["AutoDetect"] != "nvml" {
		t.Errorf("gres.conf: %v", g)
	}
	if plain.SlurmConf != auto.SlurmConf {
		t.Error("slurm.conf differs with AutoDetect")
	}
	if !strings.Contains(plain.SlurmConf, "SlurmctldHost=<this controller's hostname>") {
		t.Error("no placeholder for a missing controller")
	}
}

func TestGPUType(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-80GB":   "a100-sxm4-80gb",
		"NVIDIA GeForce RTX 4090": "rtx_4090",
		"NVIDIA H100 80GB HBM3":   "h100_80gb_hbm3",
		"Tesla T4":                "tesla_t4",
		"NVIDIA  RTX A6000 ":      "rtx_a6000",
		"Quadro RTX 8000":         "quadro_rtx_8000",
		"odd:name,x":              "odd_name_x",
		"":                        "",
	} {
		if got := slurmconf.GPUType(name); got != want {
			t.Errorf("GPUType(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		users []slurmconf.User
		want  map[string]int64
		scale int64
	}{
		{[]slurmconf.User{{"a", 1}, {"b", 3}}, map[string]int64{"a": 1, "b": 3}, 1},
		{[]slurmconf.User{{"a", 1.5}, {"b", 0.25}}, map[string]int64{"a": 150, "b": 25}, 100},
		{[]slurmconf.User{{"a", 0.0001}, {"b", 1.00005}}, map[string]int64{"a": 1, "b": 1000}, 1000},
		{nil, map[string]int64{}, 1},
	} {
		got, scale := slurmconf.Shares(c.users)
		if scale != c.scale || len(got) != len(c.want) {
			t.Errorf("Shares(%v) = %v, %d", c.users, got, scale)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("Shares(%v)[%s] = %d, want %d", c.users, k, got[k], v)
			}
		}
	}
}

func TestRealMemory(t *testing.T) {
	if got := slurmconf.RealMemory(16318012 * 1024); got != 15617 {
		t.Errorf("RealMemory(16318012 kB) = %d MiB", got)
	}
}
