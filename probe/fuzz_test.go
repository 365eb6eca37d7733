package probe

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// corpusSeeds returns every corpus capture.
func corpusSeeds(f *testing.F) [][]byte {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// fleetSeeds renders every fleet fixture as SMIScript would print it.
func fleetSeeds(f *testing.F) [][]byte {
	f.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "fleet", "*"))
	if err != nil {
		f.Fatal(err)
	}
	read := func(dir, name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSuffix(string(b), "\n")
	}
	var seeds [][]byte
	for _, d := range dirs {
		rc, _ := strconv.Atoi(read(d, "exit"))
		stderr := read(d, "stderr")
		seeds = append(seeds, script(
			sec{name: "gpu", rc: rc, stderr: stderr, stdout: read(d, "query-gpu.csv")},
			sec{name: "list", rc: rc, stderr: stderr, stdout: read(d, "L.txt")},
			sec{name: "apps", rc: rc, stderr: stderr, stdout: read(d, "query-compute-apps.csv")},
			sec{name: "ps", stdout: read(d, "ps.txt")},
		))
	}
	return seeds
}

func FuzzParseSMI(f *testing.F) {
	for _, s := range fleetSeeds(f) {
		f.Add(s)
	}
	for _, c := range corpusSeeds(f) {
		f.Add(c)
		f.Add(script(sec{name: "gpu", stdout: string(c)}, sec{name: "list", stdout: string(c)}, sec{name: "apps", stdout: string(c)}))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		s, err := ParseSMI("h", out)
		if (err != nil) != (s.State == HostProbeError) {
			t.Fatalf("state %q with error %v", s.State, err)
		}
		if s.Warnings == nil || s.GPUs == nil || s.Source != SourceSMI || s.Host != "h" {
			t.Fatalf("%+v", s)
		}
		bad := 0
		for i, g := range s.GPUs {
			if i > 0 && g.Index <= s.GPUs[i-1].Index {
				t.Fatalf("GPU indices not unique and ascending: %d after %d", g.Index, s.GPUs[i-1].Index)
			}
			if g.Health == "" || g.Procs == nil || (g.Health != HealthOK) != (g.HealthWhy != "") {
				t.Fatalf("GPU %+v", g)
			}
			if g.Health != HealthOK {
				bad++
			}
			if g.Health == HealthLost && g.ProcsKnown {
				t.Fatalf("lost GPU %d with a known process list", g.Index)
			}
		}
		switch s.State {
		case HostOK:
			if bad > 0 {
				t.Fatalf("host ok with %d GPUs not ok", bad)
			}
		case HostDegraded:
			if bad == 0 {
				t.Fatal("host degraded with every GPU ok")
			}
		case HostProbeError:
		default:
			if len(s.GPUs) != 0 || s.Error == "" {
				t.Fatalf("state %q with %d GPUs, error %q", s.State, len(s.GPUs), s.Error)
			}
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	lists := []string{"", smiGPUFields, smiProcFields, strings.Join(fields001, ","), strings.Join(fields005, ","), strings.Join(fields025, ",")}
	for _, c := range corpusSeeds(f) {
		for _, l := range lists {
			f.Add(l, c)
		}
	}
	f.Fuzz(func(t *testing.T, list string, data []byte) {
		var fields []string
		if list != "" {
			fields = strings.Split(list, ",")
		}
		tab, _ := ParseQuery(fields, data)
		for _, r := range tab.Rows {
			if len(r.Values) != len(tab.Fields) {
				t.Fatalf("row %d: %d values for %d fields", r.Line, len(r.Values), len(tab.Fields))
			}
			for _, v := range r.Values {
				if v.Known() == (v.Text == "") {
					t.Fatalf("value %+v", v)
				}
			}
		}
		gpus, _ := tab.GPUs()
		for _, g := range gpus {
			if g.Health == "" || g.Index < 0 {
				t.Fatalf("GPU %+v", g)
			}
		}
		procs, _ := tab.Procs()
		if slices.ContainsFunc(procs, func(p Proc) bool { return p.PID <= 0 }) {
			t.Fatalf("processes %+v", procs)
		}
	})
}

func FuzzParseList(f *testing.F) {
	for _, c := range corpusSeeds(f) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gpus, _ := ParseList(data)
		for _, g := range gpus {
			if g.Index < 0 || g.UUID == "GPU-" {
				t.Fatalf("GPU %+v", g)
			}
			for _, m := range g.MIG {
				if m.Index < 0 || m.Profile == "" {
					t.Fatalf("MIG %+v", m)
				}
			}
		}
	})
}

// BenchmarkParseSMI parses a 4-GPU host's whole probe output.
func BenchmarkParseSMI(b *testing.B) {
	dir := filepath.Join("testdata", "fleet", "a100x4")
	read := func(name string) string {
		s, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return string(s)
	}
	out := script(sec{name: "gpu", stdout: read("query-gpu.csv")}, sec{name: "list", stdout: read("L.txt")},
		sec{name: "apps", stdout: read("query-compute-apps.csv")}, sec{name: "ps", stdout: read("ps.txt")})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSMI("h", out); err != nil {
			b.Fatal(err)
		}
	}
}
