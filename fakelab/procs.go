package fakelab

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gssh/gssh/procinfo"
)

// The marks in a process's environment the model reads. A simulated
// host's sessions set LabVar and HostVar, so every process started there
// carries them; what a process uses of the GPUs comes from the rest.
const (
	LabVar  = "GSSH_FAKELAB"      // the lab's directory (its lab.json)
	HostVar = "GSSH_FAKELAB_HOST" // the simulated host the process runs on
	// HoldVar is "INDEX:MiB": a process run by hand holding that much
	// memory of GPU INDEX (the lab's foreign processes carry it; a demo
	// user may start one too).
	HoldVar = "GSSH_FAKELAB_GPU"
)

// The gssh job marks (launch's run.sh exports them).
const (
	jobVar     = "GSSH_JOB_ID"
	clusterVar = "GSSH_CLUSTER_ID"
	attemptVar = "GSSH_ATTEMPT"
	memVar     = "GSSH_MEM_PER_GPU" // MiB; unset for an exclusive job
	devicesVar = "CUDA_VISIBLE_DEVICES"
	// UseVar, in a job's environment (gssh submit --env), is the memory
	// in MiB it really uses on each GPU, in place of what it booked: a
	// job that asks for more than it needs.
	UseVar = "FAKELAB_USE_MIB"
	// IdleVar, set in a job's environment, makes it hold its GPUs
	// without computing: 0 % utilization (an idle notebook).
	IdleVar = "FAKELAB_IDLE"
)

// ProcLookup reads what /proc says about a pid.
type ProcLookup = procinfo.Source

// exclusiveShare is the part of a GPU's memory an exclusive job (no
// --mem) is shown to use.
const exclusiveShare = 0.75

// Uses returns what the processes of lab on host use of its GPUs, read
// from the environments of the processes under procRoot ("/proc"):
//   - a gssh job's processes (GSSH_JOB_ID) use, on each unit of their
//     CUDA_VISIBLE_DEVICES, the memory their job booked (GSSH_MEM_PER_GPU),
//     or 3/4 of the unit for an exclusive job (or UseVar's, when it
//     says); a job is one GPU process,
//     its newest (the command, not the shells that started it);
//   - a process with HoldVar holds that much of that GPU, idle.
//
// Processes that end are gone from the next call on: nothing is kept.
func (h HostSpec) Uses(procRoot, lab string, procs ProcLookup) []Use {
	units := h.units()
	byIndex := map[int]string{}
	for u, un := range units {
		if un.mig < 0 {
			byIndex[un.gpu] = u
		}
	}
	ents, _ := os.ReadDir(procRoot)
	type job struct {
		pid   int
		start int64
		env   map[string]string
	}
	jobs := map[string]job{}
	var out []Use
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env := readEnv(filepath.Join(procRoot, e.Name(), "environ"))
		if env[LabVar] != lab || env[HostVar] != h.Name {
			continue
		}
		if hold := env[HoldVar]; hold != "" {
			idx, mib, ok := strings.Cut(hold, ":")
			i, err1 := strconv.Atoi(idx)
			m, err2 := strconv.ParseUint(mib, 10, 64)
			if u, found := byIndex[i]; ok && err1 == nil && err2 == nil && found {
				out = append(out, Use{PID: pid, Unit: u, Mem: m << 20})
			}
			continue
		}
		id := env[jobVar]
		if id == "" || env[devicesVar] == "" {
			continue
		}
		key := id + "/" + env[clusterVar] + "/" + env[attemptVar]
		d, ok := procs.Lookup(pid)
		if !ok {
			continue
		}
		var start int64
		if d.StartTicks != nil {
			start = *d.StartTicks
		}
		if prev, seen := jobs[key]; seen && (prev.start > start || prev.start == start && prev.pid > pid) {
			continue
		}
		jobs[key] = job{pid: pid, start: start, env: env}
	}
	for _, j := range jobs {
		mib, _ := strconv.ParseUint(j.env[memVar], 10, 64)
		if use, err := strconv.ParseUint(j.env[UseVar], 10, 64); err == nil {
			mib = use
		}
		for u := range strings.SplitSeq(j.env[devicesVar], ",") {
			un, ok := units[u]
			if !ok {
				continue
			}
			mem := mib << 20
			if mem == 0 {
				mem = uint64(float64(un.total)*exclusiveShare) >> 20 << 20
			}
			out = append(out, Use{PID: j.pid, Unit: u, Mem: mem, Busy: j.env[IdleVar] == ""})
		}
	}
	return out
}

// readEnv reads a NUL-separated environment block; nil when it cannot be
// read (another user's process, or one gone).
func readEnv(path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte(LabVar+"=")) {
		return nil
	}
	env := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte("=")); ok {
			env[string(k)] = string(v)
		}
	}
	return env
}
