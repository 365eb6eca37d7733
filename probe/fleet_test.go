//go:build unix

package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec"
)

// shRunner runs commands with the local /bin/sh, in env only, like an SSH
// session would on a host (test-only; it answers as sshexec runners do:
// *sshexec.ExitError for a non-zero exit, sshexec.ErrTimeout when ctx ends).
type shRunner struct {
	env []string
}

func (r shRunner) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Env = r.env
	defer sessionStdin(c, stdin)()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	// Kill the whole process group: a hanging nvidia-smi is a grandchild.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	err := c.Run()
	res := sshexec.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: %w", host, sshexec.ErrTimeout)
	case errors.As(err, &exit):
		return res, &sshexec.ExitError{Host: host, Cmd: cmd, Code: exit.ExitCode(), Stderr: stderr.String()}
	}
	return res, err
}

// sessionStdin gives c stdin as an SSH session does: over a pipe closed
// when stdin ends, no longer fed once the command ended (call the
// function returned then), so a stdin that never ends is not waited for.
func sessionStdin(c *exec.Cmd, stdin io.Reader) func() {
	if stdin == nil {
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	c.Stdin = r
	go func() {
		io.Copy(w, stdin)
		w.Close()
	}()
	return func() { r.Close(); w.Close() }
}

// fleetHost returns a runner for fleet fixture name: a PATH whose first
// directory holds nvidia-smi (the fake, unless the fixture has a
// no-nvidia-smi file) and ps (fake-ps), then /usr/bin:/bin.
func fleetHost(t *testing.T, name string) shRunner {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "fleet", name))
	if err != nil {
		t.Fatal(err)
	}
	return fakeHost(t, dir)
}

// fakeHost returns a runner whose nvidia-smi and ps answer from fixture
// directory dir (absolute).
func fakeHost(t *testing.T, dir string) shRunner {
	t.Helper()
	bin := t.TempDir()
	link := func(target, as string) {
		abs, err := filepath.Abs(filepath.Join("testdata", target))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(bin, as)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no-nvidia-smi")); err != nil {
		link("fake-nvidia-smi", "nvidia-smi")
	}
	link("fake-ps", "ps")
	return shRunner{env: []string{"PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + dir}}
}

// fleetWant checks the snapshot of each fleet fixture (testdata/fleet/NAME).
var fleetWant = map[string]func(t *testing.T, s Snapshot, err error){
	"a100x4": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 4)
		if s.Driver != "535.161.08" || len(s.Warnings) != 0 {
			t.Errorf("driver %q, warnings %q", s.Driver, s.Warnings)
		}
		for _, g := range s.GPUs {
			if !eqU64(g.MemTotal, mib(81920)) || g.Name != "NVIDIA A100-SXM4-80GB" || !g.Schedulable() || !g.ProcsKnown {
				t.Errorf("GPU %d: %+v", g.Index, g)
			}
		}
		g0 := s.GPUs[0]
		if !eqU64(g0.MemUsed, mib(40563)) || !eqU64(g0.MemFree, mib(40865)) || !eqInt(g0.UtilPct, 87) || !eqInt(g0.TempC, 61) || g0.BusID != "00000000:07:00.0" {
			t.Errorf("GPU 0: %+v", g0)
		}
		wantProcs(t, s.GPUs[0], "24811 python alice 40552")
		wantProcs(t, s.GPUs[1], "30112 /home/bob/runs/lr=3e-4,bs=64/bin/python3 bob 20480", "30113 /home/jürgen/模型/train ✓ jürgen 1016")
		wantProcs(t, s.GPUs[2], `4471 /opt/"odd" dir\bin\infer - 504`)
		wantProcs(t, s.GPUs[3])
	},
	"h100-mig": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 1)
		g := s.GPUs[0]
		if g.MIGMode != "Enabled" || g.UtilPct != nil || !eqU64(g.MemUsed, mib(11125)) || !eqU64(g.MemFree, mib(69956)) || !eqU64(g.MemTotal, mib(81559)) {
			t.Errorf("GPU 0: %+v", g)
		}
		var profiles []string
		for _, m := range g.MIG {
			profiles = append(profiles, m.Profile)
			if !strings.HasPrefix(m.UUID, "MIG-") {
				t.Errorf("MIG %d UUID %q", m.Index, m.UUID)
			}
		}
		if strings.Join(profiles, " ") != "3g.40gb 2g.20gb 1g.10gb 1g.10gb" {
			t.Errorf("MIG devices %v", profiles)
		}
		wantProcs(t, g, "21180 /root/tools/memhog root 2296", "21181 /root/tools/memhog root 1272", "21198 ./gpu_burn root 7484")
	},
	"lost-gpu": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostDegraded, 4)
		for i, g := range s.GPUs {
			if g.Index != i {
				t.Errorf("GPU at %d has index %d", i, g.Index)
			}
		}
		lost := s.GPUs[1]
		if lost.Health != HealthLost || lost.BusID != "00000000:34:00.0" || !strings.Contains(lost.HealthWhy, "Unable to determine the device handle for GPU1") || lost.ProcsKnown || lost.Schedulable() {
			t.Errorf("GPU 1: %+v", lost)
		}
		for i, used := range map[int]uint64{0: 88450, 2: 88450, 3: 10} {
			if g := s.GPUs[i]; !eqU64(g.MemUsed, mib(used)) || g.Health != HealthOK {
				t.Errorf("GPU %d: used %v, health %s; want %d MiB, ok", i, show(g.MemUsed), g.Health, used)
			}
		}
		wantProcs(t, s.GPUs[0], "6194 VLLM::Worker_TP1 - 88438")
		wantProcs(t, s.GPUs[2], "6193 VLLM::Worker_TP0 - 88438")
		if !strings.Contains(s.Error, "GPU 1 lost") {
			t.Errorf("error %q", s.Error)
		}
	},
	"err-gpu": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostDegraded, 2)
		g0, g1 := s.GPUs[0], s.GPUs[1]
		if g0.Health != HealthError || g0.Schedulable() || !eqU64(g0.MemUsed, 0) || !strings.Contains(g0.HealthWhy, "ERR!") {
			t.Errorf("GPU 0 shows 0 MiB used but must be unschedulable: %+v", g0)
		}
		if g1.Name != "NVIDIA A40" || g1.Health != HealthOK || !eqU64(g1.MemUsed, 0) || !eqU64(g1.MemTotal, mib(46068)) {
			t.Errorf("GPU 1: %+v", g1)
		}
	},
	"requires-reset": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostDegraded, 2)
		g0 := s.GPUs[0]
		if g0.Health != HealthRequiresReset || g0.MemTotal != nil || g0.MemoryState != FieldRequiresReset || g0.Schedulable() {
			t.Errorf("GPU 0: %+v", g0)
		}
		if s.GPUs[1].Health != HealthOK {
			t.Errorf("GPU 1: %+v", s.GPUs[1])
		}
		wantProcs(t, s.GPUs[1], "8812 python3 dana 10750")
	},
	"gb10-unified": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 1)
		g := s.GPUs[0]
		if g.MemTotal != nil || g.MemUsed != nil || g.MemFree != nil || g.MemoryState != MemoryUnified || !g.Schedulable() {
			t.Errorf("GPU 0: %+v", g)
		}
		wantProcs(t, g, "51234 python3 erin 22310")
	},
	"empty-uuid": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 5)
		for _, g := range s.GPUs {
			if (g.Index == 2) != (g.UUID != "") {
				t.Errorf("GPU %d UUID %q", g.Index, g.UUID)
			}
			// The process on a K80 without a UUID could be on any of
			// them: none of their lists is known.
			if g.ProcsKnown != (g.Index == 2) {
				t.Errorf("GPU %d processes known = %v", g.Index, g.ProcsKnown)
			}
		}
		wantProcs(t, s.GPUs[2], "7002 blender gina 2044")
		wantWarning(t, s, "process 7001 runs on a GPU without a UUID")
	},
	"perm-denied": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 1)
		g := s.GPUs[0]
		if g.MemTotal != nil || g.MemUsed != nil || g.MemFree != nil || g.MemoryState != FieldNoPermission || g.UtilPct != nil || !eqInt(g.TempC, 47) {
			t.Errorf("GPU 0: %+v", g)
		}
		if g.ProcsKnown || len(g.Procs) != 0 || len(g.MIG) != 1 {
			t.Errorf("GPU 0: processes known %v %v, MIG %v", g.ProcsKnown, g.Procs, g.MIG)
		}
		wantWarning(t, s, "pid: insufficient permissions: process skipped")
	},
	"driver-not-loaded": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostDriverNotLoaded, 0)
		wantError(t, s, "couldn't communicate with the NVIDIA driver")
	},
	"driver-mismatch": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostDriverMismatch, 0)
		wantError(t, s, "Driver/library version mismatch")
	},
	"nvml-missing": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostNVMLNotFound, 0)
		wantError(t, s, "couldn't find libnvidia-ml.so")
	},
	"no-devices": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostNoDevices, 0)
		wantError(t, s, "No devices were found")
	},
	"garbage": func(t *testing.T, s Snapshot, err error) {
		if s.State != HostProbeError || !errors.Is(err, ErrUnparsable) || len(s.GPUs) != 0 {
			t.Fatalf("state %q, %d GPUs, error %v", s.State, len(s.GPUs), err)
		}
		wantError(t, s, `row 1: wrong number of fields: expected 11 (index, uuid, `)
	},
	"warning-mixed": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostOK, 2)
		if len(s.Warnings) != 1 || s.Warnings[0] != "WARNING: infoROM is corrupted at gpu 0000:04:00.0" {
			t.Errorf("warnings %q, want the infoROM warning once", s.Warnings)
		}
		wantProcs(t, s.GPUs[0], "3411 /usr/bin/ffmpeg hank 1206")
	},
	"hang": func(t *testing.T, s Snapshot, err error) {
		if s.State != HostTimeout || !errors.Is(err, sshexec.ErrTimeout) || len(s.GPUs) != 0 {
			t.Errorf("state %q, error %v", s.State, err)
		}
	},
	"v100-r418": func(t *testing.T, s Snapshot, err error) {
		// Without GSSH_FAKE_SMI_DRIVER=418 it answers as a newer driver
		// would; TestSMIOldDriver runs it as R418.
		wantOldV100(t, s, err)
		if len(s.MissingFields) != 0 || len(s.Warnings) != 0 {
			t.Errorf("missing %q, warnings %q", s.MissingFields, s.Warnings)
		}
	},
	"bin-missing": func(t *testing.T, s Snapshot, err error) {
		wantState(t, s, err, HostSMIMissing, 0)
		wantError(t, s, "nvidia-smi not found on PATH, in /usr/lib/wsl/lib or in /usr/bin: ")
		wantError(t, s, "not found") // the shell's own words: dash "nvidia-smi: not found", bash "command not found"
	},
}

// wantOldV100 checks the GPUs of fixture v100-r418, whichever the driver.
func wantOldV100(t *testing.T, s Snapshot, err error) {
	t.Helper()
	wantState(t, s, err, HostOK, 2)
	for _, g := range s.GPUs {
		if g.Name != "Tesla V100-SXM2-32GB" || !eqU64(g.MemTotal, mib(32510)) || g.MIGMode != "" || g.TempC == nil || !g.Schedulable() {
			t.Errorf("GPU %d: %+v", g.Index, g)
		}
	}
	if s.Driver != "418.87.01" || !eqU64(s.GPUs[1].MemFree, mib(32510)) {
		t.Errorf("driver %q, GPU 1 %+v", s.Driver, s.GPUs[1])
	}
	wantProcs(t, s.GPUs[0], "5120 python ivan 16252")
	wantProcs(t, s.GPUs[1])
}

// runCount counts the runs of a Runner: one per probe script.
type runCount struct {
	Runner
	n int
}

func (r *runCount) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	r.n++
	return r.Runner.Run(ctx, host, cmd, stdin)
}

// TestSMIOldDriver runs the probe script for real against the fake
// nvidia-smi playing an R418 driver (GSSH_FAKE_SMI_DRIVER=418), which
// rejects mig.mode.current as the real one does: the GPUs are listed with
// MIG mode unknown, and once the memo knows, a probe is one run.
func TestSMIOldDriver(t *testing.T) {
	host := fleetHost(t, "v100-r418")
	host.env = append(host.env, "GSSH_FAKE_SMI_DRIVER=418")
	run := &runCount{Runner: host}
	memo := &fieldMemo{}
	ctx := context.Background()
	for i, runs := range []int{2, 1, 1} {
		run.n = 0
		s, err := SMIMemo(run, "oldsmi", memo).Snapshot(ctx)
		wantOldV100(t, s, err)
		if run.n != runs || !slices.Equal(s.MissingFields, []string{"mig.mode.current"}) {
			t.Errorf("probe %d: %d runs, missing %q; want %d runs", i+1, run.n, s.MissingFields, runs)
		}
		if !slices.Equal(s.Warnings, []string{"old driver 418.87.01: nvidia-smi cannot report MIG mode (it does not know mig.mode.current); shown as unknown"}) {
			t.Errorf("probe %d: warnings %q", i+1, s.Warnings)
		}
		liveHost(t, &s)
		golden(t, "fleet/v100-r418-as-r418", s)
	}
	// Without a memo every probe asks twice, and still lists the GPUs.
	run.n = 0
	s, err := SMI(run, "oldsmi").Snapshot(ctx)
	wantOldV100(t, s, err)
	if run.n != 2 {
		t.Errorf("without a memo: %d runs", run.n)
	}
}

// TestFleetFixtures runs SMIScript for real, with /bin/sh, against the fake
// nvidia-smi over every fleet fixture, and checks each snapshot.
func TestFleetFixtures(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	for name := range fleetWant {
		if !slices.Contains(names, name) {
			t.Errorf("no fixture testdata/fleet/%s", name)
		}
	}
	for _, name := range names {
		want := fleetWant[name]
		if want == nil {
			t.Errorf("fixture %s has no checks in fleetWant", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "bin-missing" {
				for _, p := range []string{"/usr/bin/nvidia-smi", "/usr/lib/wsl/lib/nvidia-smi"} {
					if _, err := os.Stat(p); err == nil {
						t.Skipf("%s exists (a GPU machine, not CI): the script finds it", p)
					}
				}
			}
			timeout := 20 * time.Second
			if name == "hang" {
				timeout = time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			s, err := SMI(fleetHost(t, name), name).Snapshot(ctx)
			if took := time.Since(start); took > timeout+5*time.Second {
				t.Errorf("probe took %v, past its %v deadline", took, timeout)
			}
			if s.Host != name || s.Source != SourceSMI {
				t.Errorf("host %q source %q", s.Host, s.Source)
			}
			want(t, s, err)
			if name != "hang" {
				liveHost(t, &s)
			}
			if name != "bin-missing" { // its error is the shell's message, which varies
				golden(t, "fleet/"+name, s)
			}
		})
	}
}

// liveHost checks the host facts SMIScript read of this machine (its
// CPUs and memory: as the Go runtime sees them on Linux) and replaces them
// with fixed ones, so that snapshots compare across machines and runs
// (MemAvailable moves while the tests run).
func liveHost(t *testing.T, s *Snapshot) {
	t.Helper()
	h := s.HostInfo
	if runtime.GOOS != "linux" {
		if h != nil {
			t.Errorf("host facts %+v on %s, which has no /proc", h, runtime.GOOS)
		}
		return
	}
	switch {
	case h == nil:
		t.Fatalf("no host facts from /proc (warnings %q)", s.Warnings)
	case h.CPUs == nil || *h.CPUs != runtime.NumCPU() || len(h.CPUIDs) != *h.CPUs:
		t.Errorf("CPUs %v ids %v; want %d (runtime.NumCPU, this process's affinity)", show(h.CPUs), h.CPUIDs, runtime.NumCPU())
	case h.MemTotal == nil || *h.MemTotal < 64<<20 || *h.MemTotal%1024 != 0:
		t.Errorf("MemTotal %v", show(h.MemTotal))
	case h.MemAvailable == nil || *h.MemAvailable > *h.MemTotal:
		t.Errorf("MemAvailable %v of MemTotal %v", show(h.MemAvailable), *h.MemTotal)
	}
	cpus, total, avail := 4, uint64(16<<30), uint64(8<<30)
	s.HostInfo = &HostInfo{CPUs: &cpus, CPUIDs: []int{0, 1, 2, 3}, MemTotal: &total, MemAvailable: &avail}
}

// wantState checks a snapshot's state and GPU count.
func wantState(t *testing.T, s Snapshot, err error, state HostState, gpus int) {
	t.Helper()
	if err != nil || s.State != state || len(s.GPUs) != gpus {
		t.Fatalf("state %q (%s), %d GPUs, error %v; want %q with %d GPUs", s.State, s.Error, len(s.GPUs), err, state, gpus)
	}
}

// wantError checks that the snapshot's error holds part.
func wantError(t *testing.T, s Snapshot, part string) {
	t.Helper()
	if !strings.Contains(s.Error, part) {
		t.Errorf("error %q, want it to hold %q", s.Error, part)
	}
}

// wantWarning checks that one warning holds part.
func wantWarning(t *testing.T, s Snapshot, part string) {
	t.Helper()
	for _, w := range s.Warnings {
		if strings.Contains(w, part) {
			return
		}
	}
	t.Errorf("warnings %q, want one holding %q", s.Warnings, part)
}

// wantProcs checks a GPU's processes, each "PID NAME USER MiB" (user "-"
// for unknown), and that its list is known.
func wantProcs(t *testing.T, g GPU, want ...string) {
	t.Helper()
	var got []string
	for _, p := range g.Procs {
		user := p.User
		if user == "" {
			user = "-"
		}
		got = append(got, fmt.Sprintf("%d %s %s %s", p.PID, p.Name, user, fmt.Sprint(show(p.UsedBytes))))
	}
	var wantB []string
	for _, w := range want {
		i := strings.LastIndex(w, " ")
		var n uint64
		fmt.Sscan(w[i+1:], &n)
		wantB = append(wantB, fmt.Sprintf("%s %d", w[:i], mib(n)))
	}
	if !slices.Equal(got, wantB) || !g.ProcsKnown {
		t.Errorf("GPU %d processes (known %v):\n got %q\nwant %q", g.Index, g.ProcsKnown, got, wantB)
	}
}

// TestSMIScriptShells runs the script under every POSIX-ish shell present
// (a login shell runs it as is): each must give /bin/sh's snapshot.
func TestSMIScriptShells(t *testing.T) {
	want, err := SMI(fleetHost(t, "a100x4"), "a100x4").Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	liveHost(t, &want)
	for _, sh := range [][]string{{"dash"}, {"bash"}, {"bash", "--posix"}, {"zsh"}, {"ksh"}, {"mksh"}, {"busybox", "sh"}} {
		path, err := exec.LookPath(sh[0])
		if err != nil {
			continue
		}
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			r := fleetHost(t, "a100x4")
			got, err := SMI(shellRunner{r, append([]string{path}, sh[1:]...)}, "a100x4").Snapshot(context.Background())
			liveHost(t, &got)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("error %v\n got %+v\nwant %+v", err, got, want)
			}
		})
	}
}

// shellRunner is shRunner with another shell.
type shellRunner struct {
	shRunner
	shell []string
}

func (r shellRunner) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	c := exec.CommandContext(ctx, r.shell[0], append(r.shell[1:], "-c", cmd)...)
	c.Env = r.env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as sshd gives a session
	defer sessionStdin(c, stdin)()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	return sshexec.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, err
}

// TestSMIScriptMarkerInjection: a process name may hold newlines (argv[0]
// is any bytes); lines that look like the script's markers must not let a
// user replace the GPU list or the process owners.
func TestSMIScriptMarkerInjection(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"query-gpu.csv":          "0, GPU-real, 00000000:01:00.0, NVIDIA L4, 23034, 100, 22600, 5, 40, 550.54.15, [N/A]\n",
		"L.txt":                  "GPU 0: NVIDIA L4 (UUID: GPU-real)\n",
		"query-compute-apps.csv": "GPU-real, 5, evil\n@@gssh section=gpu rc=0@@\n0, GPU-fake, 00000000:09:00.0, Fake, 1, 1, 0, 0, 0, 1, [N/A]\n@@gssh section=ps rc=0@@\n5 root\n@@gssh end@@, 90\n",
		"ps.txt":                 "5 mallory\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := SMI(fakeHost(t, dir), "h").Snapshot(context.Background())
	wantState(t, s, err, HostOK, 1)
	if g := s.GPUs[0]; g.UUID != "GPU-real" || g.ProcsKnown {
		t.Errorf("GPU %+v: want the real one, its process list unknown", g)
	}
	wantWarning(t, s, "wrong number of fields")
	for _, g := range s.GPUs {
		for _, p := range g.Procs {
			if p.User == "root" {
				t.Errorf("process %d attributed to root", p.PID)
			}
		}
	}
}
