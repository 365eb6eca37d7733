package probe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
)

// maxGPUs bounds GPU indices: no host has this many GPUs, and a lost-GPU
// gap up to a bogus index must not list millions.
const maxGPUs = 1024

// GPUs reads t's rows as GPUs: one per row, from whichever of these
// --query-gpu fields t has: index, uuid, pci.bus_id, name, memory.total,
// memory.used, memory.free (MiB, converted to bytes), utilization.gpu (%),
// temperature.gpu (°C), mig.mode.current. Without an index column a GPU's
// index is its row's position. Fields nvidia-smi could not read are nil
// (MemoryState says why for memory); `ERR!`, `[GPU requires reset]` and
// `[GPU is lost]` anywhere in a row, and `[Unknown Error]` in an identity
// field, set the GPU's Health. Rows that do not read (an index that is no
// number, a memory size that is none) are left out and reported in the
// error as "row N: ...".
func (t Table) GPUs() ([]GPU, error) {
	gpus := []GPU{}
	var errs []error
	for i, r := range t.Rows {
		g, err := t.gpu(r, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("row %d: %w", r.Line, err))
			continue
		}
		gpus = append(gpus, g)
	}
	return gpus, errors.Join(errs...)
}

// gpu reads one row; pos is its position, the index when t has none.
func (t Table) gpu(r Row, pos int) (GPU, error) {
	g := GPU{Index: pos, Health: HealthOK, Procs: []Proc{}}
	if v, ok := t.Get(r, "index"); ok {
		n, err := v.Int()
		if err == nil && (n < 0 || n >= maxGPUs) {
			err = fmt.Errorf("%d is not a GPU index", n)
		}
		if err != nil {
			return GPU{}, fmt.Errorf("index: %w", err)
		}
		g.Index = n
	}
	g.UUID = gpuUUID(t.text(r, "uuid"))
	g.BusID = t.text(r, "pci.bus_id")
	g.Name = t.text(r, "name")
	g.MIGMode = t.text(r, "mig.mode.current")
	var err error
	if g.MemTotal, err = t.memory(r, "memory.total", &g.MemoryState); err != nil {
		return GPU{}, err
	}
	if g.MemUsed, err = t.memory(r, "memory.used", &g.MemoryState); err != nil {
		return GPU{}, err
	}
	if g.MemFree, err = t.memory(r, "memory.free", &g.MemoryState); err != nil {
		return GPU{}, err
	}
	if g.MemoryState == FieldNA && gpuinfo.UnifiedMemory(g.Name) {
		g.MemoryState = MemoryUnified
	}
	if g.UtilPct, err = t.optInt(r, "utilization.gpu"); err != nil {
		return GPU{}, err
	}
	if g.TempC, err = t.optInt(r, "temperature.gpu"); err != nil {
		return GPU{}, err
	}
	g.Health, g.HealthWhy = t.health(r)
	return g, nil
}

// gpuUUID returns a GPU UUID, "" for the bare `GPU-` some drivers print
// (corpus 020).
func gpuUUID(s string) string {
	if s == "GPU-" {
		return ""
	}
	return s
}

// memory reads a memory field in bytes: nil when t lacks it or nvidia-smi
// could not read it, in which case the first such reason goes to *state.
func (t Table) memory(r Row, field string, state *string) (*uint64, error) {
	v, ok := t.Get(r, field)
	if !ok {
		return nil, nil
	}
	if !v.Known() {
		if *state == "" {
			*state = v.State
		}
		return nil, nil
	}
	b, err := v.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return &b, nil
}

// optInt reads a whole-number field: nil when t lacks it or nvidia-smi
// could not read it.
func (t Table) optInt(r Row, field string) (*int, error) {
	v, ok := t.Get(r, field)
	if !ok || !v.Known() {
		return nil, nil
	}
	n, err := v.Int()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return &n, nil
}

// identityField reports whether a field names the GPU: without it the GPU
// cannot be addressed, so `[Unknown Error]` there is a failure, while in
// any other field (a fan, corpus 003) it only makes that field unknown.
func identityField(f string) bool {
	switch canonicalField(f) {
	case "index", "uuid", "pci.bus_id", "name":
		return true
	}
	return false
}

// health reads a GPU's health from every field of its row, worst first:
// lost, requires reset, error.
func (t Table) health(r Row) (Health, string) {
	var lost, reset, failed []string
	for i, v := range r.Values {
		f := t.Fields[i]
		switch {
		case v.State == FieldGPULost:
			lost = append(lost, f)
		case v.State == FieldRequiresReset:
			reset = append(reset, f)
		case v.State == FieldErr, v.State == FieldUnknownError && identityField(f):
			failed = append(failed, f+" "+sentinelText(v.State))
		}
	}
	switch {
	case len(lost) > 0:
		return HealthLost, "nvidia-smi reports [GPU is lost] for " + strings.Join(lost, ", ")
	case len(reset) > 0:
		return HealthRequiresReset, "nvidia-smi reports [GPU requires reset] for " + strings.Join(reset, ", ")
	case len(failed) > 0:
		return HealthError, "nvidia-smi cannot read " + strings.Join(failed, ", ")
	}
	return HealthOK, ""
}

// sentinelText prints a field state as nvidia-smi does.
func sentinelText(state string) string {
	if state == FieldErr {
		return "(ERR!)"
	}
	return "(" + state + ")"
}

// Procs reads t's rows as compute processes, from the
// --query-compute-apps fields gpu_uuid, pid, process_name and
// used_gpu_memory (MiB, converted to bytes; nil when nvidia-smi cannot
// tell, as on Windows/WDDM). Rows whose pid cannot be read
// (`[Insufficient Permissions]`, corpus 029) are left out and reported in
// the error as "row N: ...": the list is then incomplete, which is not the
// same as a GPU without processes.
func (t Table) Procs() ([]Proc, error) {
	procs := []Proc{}
	if t.Col("pid") < 0 {
		return procs, errors.New("no pid field")
	}
	var errs []error
	for _, r := range t.Rows {
		p, err := t.proc(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("row %d: %w", r.Line, err))
			continue
		}
		procs = append(procs, p)
	}
	return procs, errors.Join(errs...)
}

// proc reads one row of --query-compute-apps.
func (t Table) proc(r Row) (Proc, error) {
	v, _ := t.Get(r, "pid")
	pid, err := v.Int()
	if err != nil {
		return Proc{}, fmt.Errorf("pid: %w", err)
	}
	if pid <= 0 {
		return Proc{}, fmt.Errorf("pid: %d is not a process id", pid)
	}
	p := Proc{PID: pid, Name: t.text(r, freeTextField), GPUUUID: gpuUUID(t.text(r, "gpu_uuid"))}
	if v, ok := t.Get(r, "used_gpu_memory"); ok && v.Known() {
		b, err := v.Bytes()
		if err != nil {
			return Proc{}, fmt.Errorf("used_gpu_memory: %w", err)
		}
		p.UsedBytes = &b
	}
	return p, nil
}
