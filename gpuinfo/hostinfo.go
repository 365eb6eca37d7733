package gpuinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// HostInfo is a host's own CPUs and memory (not its GPUs'), as a job
// started from a login session there sees them. A nil field is a fact the
// probe could not read (a host without /proc), never a zero.
type HostInfo struct {
	// CPUs is how many CPUs a job may run on: the CPUs of the login
	// session's affinity mask (/proc/self/status Cpus_allowed_list: a
	// container or cgroup cpuset may allow fewer than the machine has),
	// else the online CPUs (getconf _NPROCESSORS_ONLN).
	CPUs *int `json:"cpus"`
	// CPUIDs are the ids of those CPUs, ascending (Cpus_allowed_list): what
	// a job is pinned to with `taskset -c`. Nil when unknown (then
	// nothing is pinned).
	CPUIDs []int `json:"cpu_ids,omitempty"`
	// MemTotal is the host's RAM in bytes (/proc/meminfo MemTotal, kB ×
	// 1024).
	MemTotal *uint64 `json:"memory_total_bytes"`
	// MemAvailable is the memory, in bytes, that can be allocated now
	// without swapping (/proc/meminfo MemAvailable; Linux 3.14 and later).
	MemAvailable *uint64 `json:"memory_available_bytes"`
}

// HostFactsLines are the line prefixes ParseHostInfo reads: /proc/meminfo's
// MemTotal and MemAvailable lines, /proc/self/status's Cpus_allowed_list
// line as they are, and "online: N" (getconf _NPROCESSORS_ONLN).
var HostFactsLines = []string{"MemTotal:", "MemAvailable:", "Cpus_allowed_list:", "online:"}

// maxCPUs bounds a CPU list: Linux's NR_CPUS is at most 8192; a list past
// this is garbage.
const maxCPUs = 1 << 16

// ParseHostInfo reads a host's facts from lines as HostFactsLines
// describes them (other lines are ignored; the first of each kind counts).
// It returns nil when no fact could be read, and a warning for each fact
// missing or not understood: "host memory unknown: ...", "CPU count
// unknown: ...". The CPU count is the size of Cpus_allowed_list where it
// reads, else the online count.
func ParseHostInfo(lines []string) (*HostInfo, []string) {
	var h HostInfo
	var warns []string
	seen := map[string]string{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		for _, p := range HostFactsLines {
			if v, ok := strings.CutPrefix(l, p); ok {
				if _, dup := seen[p]; !dup {
					seen[p] = strings.TrimSpace(v)
				}
			}
		}
	}
	mem := func(key string) *uint64 {
		v, ok := seen[key+":"]
		if !ok {
			warns = append(warns, fmt.Sprintf("host memory unknown: no %s line from /proc/meminfo", key))
			return nil
		}
		n, err := parseKB(v)
		if err != nil {
			warns = append(warns, fmt.Sprintf("host memory unknown: /proc/meminfo %s %q: %v", key, clipText(v), err))
			return nil
		}
		return &n
	}
	h.MemTotal = mem("MemTotal")
	h.MemAvailable = mem("MemAvailable")
	if h.MemTotal != nil && h.MemAvailable != nil && *h.MemAvailable > *h.MemTotal {
		warns = append(warns, "host memory: /proc/meminfo MemAvailable exceeds MemTotal: available memory unknown")
		h.MemAvailable = nil
	}
	if v, ok := seen["Cpus_allowed_list:"]; ok {
		ids, err := ParseCPUList(v)
		if err != nil {
			warns = append(warns, fmt.Sprintf("CPU ids unknown: /proc/self/status Cpus_allowed_list %q: %v", clipText(v), err))
		} else {
			h.CPUIDs = ids
			n := len(ids)
			h.CPUs = &n
		}
	}
	if v, ok := seen["online:"]; ok && h.CPUs == nil {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1 || n > maxCPUs:
			warns = append(warns, fmt.Sprintf("CPU count unknown: getconf _NPROCESSORS_ONLN printed %q", clipText(v)))
		default:
			h.CPUs = &n
			warns = append(warns, "CPU ids unknown (no readable Cpus_allowed_list in /proc/self/status): jobs with --cpus run unpinned")
		}
	}
	if h.CPUs == nil && !slices.ContainsFunc(warns, func(w string) bool { return strings.HasPrefix(w, "CPU") }) {
		warns = append(warns, "CPU count unknown: neither /proc/self/status Cpus_allowed_list nor getconf _NPROCESSORS_ONLN answered")
	}
	if h.CPUs == nil && h.MemTotal == nil && h.MemAvailable == nil {
		return nil, []string{"host CPUs and memory unknown: /proc/meminfo and /proc/self/status unreadable (not Linux?)"}
	}
	return &h, warns
}

// parseKB reads a /proc/meminfo value, "16318012 kB", into bytes.
func parseKB(v string) (uint64, error) {
	num, unit, _ := strings.Cut(v, " ")
	if u := strings.TrimSpace(unit); u != "kB" {
		return 0, fmt.Errorf("unit %q, want kB", u)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > 1<<53 {
		return 0, fmt.Errorf("not a number of kB")
	}
	return n * 1024, nil
}

// ParseCPUList reads a Linux CPU list ("0-3,8,10-11", as in
// Cpus_allowed_list or /sys/devices/system/cpu/online) into ascending,
// distinct CPU ids. An empty list, a reversed range, a number out of range
// or anything but digits, '-' and ',' is an error.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	var ids []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuID(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = cpuID(hi); err != nil {
				return nil, err
			}
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", part)
		}
		if len(ids)+b-a+1 > maxCPUs {
			return nil, fmt.Errorf("more than %d CPUs", maxCPUs)
		}
		for i := a; i <= b; i++ {
			ids = append(ids, i)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func cpuID(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= maxCPUs || s != strconv.Itoa(n) {
		return 0, fmt.Errorf("CPU id %q is not a number from 0 to %d", s, maxCPUs-1)
	}
	return n, nil
}

// clipText shortens s for a message.
func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// ReadHostInfo reads the host's CPUs and memory as ParseHostInfo
// does from the probe script's lines: MemTotal and MemAvailable of
// PROC/meminfo, Cpus_allowed_list of PROC/self/status (this process's
// affinity, which a job started from the same login shares), and the
// online CPUs of SYS/devices/system/cpu/online. What cannot be read is
// missing, and said in the warnings.
func ReadHostInfo(proc, sys string) (*HostInfo, []string) {
	var lines []string
	for _, f := range []string{filepath.Join(proc, "meminfo"), filepath.Join(proc, "self", "status")} {
		if b, err := os.ReadFile(f); err == nil {
			lines = append(lines, strings.Split(string(b), "\n")...)
		}
	}
	if b, err := os.ReadFile(filepath.Join(sys, "devices", "system", "cpu", "online")); err == nil {
		if ids, err := ParseCPUList(string(b)); err == nil {
			lines = append(lines, "online: "+strconv.Itoa(len(ids)))
		}
	}
	return ParseHostInfo(lines)
}
