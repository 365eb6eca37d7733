package sim

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/units"
)

// MaxLabGPUs bounds a simulated lab: far beyond the labs gssh is for, and
// what keeps a typo ("1000x8") from a minute-long run.
const MaxLabGPUs = 65536

// ParseLab reads a lab spec: comma-separated groups HOSTSxGPUSxMODEL-MEM,
// such as "4x8xA100-80G,2x4xRTX4090-24G" (4 hosts of 8 A100s with 80 GiB
// each, then 2 hosts of 4 RTX 4090s with 24 GiB). MEM is read as --mem is
// (units.ParseMem: "80G" is 80 GiB). Hosts are named h000-a100, h001-a100,
// ..., in the order of the spec, so that name order is creation order;
// their GPUs are idle and healthy, with UUIDs GPU-<host>-<index>, and each
// host keeps reservePct percent of every GPU back (0: none). An error says
// which group is wrong and what a group looks like.
func ParseLab(spec string, reservePct float64) ([]sched.Host, error) {
	const help = `give groups HOSTSxGPUSxMODEL-MEM, comma-separated, such as "4x8xA100-80G,2x4xRTX4090-24G"`
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("lab spec is empty: %s", help)
	}
	if !(reservePct >= 0 && reservePct < 100) { // NaN too
		return nil, fmt.Errorf("--reserve %g: give a percentage from 0 up to (not including) 100", reservePct)
	}
	var hosts []sched.Host
	total := 0
	for i, group := range strings.Split(spec, ",") {
		bad := func(why string) ([]sched.Host, error) {
			return nil, fmt.Errorf("lab spec %q: group %d %q: %s; %s", spec, i+1, group, why, help)
		}
		f := strings.SplitN(strings.TrimSpace(group), "x", 3)
		if len(f) != 3 {
			return bad("not HOSTSxGPUSxMODEL-MEM")
		}
		n, err1 := strconv.Atoi(f[0])
		per, err2 := strconv.Atoi(f[1])
		switch {
		case err1 != nil || n < 1:
			return bad("the host count " + strconv.Quote(f[0]) + " is not a number from 1")
		case err2 != nil || per < 1 || per > 64:
			return bad("the GPUs per host " + strconv.Quote(f[1]) + " is not a number from 1 to 64")
		}
		cut := strings.LastIndex(f[2], "-")
		if cut <= 0 || cut == len(f[2])-1 {
			return bad("the GPU " + strconv.Quote(f[2]) + " is not MODEL-MEM (such as A100-80G)")
		}
		model, memText := f[2][:cut], f[2][cut+1:]
		if strings.IndexFunc(model, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '+' || r == '-')
		}) >= 0 {
			return bad("the model " + strconv.Quote(model) + " may have only letters, digits and . _ + - (groups are separated by commas)")
		}
		if last := memText[len(memText)-1]; last >= '0' && last <= '9' {
			return bad("the memory " + strconv.Quote(memText) + " has no unit: give it as 80G or 24G")
		}
		mem, err := units.ParseMem(memText)
		if err != nil {
			return bad("the memory " + strconv.Quote(memText) + ": " + err.Error())
		}
		if total += n * per; total > MaxLabGPUs {
			return bad(fmt.Sprintf("more than %d GPUs in all", MaxLabGPUs))
		}
		for range n {
			name := fmt.Sprintf("h%03d-%s", len(hosts), strings.ToLower(model))
			h := sched.Host{Name: name, ReservePct: reservePct,
				Snapshot: gpuinfo.Snapshot{Host: name, State: gpuinfo.HostOK, Source: "simulated", GPUs: make([]gpuinfo.GPU, per)}}
			for g := range per {
				free, used := mem, uint64(0)
				h.Snapshot.GPUs[g] = gpuinfo.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", name, g), Name: model,
					Health: gpuinfo.HealthOK, MemTotal: &mem, MemUsed: &used, MemFree: &free, Procs: []gpuinfo.Proc{}, ProcsKnown: true}
			}
			hosts = append(hosts, h)
		}
	}
	return hosts, nil
}

// Capacity is the number of GPUs of hosts, and the most any one host has.
func Capacity(hosts []sched.Host) (gpus, largest int) {
	for _, h := range hosts {
		gpus += len(h.Snapshot.GPUs)
		largest = max(largest, len(h.Snapshot.GPUs))
	}
	return gpus, largest
}

// SmallestGPU is the memory, in bytes, of the smallest GPU of hosts (0
// without any).
func SmallestGPU(hosts []sched.Host) uint64 {
	var least uint64
	for _, h := range hosts {
		for _, g := range h.Snapshot.GPUs {
			if g.MemTotal != nil && (least == 0 || *g.MemTotal < least) {
				least = *g.MemTotal
			}
		}
	}
	return least
}

// LabOf makes a lab of saved probes (the hosts of a `gssh gpus --json`
// document), so that a lab can simulate itself: each host with the GPUs
// (and MIG devices) its probe listed, by the same names, models, memory
// and health, but idle: no process of anyone's, all memory free, as a
// simulated lab has no other users. reservePct gives each host's memory
// reserve (the inventory's reserve_pct, or --reserve). Hosts whose probe
// listed no GPU (unreachable, no driver) are left out, and GPUs not
// healthy stay so (they take no jobs): the warnings say which. The error
// says why no lab could be made.
func LabOf(snaps []gpuinfo.Snapshot, reservePct func(host string) float64) ([]sched.Host, []string, error) {
	var hosts []sched.Host
	var warnings []string
	total := 0
	seen := map[string]bool{}
	for i, s := range snaps {
		switch {
		case strings.TrimSpace(s.Host) == "":
			return nil, warnings, fmt.Errorf("host %d of the saved probe has no name", i+1)
		case seen[s.Host]:
			return nil, warnings, fmt.Errorf("host %s is listed twice in the saved probe", s.Host)
		}
		seen[s.Host] = true
		if len(s.GPUs) == 0 {
			why := string(s.State)
			if s.State == gpuinfo.HostOK || why == "" {
				why = "no GPU"
			}
			if s.Error != "" {
				why += ": " + s.Error
			}
			warnings = append(warnings, fmt.Sprintf("host %s: its probe lists no GPU (%s): left out of the lab", s.Host, why))
			continue
		}
		if total += len(s.GPUs); total > MaxLabGPUs {
			return nil, warnings, fmt.Errorf("more than %d GPUs in all", MaxLabGPUs)
		}
		r := reservePct(s.Host)
		if !(r >= 0 && r < 100) {
			return nil, warnings, fmt.Errorf("host %s: a memory reserve of %g%%: give a percentage from 0 up to (not including) 100", s.Host, r)
		}
		h := sched.Host{Name: s.Host, ReservePct: r, Snapshot: gpuinfo.Snapshot{Host: s.Host, State: gpuinfo.HostOK, Source: "simulated", GPUs: make([]gpuinfo.GPU, len(s.GPUs))}}
		indexes := map[int]bool{}
		for i, g := range s.GPUs {
			if indexes[g.Index] {
				return nil, warnings, fmt.Errorf("host %s: GPU %d is listed twice in the saved probe", s.Host, g.Index)
			}
			indexes[g.Index] = true
			if g.MemTotal != nil && *g.MemTotal == 0 {
				warnings = append(warnings, fmt.Sprintf("host %s: GPU %d has no memory in the probe: it takes only jobs without --mem", s.Host, g.Index))
			}
			g.MemUsed, g.MemFree, g.Procs, g.ProcsKnown = idle(g.MemTotal)
			g.MIG = append([]gpuinfo.MIG(nil), g.MIG...)
			for k := range g.MIG {
				g.MIG[k].MemUsed, g.MIG[k].MemFree, _, _ = idle(g.MIG[k].MemTotal)
			}
			if g.Health != gpuinfo.HealthOK {
				warnings = append(warnings, fmt.Sprintf("host %s: GPU %d is %q in the probe: it takes no jobs", s.Host, g.Index, cmp.Or(string(g.Health), "of unknown health")))
			}
			h.Snapshot.GPUs[i] = g
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, warnings, fmt.Errorf("no host of the saved probe lists a GPU")
	}
	return hosts, warnings, nil
}

// idle is the memory and processes of an idle GPU (or MIG device) of
// total bytes (nil: unknown, and so used and free).
func idle(total *uint64) (used, free *uint64, procs []gpuinfo.Proc, known bool) {
	if total != nil {
		zero, all := uint64(0), *total
		used, free = &zero, &all
	}
	return used, free, []gpuinfo.Proc{}, true
}
