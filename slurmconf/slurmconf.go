// Package slurmconf writes what a lab moving from gssh to Slurm needs to
// describe its hosts: slurm.conf's node and partition lines (with a
// minimal header), gres.conf, and a sacctmgr script that gives gssh's
// policy users their fair-share weights as Slurm shares. It is pure: the
// facts come in (hosts as probed, their labels, the policy), the files'
// text comes out.
//
// What gssh cannot know it does not make up: CPU topology (Sockets,
// CoresPerSocket, ThreadsPerCore) is left to slurmd, which reads it
// (slurmd -C prints it); MIG devices' device files are left to NVML
// (AutoDetect=nvml), since they include /dev/nvidia-caps files no probe
// reads.
package slurmconf

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"al.essio.dev/pkg/shellescape"

	"github.com/gssh/gssh/gpuinfo"
)

// Host is one host as probed, with its inventory facts.
type Host struct {
	Name string // the inventory's name: the NodeName
	// Addr is where the host is reached (the ssh_config HostName): the
	// NodeAddr when it differs from Name; "" for none (a local host).
	Addr string
	// Via are the jump hosts SSH crosses to reach it (ProxyJump): the
	// controller must reach Addr without them.
	Via    []string
	Labels []string // the Feature list
	// CPUs and MemTotal are the probe's (gpuinfo.HostInfo): nil when
	// unknown.
	CPUs     *int
	MemTotal *uint64 // bytes
	GPUs     []gpuinfo.GPU
}

// User is one policy user and their fair-share weight.
type User struct {
	Name   string
	Weight float64
}

// Options are what the files need beyond the hosts.
type Options struct {
	// Controller is the SlurmctldHost: the host running slurmctld
	// (gssh slurm-conf's own host name by default).
	Controller string
	// ClusterName is slurm.conf's ClusterName ("gssh" when "").
	ClusterName string
	// Account is the Slurm account the users are put in ("gssh" when "").
	Account string
	// AutoDetect: gres.conf is AutoDetect=nvml for every node, instead
	// of File= lines.
	AutoDetect bool
	// Users are the policy users, with their weights.
	Users []User
	// Weights are gssh's multifactor weights (fair-share, age, size):
	// Slurm's PriorityWeight* are these scaled by PriorityScale.
	FairShareWeight, AgeWeight, SizeWeight float64
	// HalfLife is gssh's fair-share half-life (0: none, a window):
	// PriorityDecayHalfLife.
	HalfLife time.Duration
	// Window is gssh's fair-share window (0: none): Slurm has no
	// sliding window; said in a comment.
	Window time.Duration
}

// PriorityScale turns gssh's multifactor weights (around 1) into Slurm's
// integer PriorityWeight* values.
const PriorityScale = 10000

// Files are the generated files' text.
type Files struct {
	SlurmConf string
	GresConf  string
	Sacctmgr  string // a sh script of sacctmgr commands
	// Nodes are the hosts described, in order; Left are the hosts left
	// out, each with why ("gpu01: ...").
	Nodes []string
	Left  []string
}

// validName is a NodeName Slurm's host lists read as one name.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// validFeature is a node feature Slurm's --constraint expressions read
// as one word.
var validFeature = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// GPUType is the GRES type of a GPU model: the name nvidia-smi and NVML
// give, lowercased, spaces made underscores (as Slurm's NVML detection
// names it), with a leading "nvidia_" and then "geforce_" taken off:
// "NVIDIA A100-SXM4-80GB" is a100-sxm4-80gb, "NVIDIA GeForce RTX 4090"
// rtx_4090, "Tesla T4" tesla_t4. The result is a substring of the type
// Slurm detects with AutoDetect=nvml, which is what gres.conf's Type must
// be when a site switches detection on. "" for an empty name.
func GPUType(name string) string {
	t := strings.ToLower(strings.Join(strings.Fields(name), "_"))
	t = strings.TrimPrefix(t, "nvidia_")
	t = strings.TrimPrefix(t, "geforce_")
	// Slurm splits a Gres= list at ',' and a type from its count at ':'.
	return strings.Map(func(r rune) rune {
		if r == ',' || r == ':' || r == '=' || r == '#' {
			return '_'
		}
		return r
	}, t)
}

// RealMemory is the RealMemory of a host of total bytes of RAM
// (/proc/meminfo MemTotal): in MiB, 2% under it, rounded down. Slurm
// drains a node whose slurmd finds less memory than RealMemory says,
// and advises a value a little under the total, as the kernel's own
// count moves by a few MiB between boots and kernels.
func RealMemory(total uint64) uint64 {
	mib := total / (1 << 20)
	return mib - mib/50
}

// gres is one Gres= entry of a node: a type and its count.
type gres struct {
	typ   string
	count int
}

// node is what one host's lines are made of.
type node struct {
	h        Host
	gres     []gres
	mig      bool     // some GPU is in MIG mode: gres.conf AutoDetect=nvml
	files    []string // gres.conf lines of the non-MIG GPUs (File=)
	notes    []string // comment lines above the node's line
	features []string
}

// describe makes the node of h: its GRES from its healthy GPUs (a MIG
// GPU's MIG devices by profile), and comments for what was left out.
func describe(h Host) node {
	n := node{h: h}
	add := func(typ string) {
		for i := range n.gres {
			if n.gres[i].typ == typ {
				n.gres[i].count++
				return
			}
		}
		n.gres = append(n.gres, gres{typ, 1})
	}
	for _, g := range h.GPUs {
		typ := GPUType(g.Name)
		switch {
		case g.Health != gpuinfo.HealthOK && g.Health != "":
			n.notes = append(n.notes, fmt.Sprintf("GPU %d left out: it reads %s (%s); add it when it is healthy", g.Index, g.Health, cmpOr(g.HealthWhy, "no reason given")))
			continue
		case typ == "":
			n.notes = append(n.notes, fmt.Sprintf("GPU %d left out: its model is unknown", g.Index))
			continue
		case g.MIGMode == "Enabled":
			n.mig = true
			if len(g.MIG) == 0 {
				n.notes = append(n.notes, fmt.Sprintf("GPU %d (%s) is in MIG mode with no MIG devices: it offers none until some are created", g.Index, g.Name))
			}
			for _, m := range g.MIG {
				if p := GPUType(m.Profile); p != "" {
					add(p)
				} else {
					n.notes = append(n.notes, fmt.Sprintf("GPU %d MIG device %d left out: its profile is unknown", g.Index, m.Index))
				}
			}
			continue
		}
		add(typ)
		n.files = append(n.files, fmt.Sprintf("NodeName=%s Name=gpu Type=%s File=/dev/nvidia%d", h.Name, typ, g.Index))
	}
	for _, l := range h.Labels {
		if validFeature.MatchString(l) {
			n.features = append(n.features, l)
		} else {
			n.notes = append(n.notes, fmt.Sprintf("label %q left out of Feature=: Slurm features are letters, digits, '_', '.' and '-'", l))
		}
	}
	return n
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// line is the node's slurm.conf line.
func (n node) line() string {
	f := []string{"NodeName=" + n.h.Name}
	if n.h.Addr != "" && n.h.Addr != n.h.Name {
		f = append(f, "NodeAddr="+n.h.Addr)
	}
	if n.h.CPUs != nil {
		f = append(f, "CPUs="+strconv.Itoa(*n.h.CPUs))
	}
	if n.h.MemTotal != nil {
		f = append(f, fmt.Sprintf("RealMemory=%d", RealMemory(*n.h.MemTotal)))
	}
	if len(n.gres) > 0 {
		var g []string
		for _, e := range n.gres {
			g = append(g, fmt.Sprintf("gpu:%s:%d", e.typ, e.count))
		}
		f = append(f, "Gres="+strings.Join(g, ","))
	}
	if len(n.features) > 0 {
		f = append(f, "Feature="+strings.Join(n.features, ","))
	}
	return strings.Join(append(f, "State=UNKNOWN"), " ")
}

// Generate writes the files for hosts (those that can be described:
// a name Slurm reads, and at least the CPU count or the memory known).
func Generate(hosts []Host, opt Options) Files {
	cluster := cmpOr(opt.ClusterName, "gssh")
	account := cmpOr(opt.Account, "gssh")
	var out Files
	var nodes []node
	for _, h := range hosts {
		switch {
		case !validName.MatchString(h.Name):
			out.Left = append(out.Left, fmt.Sprintf("%s: not a name Slurm reads as one node (letters, digits, '.', '_', '-')", h.Name))
			continue
		case h.CPUs == nil && h.MemTotal == nil && len(h.GPUs) == 0:
			out.Left = append(out.Left, fmt.Sprintf("%s: the probe read none of its CPUs, memory or GPUs", h.Name))
			continue
		}
		nodes = append(nodes, describe(h))
		out.Nodes = append(out.Nodes, h.Name)
	}

	var s strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	w("# slurm.conf for the hosts of gssh's inventory, from their probes (gssh slurm-conf).")
	w("# Review every line marked REVIEW before starting Slurm; see man slurm.conf.")
	w("ClusterName=%s", cluster)
	w("# REVIEW: the host running slurmctld (the one gssh slurm-conf ran on).")
	w("SlurmctldHost=%s", cmpOr(opt.Controller, "<this controller's hostname>"))
	w("# REVIEW: munge must run on every node, with the same /etc/munge/munge.key.")
	w("AuthType=auth/munge")
	w("CredType=cred/munge")
	w("SlurmUser=slurm")
	w("StateSaveLocation=/var/spool/slurmctld")
	w("SlurmdSpoolDir=/var/spool/slurmd")
	w("SlurmctldLogFile=/var/log/slurm/slurmctld.log")
	w("SlurmdLogFile=/var/log/slurm/slurmd.log")
	w("# REVIEW: cgroup confinement needs cgroup.conf (man cgroup.conf) on each node.")
	w("ProctrackType=proctrack/cgroup")
	w("TaskPlugin=task/cgroup,task/affinity")
	w("SelectType=select/cons_tres")
	w("SelectTypeParameters=CR_Core_Memory")
	w("ReturnToService=2")
	w("GresTypes=gpu")
	w("")
	w("# Priority: gssh's multifactor weights, scaled by %d.", PriorityScale)
	w("PriorityType=priority/multifactor")
	w("PriorityWeightFairshare=%d", scaled(opt.FairShareWeight))
	w("PriorityWeightAge=%d", scaled(opt.AgeWeight))
	w("PriorityWeightJobSize=%d", scaled(opt.SizeWeight))
	switch {
	case opt.HalfLife > 0:
		w("PriorityDecayHalfLife=%s", slurmDuration(opt.HalfLife))
	case opt.Window > 0:
		w("# gssh's fair-share window of %s has no Slurm equivalent: Slurm decays usage by a half-life", opt.Window)
		w("# (PriorityDecayHalfLife, 7 days by default) or resets it (PriorityUsageResetPeriod).")
	}
	w("# REVIEW: fair-share shares live in Slurm's accounting database (slurmdbd): run the")
	w("# sacctmgr script once slurmdbd runs, and set:")
	w("#AccountingStorageType=accounting_storage/slurmdbd")
	w("#AccountingStorageHost=<the slurmdbd host>")
	w("#AccountingStorageEnforce=associations,limits")
	w("")
	w("# Nodes. CPUs is what the probe's login may run on (its CPU affinity); slurmd -C on a")
	w("# node prints its Sockets, CoresPerSocket and ThreadsPerCore, which gssh does not read:")
	w("# add them to the node's line for core-level placement. RealMemory is MemTotal less 2%%.")
	w("# Features are the hosts' gssh labels: sbatch --constraint=LABEL picks hosts by them.")
	for _, n := range nodes {
		for _, note := range n.notes {
			w("# %s: %s", n.h.Name, note)
		}
		if len(n.h.Via) > 0 {
			w("# %s: gssh reaches it through %s; slurmctld must reach NodeAddr directly.", n.h.Name, strings.Join(n.h.Via, ", "))
		}
		if n.h.CPUs == nil {
			w("# %s: CPU count unknown: Slurm takes 1 until its line says more (slurmd -C).", n.h.Name)
		}
		if n.h.MemTotal == nil {
			w("# %s: memory unknown: add RealMemory (MiB; slurmd -C).", n.h.Name)
		}
		w("%s", n.line())
	}
	for _, l := range out.Left {
		w("# left out: %s", l)
	}
	w("")
	if len(nodes) > 0 {
		w("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
	}
	out.SlurmConf = s.String()

	s.Reset()
	w("# gres.conf for the nodes of slurm.conf (gssh slurm-conf): put it beside slurm.conf.")
	if opt.AutoDetect {
		w("# Every node's GPUs are detected through NVML: slurmd must be built with NVML")
		w("# (Debian's slurm-wlm 22.05 is not: it has no gpu_nvml plugin).")
		w("AutoDetect=nvml")
	} else {
		w("# File= is /dev/nvidia<index>: the GPU's index as its minor number, as on most hosts;")
		w("# where they differ, nvidia-smi -q | grep Minor gives each GPU's. MIG nodes are")
		w("# detected through NVML (AutoDetect=nvml: Slurm's docs advise it for MIG, whose device")
		w("# files, MultipleFiles=/dev/nvidiaN,/dev/nvidia-caps/nvidia-capX,..., gssh cannot read).")
		for _, n := range nodes {
			if n.mig {
				w("# %s: MIG; its Gres= types are the MIG profiles (NVML names them <model>_<profile>).", n.h.Name)
				w("NodeName=%s AutoDetect=nvml", n.h.Name)
				continue
			}
			for _, f := range n.files {
				w("%s", f)
			}
		}
	}
	out.GresConf = s.String()
	out.Sacctmgr = sacctmgr(opt.Users, account)
	return out
}

// scaled is a gssh weight as a Slurm PriorityWeight*.
func scaled(w float64) int64 { return int64(math.Round(w * PriorityScale)) }

// slurmDuration is d as Slurm writes a duration: days-hours:minutes.
func slurmDuration(d time.Duration) string {
	m := int64(d.Round(time.Minute) / time.Minute)
	return fmt.Sprintf("%d-%02d:%02d", m/(24*60), m/60%24, m%60)
}

// Shares turns gssh's weights (0.001 to 1000000, fractions allowed)
// into Slurm's fair-share shares (whole numbers): each weight times the
// least of 1, 10, 100 and 1000 that makes every one whole, rounded (and
// 1 at least) past that. The ratios, which are all fair-share reads, stay.
func Shares(users []User) (map[string]int64, int64) {
	scale := int64(1000)
	for _, s := range []int64{1, 10, 100, 1000} {
		whole := true
		for _, u := range users {
			v := u.Weight * float64(s)
			if math.Abs(v-math.Round(v)) > 1e-9 {
				whole = false
				break
			}
		}
		if whole {
			scale = s
			break
		}
	}
	out := map[string]int64{}
	for _, u := range users {
		out[u.Name] = max(1, int64(math.Round(u.Weight*float64(scale))))
	}
	return out, scale
}

// sacctmgr is the script that makes the account and its users with
// their shares.
func sacctmgr(users []User, account string) string {
	var s strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&s, format+"\n", args...) }
	w("#!/bin/sh")
	w("# Fair-share for Slurm from gssh's policy users (gssh slurm-conf): run it once")
	w("# slurmdbd runs and slurm.conf sets AccountingStorageType=accounting_storage/slurmdbd.")
	w("# Slurm's shares are whole numbers: gssh's weights keep their ratios. sacctmgr")
	w("# says \"Nothing new added\" for what exists already: the script may run again.")
	q := shellescape.Quote
	w("sacctmgr -i add account %s Description=%s", q(account), q("users of gssh"))
	shares, scale := Shares(users)
	if scale != 1 {
		w("# The weights are scaled by %d to make them whole.", scale)
	}
	sorted := slices.Clone(users)
	slices.SortFunc(sorted, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	for _, u := range sorted {
		w("sacctmgr -i add user %s account=%s fairshare=%d", q(u.Name), q(account), shares[u.Name])
	}
	w("# Users gssh's policy does not list have weight 1: add each one as")
	w("#   sacctmgr -i add user NAME account=%s fairshare=%d", q(account), max(1, scale))
	return s.String()
}
