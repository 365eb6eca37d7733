package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/nvmlfake"
)

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 || out.String() != gpuinfo.HelperSchema+"\n" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if code := run([]string{"--bogus"}, &out, &errb); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteFails(t *testing.T) {
	var errb bytes.Buffer
	if code := run(nil, brokenWriter{}, &errb); code != 1 || !strings.Contains(errb.String(), "broken pipe") {
		t.Errorf("exit %d, stderr %q; want 1 and the write error", code, errb.String())
	}
}

// closingWriter takes n writes, then fails as a pipe whose reader left.
type closingWriter struct {
	n   int
	buf bytes.Buffer
}

func (w *closingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("broken pipe")
	}
	w.n--
	return w.buf.Write(p)
}

// TestWatch: -watch prints one whole document per line per interval, and
// ends quietly when its reader goes away.
func TestWatch(t *testing.T) {
	w := &closingWriter{n: 3}
	var errb bytes.Buffer
	start := time.Now()
	if code := run([]string{"-watch", "100ms"}, w, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing said", code, errb.String())
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("4 documents 100ms apart came in %v", took)
	}
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), w.buf.String())
	}
	for i, l := range lines {
		var doc gpuinfo.HelperDoc
		if err := json.Unmarshal([]byte(l), &doc); err != nil || doc.Schema != gpuinfo.HelperSchema {
			t.Errorf("line %d: %v, schema %q: %s", i, err, doc.Schema, l)
		}
	}
	for _, bad := range []string{"10ms", "2h", "-1s"} {
		errb.Reset()
		if code := run([]string{"-watch", bad}, w, &errb); code != 2 || !strings.Contains(errb.String(), "give an interval from 100ms to 1h0m0s") {
			t.Errorf("-watch %s: exit %d, stderr %q", bad, code, errb.String())
		}
	}
}

// goTool finds the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command to build the helper: %v", err)
	}
	return p
}

// buildHelper builds the helper as the release does (cgo, stripped, lazily
// bound) into a temporary directory.
func buildHelper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gssh-helper")
	build := exec.Command(goTool(t), "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runHelper runs bin with env added and decodes its one-line document.
func runHelper(t *testing.T, bin string, env []string, args ...string) gpuinfo.HelperDoc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v, stderr %q", err, stderr.String())
	}
	if bytes.Count(out, []byte("\n")) != 1 {
		t.Errorf("want one line of JSON, got %q", out)
	}
	var doc gpuinfo.HelperDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if doc.Schema != gpuinfo.HelperSchema || doc.GPUs == nil || doc.Warnings == nil {
		t.Errorf("schema %q, gpus and warnings must be lists: %s", doc.Schema, out)
	}
	return doc
}

// TestHelperBinary builds the helper and runs it. On a host without an
// NVIDIA driver it must start, exit 0 and report
// NVML_ERROR_LIBRARY_NOT_FOUND (12); its helper_sha256 must be the sha256
// of the file. Against the fake libnvidia-ml.so.1 (nvmlfake) it must read
// the fleet fixtures through the real NVML ABI.
func TestHelperBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the helper")
	}
	bin := buildHelper(t)

	// Lazy binding: BIND_NOW would make the helper die at start on a
	// driverless host (corpus 054).
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if flags, _ := f.DynValue(elf.DT_FLAGS); len(flags) > 0 && flags[0]&uint64(elf.DF_BIND_NOW) != 0 {
		t.Error("helper linked with DF_BIND_NOW")
	}
	if flags, _ := f.DynValue(elf.DT_FLAGS_1); len(flags) > 0 && flags[0]&uint64(elf.DF_1_NOW) != 0 {
		t.Error("helper linked with DF_1_NOW")
	}
	if now, _ := f.DynValue(elf.DT_BIND_NOW); len(now) > 0 {
		t.Error("helper has DT_BIND_NOW")
	}
	if libs, _ := f.ImportedLibraries(); len(libs) == 0 {
		t.Error("helper is static: go-nvml segfaults in nvmlInit when linked -static")
	}
	f.Close()

	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	t.Logf("helper: %d bytes, sha256 %x", len(data), sum)

	t.Run("this host", func(t *testing.T) {
		doc := runHelper(t, bin, nil)
		if doc.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("sha256 %q, want %x", doc.SHA256, sum)
		}
		if _, err := os.Stat("/proc/driver/nvidia/version"); err != nil {
			// No driver on this machine.
			if doc.InitCode != 12 || doc.InitError != "ERROR_LIBRARY_NOT_FOUND" || len(doc.GPUs) != 0 {
				t.Errorf("driverless host: init %d %q, %d GPUs; want 12 ERROR_LIBRARY_NOT_FOUND", doc.InitCode, doc.InitError, len(doc.GPUs))
			}
		} else if doc.InitCode == 0 && doc.Driver == "" {
			t.Errorf("driver present, NVML initialised, but no driver version: %+v", doc)
		}
		v, err := exec.Command(bin, "--version").Output()
		if err != nil || string(v) != gpuinfo.HelperSchema+"\n" {
			t.Errorf("--version: %q, %v", v, err)
		}
	})

	t.Run("fake nvml", func(t *testing.T) {
		lib := nvmlfake.Build(t)
		fleet, err := filepath.Abs("../../probe/testdata/fleet")
		if err != nil {
			t.Fatal(err)
		}
		env := func(fixture string) []string {
			return []string{"LD_LIBRARY_PATH=" + lib, nvmlfake.EnvFixtureDir + "=" + filepath.Join(fleet, fixture)}
		}
		t.Run("a100x4", func(t *testing.T) {
			doc := runHelper(t, bin, env("a100x4"))
			if doc.InitCode != 0 || doc.Driver == "" || len(doc.GPUs) != 4 || doc.ProcsBogus {
				t.Fatalf("got %+v", doc)
			}
			for _, g := range doc.GPUs {
				if g.Health != gpuinfo.HealthOK || !strings.HasPrefix(g.UUID, "GPU-") || g.MemTotal == nil || *g.MemTotal != 81920<<20 ||
					!g.ProcsKnown || !strings.HasPrefix(g.BusID, "00000000:") || g.MIGMode != "Disabled" {
					t.Errorf("gpu %d: %+v", g.Index, g)
				}
			}
			if p := doc.GPUs[0].Procs; len(p) != 1 || p[0].PID != 24811 || p[0].GPUUUID != doc.GPUs[0].UUID || p[0].UsedBytes == nil {
				t.Errorf("gpu 0 processes: %+v", p)
			}
		})
		t.Run("lost-gpu", func(t *testing.T) {
			doc := runHelper(t, bin, env("lost-gpu"))
			for _, g := range doc.GPUs {
				if want := g.Index == 1; (g.Health == gpuinfo.HealthLost) != want || want && g.NVMLCode != 15 {
					t.Errorf("gpu %d: health %s code %d", g.Index, g.Health, g.NVMLCode)
				}
			}
		})
		t.Run("h100-mig", func(t *testing.T) {
			doc := runHelper(t, bin, env("h100-mig"))
			if len(doc.GPUs) != 1 {
				t.Fatalf("got %+v", doc)
			}
			g := doc.GPUs[0]
			var profiles []string
			for _, m := range g.MIG {
				if !strings.HasPrefix(m.UUID, "MIG-") {
					t.Errorf("mig uuid %q", m.UUID)
				}
				profiles = append(profiles, m.Profile)
			}
			if g.MIGMode != "Enabled" || strings.Join(profiles, " ") != "3g.40gb 2g.20gb 1g.10gb 1g.10gb" {
				t.Errorf("mig %q: %q", g.MIGMode, profiles)
			}
			if !g.ProcsKnown || len(g.Procs) != 3 {
				t.Errorf("processes (known %v): %+v", g.ProcsKnown, g.Procs)
			}
		})
		t.Run("requires-reset", func(t *testing.T) {
			doc := runHelper(t, bin, env("requires-reset"))
			if len(doc.GPUs) != 2 || doc.GPUs[0].Health != gpuinfo.HealthRequiresReset || doc.GPUs[0].NVMLCode != 16 || doc.GPUs[1].Health != gpuinfo.HealthOK {
				t.Errorf("got %+v", doc.GPUs)
			}
		})
		for fixture, code := range map[string]int{"nvml-missing": 12, "driver-not-loaded": 9, "driver-mismatch": 18} {
			t.Run(fixture, func(t *testing.T) {
				if doc := runHelper(t, bin, env(fixture)); doc.InitCode != code || doc.InitError == "" {
					t.Errorf("init %d %q, want code %d", doc.InitCode, doc.InitError, code)
				}
			})
		}
		t.Run("hang", func(t *testing.T) {
			start := time.Now()
			doc := runHelper(t, bin, env("hang"), "-timeout", "500ms")
			if doc.InitCode != 10 || !strings.Contains(doc.InitError, "500ms") {
				t.Errorf("init %d %q, want 10 (timeout)", doc.InitCode, doc.InitError)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	})
}

// TestHostInfo: the helper reads the host's CPUs and memory from /proc
// and /sys; what is missing is nil and a warning.
func TestHostInfo(t *testing.T) {
	proc, sys := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proc, "meminfo"), "MemTotal:       2048 kB\nMemFree:         100 kB\nMemAvailable:    1024 kB\n")
	write(filepath.Join(proc, "self", "status"), "Name:\tx\nCpus_allowed:\tf0\nCpus_allowed_list:\t4-7\n")
	write(filepath.Join(sys, "devices", "system", "cpu", "online"), "0-15\n")
	h, warns := gpuinfo.ReadHostInfo(proc, sys)
	if h == nil || len(warns) != 0 || *h.CPUs != 4 || h.CPUIDs[0] != 4 || *h.MemTotal != 2048*1024 || *h.MemAvailable != 1024*1024 {
		t.Fatalf("%+v %q", h, warns)
	}
	// No status file: the online CPUs count, unpinned.
	os.Remove(filepath.Join(proc, "self", "status"))
	if h, warns = gpuinfo.ReadHostInfo(proc, sys); h == nil || *h.CPUs != 16 || h.CPUIDs != nil || len(warns) != 1 {
		t.Errorf("no status: %+v %q", h, warns)
	}
	// Nothing at all.
	if h, warns = gpuinfo.ReadHostInfo(t.TempDir(), t.TempDir()); h != nil || len(warns) != 1 {
		t.Errorf("nothing: %+v %q", h, warns)
	}
	// The real one, on Linux.
	if runtime.GOOS == "linux" {
		if h, warns = gpuinfo.ReadHostInfo("/proc", "/sys"); h == nil || *h.CPUs != runtime.NumCPU() || h.MemTotal == nil || h.MemAvailable == nil {
			t.Errorf("this machine: %+v %q", h, warns)
		}
	}
}
