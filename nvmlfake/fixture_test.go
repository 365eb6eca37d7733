//go:build linux && cgo

package nvmlfake

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// This file reads a fleet fixture the way nvidia-smi's CSV states it, with
// no NVML involved: the facts NVML must answer.

// query-gpu.csv columns.
const (
	fIndex = iota
	fUUID
	fBus
	fName
	fMemTotal
	fMemUsed
	fMemFree
	fUtil
	fTemp
	fDriver
	fMIG
	nFields
)

// sentinel is the NVML code that stands behind an nvidia-smi field, or
// SUCCESS for a value.
func sentinel(s string) nvml.Return {
	switch s {
	case "[N/A]", "N/A", "[Not Supported]":
		return nvml.ERROR_NOT_SUPPORTED
	case "[Insufficient Permissions]":
		return nvml.ERROR_NO_PERMISSION
	case "[GPU requires reset]":
		return nvml.ERROR_RESET_REQUIRED
	case "[GPU is lost]":
		return nvml.ERROR_GPU_IS_LOST
	case "[Requested functionality has been deprecated]":
		return nvml.ERROR_DEPRECATED
	case "ERR!", "":
		return nvml.ERROR_UNKNOWN
	}
	if strings.HasPrefix(s, "[") {
		return nvml.ERROR_UNKNOWN
	}
	return nvml.SUCCESS
}

type fxGPU struct {
	row     bool // has a query-gpu.csv row; else lost
	lostBus string
	f       [nFields]string
	mig     map[int]fxMIG // L.txt "MIG <profile> Device k"
}

type fxMIG struct{ profile, uuid string }

type fxProc struct{ uuid, pid, name, mem string }

type fixture struct {
	name, dir string
	init      nvml.Return // nvmlInit's answer
	gpus      []fxGPU     // by index; len is the device count
	procs     []fxProc
	driver    string
	nvmlVer   string
	cuda      int
}

func readFile(dir, name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err == nil
}

func lines(s string) []string {
	return strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func loadFixture(dir string) fixture {
	fx := fixture{name: filepath.Base(dir), dir: dir}
	// nvidia-smi's exit codes are NVML return codes.
	if s, ok := readFile(dir, "exit"); ok {
		code, _ := strconv.Atoi(strings.TrimSpace(s))
		switch {
		case code == 255 || code < 0 || code > 30:
			fx.init = nvml.ERROR_UNKNOWN
			return fx
		case code != 0 && code != 6 && code != 15:
			fx.init = nvml.Return(code)
			return fx
		}
	}
	q, ok := readFile(dir, "query-gpu.csv")
	if !ok {
		fx.init = nvml.ERROR_LIBRARY_NOT_FOUND // no nvidia-smi at all: no driver
		return fx
	}
	gpus := map[int]*fxGPU{}
	count := 0
	grow := func(i int) *fxGPU {
		if gpus[i] == nil {
			gpus[i] = &fxGPU{}
		}
		if i+1 > count {
			count = i + 1
		}
		return gpus[i]
	}
	rows := 0
	for _, line := range lines(q) {
		f := strings.Split(line, ",")
		if len(f) != nFields {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if !digits(f[fIndex]) {
			continue
		}
		i, _ := strconv.Atoi(f[fIndex])
		g := grow(i)
		g.row = true
		copy(g.f[:], f)
		rows++
	}
	lost := 0
	if s, ok := readFile(dir, "stderr"); ok {
		const key = "Unable to determine the device handle for GPU"
		for _, line := range lines(s) {
			_, rest, ok := strings.Cut(line, key)
			if !ok {
				continue
			}
			idx, rest, ok := strings.Cut(rest, ": ")
			if !ok || !digits(idx) {
				continue
			}
			bus, _, _ := strings.Cut(rest, ": ")
			i, _ := strconv.Atoi(idx)
			grow(i).lostBus = bus
			lost++
		}
	}
	if rows == 0 && lost == 0 && !strings.Contains(q, "No devices were found") {
		fx.init = nvml.ERROR_UNKNOWN // not nvidia-smi output at all
		return fx
	}
	fx.gpus = make([]fxGPU, count)
	for i, g := range gpus {
		fx.gpus[i] = *g
	}
	if s, ok := readFile(dir, "L.txt"); ok {
		cur := -1
		for _, line := range lines(s) {
			if rest, ok := strings.CutPrefix(line, "GPU "); ok {
				idx, _, _ := strings.Cut(rest, ":")
				cur, _ = strconv.Atoi(idx)
				continue
			}
			f := strings.Fields(line) // MIG 3g.40gb Device 0: (UUID: MIG-...)
			if cur < 0 || cur >= count || len(f) != 6 || f[0] != "MIG" || f[2] != "Device" {
				continue
			}
			k, err := strconv.Atoi(strings.TrimSuffix(f[3], ":"))
			if err != nil {
				continue
			}
			if fx.gpus[cur].mig == nil {
				fx.gpus[cur].mig = map[int]fxMIG{}
			}
			fx.gpus[cur].mig[k] = fxMIG{profile: f[1], uuid: strings.TrimSuffix(f[5], ")")}
		}
	}
	if s, ok := readFile(dir, "query-compute-apps.csv"); ok {
		for _, line := range lines(s) {
			// gpu_uuid, pid, process_name, used_gpu_memory; the name may hold commas.
			uuid, rest, ok1 := strings.Cut(line, ",")
			pid, rest, ok2 := strings.Cut(rest, ",")
			i := strings.LastIndex(rest, ",")
			if !ok1 || !ok2 || i < 0 {
				continue
			}
			p := fxProc{strings.TrimSpace(uuid), strings.TrimSpace(pid), strings.TrimSpace(rest[:i]), strings.TrimSpace(rest[i+1:])}
			if strings.HasPrefix(p.uuid, "GPU-") || strings.HasPrefix(p.uuid, "MIG-") {
				fx.procs = append(fx.procs, p)
			}
		}
	}
	if s, ok := readFile(dir, "version.txt"); ok {
		for _, line := range lines(s) {
			k, v, _ := strings.Cut(line, ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "DRIVER version":
				fx.driver = v
			case "NVML version":
				fx.nvmlVer = v
			case "CUDA Version":
				major, minor, _ := strings.Cut(v, ".")
				a, _ := strconv.Atoi(major)
				b, _ := strconv.Atoi(minor)
				fx.cuda = a*1000 + b*10
			}
		}
	}
	for _, g := range fx.gpus {
		if fx.driver == "" && g.row && sentinel(g.f[fDriver]) == nvml.SUCCESS {
			fx.driver = g.f[fDriver]
		}
	}
	if fx.nvmlVer == "" && strings.Count(fx.driver, ".") >= 2 {
		fx.nvmlVer = fx.driver[:strings.LastIndex(fx.driver, ".")]
	} else if fx.nvmlVer == "" {
		fx.nvmlVer = fx.driver
	}
	if fx.cuda == 0 {
		fx.cuda = 12020
	}
	return fx
}

// reset reports whether GPU i fails every data query with RESET_REQUIRED.
func (g fxGPU) reset() bool {
	for _, f := range g.f {
		if sentinel(f) == nvml.ERROR_RESET_REQUIRED {
			return true
		}
	}
	return false
}

// number is a field's whole-number value, or the code that stands for it.
func (g fxGPU) number(k int) (uint64, nvml.Return) {
	if g.reset() {
		return 0, nvml.ERROR_RESET_REQUIRED
	}
	if r := sentinel(g.f[k]); r != nvml.SUCCESS {
		return 0, r
	}
	v, err := strconv.ParseUint(g.f[k], 10, 64)
	if err != nil {
		return 0, nvml.ERROR_UNKNOWN
	}
	return v, nvml.SUCCESS
}

// migMode is mig.mode.current as NVML's current mode, or its code.
func (g fxGPU) migMode() (int, nvml.Return) {
	if g.reset() {
		return 0, nvml.ERROR_RESET_REQUIRED
	}
	switch s := g.f[fMIG]; {
	case s == "Enabled":
		return 1, nvml.SUCCESS
	case s == "Disabled":
		return 0, nvml.SUCCESS
	case sentinel(s) == nvml.SUCCESS:
		return 0, nvml.ERROR_UNKNOWN
	case len(g.mig) > 0:
		return 1, nvml.SUCCESS
	default:
		return 0, sentinel(s)
	}
}

// migShared is what a MIG device answers for values the fixture gives only
// for its parent (fields from..to): the parent's error unless that is "not
// supported".
func (g fxGPU) migShared(from, to int) nvml.Return {
	if g.reset() {
		return nvml.ERROR_RESET_REQUIRED
	}
	for k := from; k <= to; k++ {
		if r := sentinel(g.f[k]); r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
			return r
		}
	}
	return nvml.ERROR_NOT_SUPPORTED
}

// owner is the index of the first GPU with this UUID: where NVML lists a
// process row naming it (the K80s of corpus 020 all say "GPU-").
func (fx fixture) owner(uuid string) int {
	for i, g := range fx.gpus {
		if g.row && sentinel(g.f[fUUID]) == nvml.SUCCESS && g.f[fUUID] == uuid {
			return i
		}
	}
	return -1
}

// procsOf lists GPU i's process rows and the code the list answers with.
func (fx fixture) procsOf(i int) ([]fxProc, nvml.Return) {
	if fx.gpus[i].reset() {
		return nil, nvml.ERROR_RESET_REQUIRED
	}
	var out []fxProc
	for _, p := range fx.procs {
		if fx.owner(p.uuid) != i {
			continue
		}
		if r := sentinel(p.pid); r != nvml.SUCCESS {
			return nil, r
		}
		if r := sentinel(p.mem); r != nvml.SUCCESS && r != nvml.ERROR_NOT_SUPPORTED {
			return nil, r
		}
		out = append(out, p)
	}
	return out, nvml.SUCCESS
}
