package fakelab

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
)

// SMI answers an nvidia-smi command line (args without argv[0]) from doc,
// the host's document at this moment, writing what nvidia-smi would and
// returning its exit status. It knows what gssh and its users ask:
// --query-gpu and --query-compute-apps in csv format (noheader, nounits
// or not), -L, --version, and no arguments (a short status table). A
// lost GPU is left out of every answer and named on stderr, as corpus
// report 012's driver does; a field it does not know fails the query as
// nvidia-smi does ("Field ... is not a valid field to query.", exit 2).
func SMI(doc gpuinfo.HelperDoc, args []string, stdout, stderr io.Writer) int {
	var query, apps, format string
	list, version := false, false
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--query-gpu="):
			query = strings.TrimPrefix(a, "--query-gpu=")
		case strings.HasPrefix(a, "--query-compute-apps="):
			apps = strings.TrimPrefix(a, "--query-compute-apps=")
		case strings.HasPrefix(a, "--format="):
			format = strings.TrimPrefix(a, "--format=")
		case a == "-L" || a == "--list-gpus":
			list = true
		case a == "--version":
			version = true
		default:
			fmt.Fprintf(stderr, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
			return 2
		}
	}
	for i, g := range doc.GPUs {
		if g.Health == gpuinfo.HealthLost {
			fmt.Fprintf(stderr, "Unable to determine the device handle for GPU%d: %s: Unknown Error\n", i, busID(i))
		}
	}
	header, units := !strings.Contains(format, "noheader"), !strings.Contains(format, "nounits")
	switch {
	case version:
		d := doc.Driver
		fmt.Fprintf(stdout, "NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\nCUDA Version        : %s\n",
			d, strings.TrimPrefix(doc.NVML, "12."), d, doc.CUDA)
	case list:
		for _, g := range ok(doc.GPUs) {
			fmt.Fprintf(stdout, "GPU %d: %s (UUID: %s)\n", g.Index, g.Name, g.UUID)
			for _, m := range g.MIG {
				fmt.Fprintf(stdout, "  MIG %-11s Device %2d: (UUID: %s)\n", m.Profile, m.Index, m.UUID)
			}
		}
	case query != "":
		return table(stdout, query, header, units, len(ok(doc.GPUs)), func(row int, f string) (string, bool) {
			return gpuField(doc, ok(doc.GPUs)[row], f, units)
		})
	case apps != "":
		var procs []struct {
			g gpuinfo.GPU
			p gpuinfo.Proc
		}
		for _, g := range ok(doc.GPUs) {
			for _, p := range g.Procs {
				procs = append(procs, struct {
					g gpuinfo.GPU
					p gpuinfo.Proc
				}{g, p})
			}
		}
		return table(stdout, apps, header, units, len(procs), func(row int, f string) (string, bool) {
			g, p := procs[row].g, procs[row].p
			switch f {
			case "gpu_uuid":
				return g.UUID, true // the parent's, also for a MIG device's process
			case "gpu_name":
				return g.Name, true
			case "gpu_bus_id":
				return g.BusID, true
			case "pid":
				return strconv.Itoa(p.PID), true
			case "process_name", "name":
				return p.Name, true
			case "used_gpu_memory", "used_memory":
				return mib(p.UsedBytes, units), true
			}
			return "", false
		})
	default:
		status(stdout, doc)
	}
	return 0
}

// ok is the GPUs nvidia-smi can still see.
func ok(gpus []gpuinfo.GPU) []gpuinfo.GPU {
	var out []gpuinfo.GPU
	for _, g := range gpus {
		if g.Health != gpuinfo.HealthLost {
			out = append(out, g)
		}
	}
	return out
}

// table writes rows of the comma-separated fields, as nvidia-smi's csv
// format does; a field SMI does not know fails the whole query first.
func table(w io.Writer, fields string, header, units bool, rows int, value func(row int, f string) (string, bool)) int {
	names := strings.Split(fields, ",")
	for _, f := range names {
		if !knownField(f) {
			fmt.Fprintf(w, "Field \"%s\" is not a valid field to query.\n\n", f)
			return 2
		}
	}
	if header {
		fmt.Fprintln(w, strings.Join(names, ", "))
	}
	for r := range rows {
		vals := make([]string, len(names))
		for i, f := range names {
			vals[i], _ = value(r, f)
		}
		fmt.Fprintln(w, strings.Join(vals, ", "))
	}
	return 0
}

// The fields SMI answers.
var fields = map[string]bool{
	"index": true, "uuid": true, "gpu_uuid": true, "pci.bus_id": true, "gpu_bus_id": true, "name": true, "gpu_name": true,
	"memory.total": true, "memory.used": true, "memory.free": true, "utilization.gpu": true, "temperature.gpu": true,
	"driver_version": true, "mig.mode.current": true, "persistence_mode": true, "count": true,
	"pid": true, "process_name": true, "used_gpu_memory": true, "used_memory": true,
}

func knownField(f string) bool { return fields[f] }

// gpuField is field f of GPU g; false for a field SMI does not know.
func gpuField(doc gpuinfo.HelperDoc, g gpuinfo.GPU, f string, units bool) (string, bool) {
	if !knownField(f) {
		return "", false
	}
	switch f {
	case "index":
		return strconv.Itoa(g.Index), true
	case "uuid", "gpu_uuid":
		return g.UUID, true
	case "pci.bus_id", "gpu_bus_id":
		return g.BusID, true
	case "name", "gpu_name":
		return g.Name, true
	case "memory.total":
		return mib(g.MemTotal, units), true
	case "memory.used":
		return mib(g.MemUsed, units), true
	case "memory.free":
		return mib(g.MemFree, units), true
	case "utilization.gpu":
		if g.UtilPct == nil {
			return "[N/A]", true
		}
		if units {
			return strconv.Itoa(*g.UtilPct) + " %", true
		}
		return strconv.Itoa(*g.UtilPct), true
	case "temperature.gpu":
		if g.TempC == nil {
			return "[N/A]", true
		}
		return strconv.Itoa(*g.TempC), true
	case "driver_version":
		return doc.Driver, true
	case "mig.mode.current":
		return g.MIGMode, true
	case "persistence_mode":
		return "Enabled", true
	case "count":
		return strconv.Itoa(len(ok(doc.GPUs))), true
	}
	return "", false
}

// mib is a byte count as nvidia-smi prints memory: whole MiB, " MiB"
// after it unless nounits.
func mib(b *uint64, units bool) string {
	if b == nil {
		return "[N/A]"
	}
	s := strconv.FormatUint(*b>>20, 10)
	if units {
		s += " MiB"
	}
	return s
}

// status is nvidia-smi's default output, shortened: the driver line, one
// line per GPU, its MIG devices, then the processes.
func status(w io.Writer, doc gpuinfo.HelperDoc) {
	fmt.Fprintf(w, "NVIDIA-SMI %s    Driver Version: %s    CUDA Version: %s   (simulated by gssh demo)\n", doc.Driver, doc.Driver, doc.CUDA)
	fmt.Fprintf(w, "GPU  Name                            Bus-Id            Temp  Util  Memory-Usage\n")
	for _, g := range ok(doc.GPUs) {
		util := "N/A"
		if g.UtilPct != nil {
			util = strconv.Itoa(*g.UtilPct) + "%"
		}
		fmt.Fprintf(w, "%3d  %-30s  %s  %3dC  %4s  %s / %s\n", g.Index, g.Name, g.BusID, deref(g.TempC), util, mib(g.MemUsed, true), mib(g.MemTotal, true))
		for _, m := range g.MIG {
			fmt.Fprintf(w, "     MIG %d %-22s  %s / %s\n", m.Index, m.Profile, mib(m.MemUsed, true), mib(m.MemTotal, true))
		}
	}
	fmt.Fprintf(w, "Processes:\nGPU  PID       Process name                     GPU Memory\n")
	for _, g := range ok(doc.GPUs) {
		for _, p := range g.Procs {
			fmt.Fprintf(w, "%3d  %-8d  %-31s  %s\n", g.Index, p.PID, p.Name, mib(p.UsedBytes, true))
		}
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
