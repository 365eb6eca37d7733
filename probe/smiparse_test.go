package probe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// sec is one section of SMIScript's output, for building inputs.
type sec struct {
	name   string
	rc     int
	stderr string
	stdout string
}

// script renders sections as SMIScript prints them, then its end marker.
func script(secs ...sec) []byte {
	var b strings.Builder
	for _, s := range secs {
		fmt.Fprintf(&b, "@@gssh section=%s@@\n%s\n@@gssh section=%s rc=%d@@\n%s\n", s.name, s.stderr, s.name, s.rc, s.stdout)
	}
	b.WriteString("@@gssh end@@\n")
	return []byte(b.String())
}

// row is a --query-gpu row in SMIScript's field order.
func row(index int, uuid, bus, name string, total, used int) string {
	return fmt.Sprintf("%d, %s, %s, %s, %d, %d, %d, 0, 30, 550.54.15, [N/A]", index, uuid, bus, name, total, used, total-used-300)
}

// healthy is a whole output: two GPUs, one process each, -L and ps.
func healthy() []sec {
	return []sec{
		{name: "gpu", stdout: row(0, "GPU-a", "00000000:01:00.0", "NVIDIA L40S", 46068, 1000) + "\n" + row(1, "GPU-b", "00000000:02:00.0", "NVIDIA L40S", 46068, 0)},
		{name: "list", stdout: "GPU 0: NVIDIA L40S (UUID: GPU-a)\nGPU 1: NVIDIA L40S (UUID: GPU-b)"},
		{name: "apps", stdout: "GPU-a, 100, python, 990"},
		{name: "ps", stdout: "    100 ann"},
	}
}

func TestParseSMIHealthy(t *testing.T) {
	s, err := ParseSMI("h", script(healthy()...))
	wantState(t, s, err, HostOK, 2)
	if s.Host != "h" || s.Source != SourceSMI || s.Driver != "550.54.15" || len(s.Warnings) != 0 {
		t.Errorf("%+v", s)
	}
	g := s.GPUs[0]
	if g.UUID != "GPU-a" || !eqU64(g.MemUsed, mib(1000)) || !eqU64(g.MemFree, mib(46068-1000-300)) || !eqInt(g.TempC, 30) || g.MIGMode != "" {
		t.Errorf("GPU 0: %+v", g)
	}
	wantProcs(t, s.GPUs[0], "100 python ann 990")
	wantProcs(t, s.GPUs[1])
	golden(t, "smi/healthy", s)
}

// TestParseSMIFailures: nvidia-smi printed no rows; the exit status, then
// the text, name the state (corpus 008, 009, 010, 022, 023).
func TestParseSMIFailures(t *testing.T) {
	cases := []struct {
		corpus string
		text   string
		rc     int
		stderr bool
		want   HostState
	}{
		{corpus: "008", rc: 9, want: HostDriverNotLoaded},
		{corpus: "008", rc: 255, want: HostDriverNotLoaded},
		{corpus: "009", rc: 18, want: HostDriverMismatch},
		{corpus: "009", rc: 255, stderr: true, want: HostDriverMismatch},
		{corpus: "010", rc: 6, want: HostNoDevices},
		{corpus: "010", rc: 0, want: HostNoDevices},
		{corpus: "022", rc: 12, want: HostNVMLNotFound},
		{corpus: "022", rc: 1, stderr: true, want: HostNVMLNotFound},
		{corpus: "023", rc: 127, stderr: true, want: HostSMIMissing},
		{corpus: "023", rc: 1, stderr: true, want: HostSMIMissing},
		{text: "sh: 1: nvidia-smi: Permission denied", rc: 126, stderr: true, want: HostSMIMissing},
		// The exit status decides before the text.
		{text: "No devices were found", rc: 9, want: HostDriverNotLoaded},
		{text: "Failed to initialize NVML: Unknown Error", rc: 255, want: HostProbeError},
		{text: "", rc: 0, want: HostProbeError},
	}
	for _, c := range cases {
		text := c.text
		if c.corpus != "" {
			text = string(corpus(t, c.corpus))
		}
		s := sec{name: "gpu", rc: c.rc, stdout: text}
		if c.stderr {
			s = sec{name: "gpu", rc: c.rc, stderr: text}
		}
		t.Run(fmt.Sprintf("%s%s-rc%d", c.corpus, c.want, c.rc), func(t *testing.T) {
			snap, err := ParseSMI("h", script(s))
			if snap.State != c.want || len(snap.GPUs) != 0 {
				t.Fatalf("state %q (%s), %d GPUs; want %q", snap.State, snap.Error, len(snap.GPUs), c.want)
			}
			if (err != nil) != (c.want == HostProbeError) || (err != nil && !errors.Is(err, ErrUnparsable)) {
				t.Errorf("error %v", err)
			}
			first := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
			if !strings.Contains(snap.Error, first) || snap.Error == "" {
				t.Errorf("error %q, want the tool's message %q", snap.Error, first)
			}
		})
	}
}

// TestParseSMILost: GPUs nvidia-smi could not read are listed as lost
// under their own index, never renumbering the others.
func TestParseSMILost(t *testing.T) {
	const line012 = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error"
	const lostBus = "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU"
	r0 := row(0, "GPU-a", "00000000:01:00.0", "A", 1000, 1)
	r1 := row(1, "GPU-b", "00000000:02:00.0", "B", 1000, 1)
	r2 := row(2, "GPU-c", "00000000:03:00.0", "C", 1000, 1)
	cases := []struct {
		name    string
		secs    []sec
		lost    int    // index of the lost GPU
		gpus    int    // GPUs listed in all
		why     string // part of its HealthWhy
		bus     string // its bus id
		gpuName string
	}{
		{"error line on stdout", []sec{{name: "gpu", stdout: line012 + "\n" + r0 + "\n" + r2}}, 1, 3, line012, "00000000:34:00.0", ""},
		{"error line on stderr of every call", []sec{
			{name: "gpu", stderr: line012, stdout: r0 + "\n" + r2},
			{name: "list", stderr: line012, stdout: "GPU 0: A (UUID: GPU-a)\nGPU 2: C (UUID: GPU-c)"},
			{name: "apps", stderr: line012},
		}, 1, 3, line012, "00000000:34:00.0", ""},
		{"bus id only fills the gap", []sec{{name: "gpu", stdout: lostBus + "\n" + r0 + "\n" + r2}}, 1, 3, "GPU is lost", "00000000:02:00.0", ""},
		{"bus id of a listed row", []sec{{name: "gpu", stderr: lostBus, stdout: r0 + "\n" + r1}}, 1, 2, "GPU is lost", "00000000:02:00.0", "B"},
		{"gap without a message", []sec{{name: "gpu", stdout: r0 + "\n" + r2}}, 1, 3, "no row for GPU 1", "", ""},
		{"-L names a GPU the query lacks", []sec{
			{name: "gpu", stdout: r0 + "\n" + r1},
			{name: "list", stdout: "GPU 0: A (UUID: GPU-a)\nGPU 1: B (UUID: GPU-b)\nGPU 2: C (UUID: GPU-c)"},
		}, 2, 3, "nvidia-smi -L lists it", "", "C"},
		{"every GPU lost", []sec{{name: "gpu", rc: 15, stdout: line012}}, 1, 2, line012, "00000000:34:00.0", ""},
		{"[GPU is lost] field", []sec{{name: "gpu", stdout: r0 + "\n1, GPU-b, 00000000:02:00.0, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], 550.54.15, [N/A]"}}, 1, 2, "[GPU is lost]", "00000000:02:00.0", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseSMI("h", script(c.secs...))
			wantState(t, s, err, HostDegraded, c.gpus)
			for i, g := range s.GPUs {
				if g.Index != i {
					t.Errorf("GPU %d listed at %d", g.Index, i)
				}
				if (g.Health == HealthLost) != (g.Index == c.lost) && !(c.name == "every GPU lost" && g.Index == 0) {
					t.Errorf("GPU %d health %q", g.Index, g.Health)
				}
			}
			g := s.GPUs[c.lost]
			if !strings.Contains(g.HealthWhy, c.why) || g.BusID != c.bus || g.Name != c.gpuName || g.ProcsKnown || g.Schedulable() {
				t.Errorf("lost GPU: %+v", g)
			}
			if !strings.Contains(s.Error, fmt.Sprintf("GPU %d lost", c.lost)) {
				t.Errorf("host error %q", s.Error)
			}
		})
	}
}

// TestParseSMIQueryExitWithRows: nvidia-smi exits non-zero (15: a GPU fell
// off the bus) yet prints the other GPUs: they are kept, with a warning.
func TestParseSMIQueryExitWithRows(t *testing.T) {
	secs := healthy()
	secs[0].rc = 15
	s, err := ParseSMI("h", script(secs...))
	wantState(t, s, err, HostOK, 2)
	wantWarning(t, s, "nvidia-smi --query-gpu: exit status 15")
	wantProcs(t, s.GPUs[0], "100 python ann 990")
}

// TestParseSMIProblems: output gssh cannot understand is a probe error
// that says where, never a panic and never rows dropped in silence.
func TestParseSMIProblems(t *testing.T) {
	good := row(0, "GPU-a", "00000000:01:00.0", "A", 1000, 1)
	cases := []struct {
		name string
		out  []byte
		gpus int
		want string
	}{
		{"empty", nil, 0, "no nvidia-smi section"},
		{"not the script (csh)", []byte("Illegal variable name.\n"), 0, `is the login shell POSIX sh?): "Illegal variable name."`},
		{"no gpu section", script(sec{name: "list", stdout: "GPU 0: A (UUID: GPU-a)"}), 0, "no --query-gpu section"},
		{"gpu section cut short", []byte("@@gssh section=gpu@@\n"), 0, "output ends before its exit status"},
		{"a garbage row among good ones", script(sec{name: "gpu", stdout: good + "\nsomething else"}), 1, "row 2: wrong number of fields: expected 11"},
		{"index not a number", script(sec{name: "gpu", stdout: strings.Replace(good, "0,", "x,", 1)}), 0, `row 1: index: "x" is not a whole number`},
		{"memory not a number", script(sec{name: "gpu", stdout: strings.Replace(good, "1000,", "lots,", 1)}), 0, `row 1: memory.total: "lots" is not a memory size`},
		{"index twice", script(sec{name: "gpu", stdout: good + "\n" + good}), 1, "GPU index 0 appears twice"},
		{"many garbage rows", script(sec{name: "gpu", stdout: "a\nb\nc"}), 0, "row 1: wrong number of fields: expected 11 (index, uuid, pci.bus_id, name, memory.total, memory.used, memory.free, utilization.gpu, temperature.gpu, driver_version, mig.mode.current), got 1: \"a\" (and 2 more)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseSMI("h", c.out)
			if s.State != HostProbeError || !errors.Is(err, ErrUnparsable) || len(s.GPUs) != c.gpus {
				t.Fatalf("state %q, %d GPUs, error %v", s.State, len(s.GPUs), err)
			}
			if !strings.Contains(s.Error, c.want) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to hold %q", s.Error, c.want)
			}
		})
	}
	_, err := ParseSMI("h", script(sec{name: "gpu", stdout: good + "\nx"}))
	if !errors.Is(err, ErrFieldCount) {
		t.Errorf("error %v does not wrap ErrFieldCount", err)
	}
}

// TestParseSMIWarnings: text around the data goes to Warnings, once.
func TestParseSMIWarnings(t *testing.T) {
	const rom = "WARNING: infoROM is corrupted at gpu 0000:01:00.0"
	secs := healthy()
	secs[0].stdout = rom + "\n" + secs[0].stdout
	secs[1].stderr = rom
	secs[2].stdout = rom + "\n" + secs[2].stdout
	out := append([]byte("Welcome to node7!\nLast login: never\n"), script(secs...)...)
	out = []byte(strings.Replace(string(out), "@@gssh end@@\n", "", 1))
	s, err := ParseSMI("h", out)
	wantState(t, s, err, HostOK, 2)
	want := []string{
		`output outside the probe's sections (login scripts?): "Welcome to node7!" (and 1 more lines)`,
		rom,
		"the probe script's output ends early: later sections may be missing",
	}
	if strings.Join(s.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%q\nwant\n%q", s.Warnings, want)
	}
	wantProcs(t, s.GPUs[0], "100 python ann 990")
}

// TestParseSMIProcs: how processes attach to GPUs, and when a GPU's list
// is unknown rather than empty.
func TestParseSMIProcs(t *testing.T) {
	with := func(apps sec, ps string) []sec {
		s := healthy()
		s[2], s[3].stdout = apps, ps
		return s
	}
	t.Run("MIG device UUID attaches to the parent", func(t *testing.T) {
		secs := with(sec{name: "apps", stdout: "MIG-x, 7, a.out, 5"}, "")
		secs[1].stdout += "\n  MIG 1g.10gb     Device  0: (UUID: MIG-x)"
		s, err := ParseSMI("h", script(secs...))
		wantState(t, s, err, HostOK, 2)
		wantProcs(t, s.GPUs[1], "7 a.out - 5")
		if len(s.GPUs[1].MIG) != 1 || s.GPUs[1].MIG[0].UUID != "MIG-x" {
			t.Errorf("MIG %+v", s.GPUs[1].MIG)
		}
	})
	t.Run("unknown GPU UUID", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", stdout: "GPU-z, 7, a.out, 5"}, "")...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "process 7 runs on GPU GPU-z, which --query-gpu does not list")
		wantProcs(t, s.GPUs[0])
		wantProcs(t, s.GPUs[1])
	})
	t.Run("query failed", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", rc: 4, stderr: "Insufficient Permissions"}, "")...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "nvidia-smi --query-compute-apps: exit status 4: Insufficient Permissions")
		if s.GPUs[0].ProcsKnown || s.GPUs[1].ProcsKnown {
			t.Error("process lists known after the query failed")
		}
	})
	t.Run("no running processes", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", stdout: "No running processes found"}, "")...))
		wantState(t, s, err, HostOK, 2)
		wantProcs(t, s.GPUs[0])
		wantProcs(t, s.GPUs[1])
	})
	t.Run("unreadable row", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", stdout: "GPU-a, 7, a.out, 5\nGPU-b, 8"}, "    7 zoe\n")...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "row 2: wrong number of fields")
		if s.GPUs[0].ProcsKnown || s.GPUs[1].ProcsKnown || len(s.GPUs[0].Procs) != 1 || s.GPUs[0].Procs[0].User != "zoe" {
			t.Errorf("%+v", s.GPUs)
		}
	})
	t.Run("pid 0", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", stdout: "GPU-b, 0, a.out, 5"}, "")...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "pid: 0 is not a process id: process skipped; the process list of GPU 1 is incomplete")
		if !s.GPUs[0].ProcsKnown || s.GPUs[1].ProcsKnown {
			t.Errorf("known: %v %v", s.GPUs[0].ProcsKnown, s.GPUs[1].ProcsKnown)
		}
	})
	t.Run("ps garbage", func(t *testing.T) {
		s, err := ParseSMI("h", script(with(sec{name: "apps", stdout: "GPU-a, 7, a.out, 5"}, "error: unsupported option\n")...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "ps: row 1: not `PID USER`")
		wantProcs(t, s.GPUs[0], "7 a.out - 5")
	})
	t.Run("apps never ran", func(t *testing.T) {
		secs := healthy()[:2]
		s, err := ParseSMI("h", script(secs...))
		wantState(t, s, err, HostOK, 2)
		wantWarning(t, s, "--query-compute-apps did not run")
		if s.GPUs[0].ProcsKnown {
			t.Error("process list known without the query")
		}
	})
}

func TestParseMarker(t *testing.T) {
	for in, want := range map[string]string{
		"@@gssh section=gpu@@":         "gpu -1",
		"@@gssh section=gpu rc=9@@":    "gpu 9",
		"@@gssh section=ps rc=-1@@":    "ps -1 rc",
		"@@gssh end@@":                 "end -1",
		"@@gssh section=gpu rc=x@@":    "",
		"@@gssh section= rc=0@@":       "",
		"@@gssh section=gpu rc=0 x@@":  "",
		"@@gssh section=gpu":           "",
		" @@gssh section=gpu@@":        "",
		"@@gssh section=gpu foo=1@@":   "",
		"GPU-1, @@gssh section=gpu@@":  "",
		"@@gssh section=gpu rc=0@@ \t": "",
	} {
		name, rc, hasRC, ok := parseMarker(in)
		got := ""
		switch {
		case ok && hasRC && rc < 0:
			got = fmt.Sprintf("%s %d rc", name, rc)
		case ok && hasRC:
			got = fmt.Sprintf("%s %d", name, rc)
		case ok:
			got = name + " -1"
		}
		if got != want {
			t.Errorf("parseMarker(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCanonicalBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:34:00.0":     "00000000:34:00.0",
		"00000000:AC:00.0": "00000000:AC:00.0",
		"0000:ac:00.0":     "00000000:AC:00.0",
		"0001:02:00.0":     "00000001:02:00.0",
		"zz:01":            "ZZ:01",
	} {
		if got := canonicalBusID(in); got != want {
			t.Errorf("canonicalBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseSMIBounds: broken output cannot make a snapshot without bound.
func TestParseSMIBounds(t *testing.T) {
	s, err := ParseSMI("h", script(sec{name: "gpu", stdout: row(2000000000, "GPU-a", "00000000:01:00.0", "A", 1000, 1)}))
	if s.State != HostProbeError || len(s.GPUs) != 0 || !strings.Contains(s.Error, "row 1: index: 2000000000 is not a GPU index") {
		t.Errorf("state %q, %d GPUs, error %v", s.State, len(s.GPUs), err)
	}
	var lost, list strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&lost, "Unable to determine the device handle for GPU 0000:%04x:00.0: GPU is lost\n", i)
		fmt.Fprintf(&list, "junk %d\n", i)
	}
	s, err = ParseSMI("h", script(sec{name: "gpu", stdout: lost.String()}, sec{name: "list", stdout: list.String()}))
	wantState(t, s, err, HostDegraded, maxGPUs)
	// 5000 junk -L lines, 5000-maxGPUs lost GPUs without an index, apps missing.
	if len(s.Warnings) != maxWarnings+1 || s.Warnings[maxWarnings] != fmt.Sprintf("(%d more warnings)", 5000+5000-maxGPUs+1-maxWarnings) {
		t.Errorf("%d warnings, last %q", len(s.Warnings), s.Warnings[len(s.Warnings)-1])
	}
}

// TestParseSMIHost: the host section gives the host's CPUs and memory,
// whatever nvidia-smi did; missing /proc facts are warnings, not a probe
// error; an output without the section has no host facts and no warning.
func TestParseSMIHost(t *testing.T) {
	host := sec{name: "host", stdout: "MemTotal:       16318012 kB\nMemAvailable:    8159006 kB\nCpus_allowed_list:\t0-3\nonline: 4"}
	s, err := ParseSMI("h", script(append([]sec{host}, healthy()...)...))
	wantState(t, s, err, HostOK, 2)
	h := s.HostInfo
	if h == nil || !eqInt(h.CPUs, 4) || len(h.CPUIDs) != 4 || !eqU64(h.MemTotal, 16318012*1024) || !eqU64(h.MemAvailable, 8159006*1024) || len(s.Warnings) != 0 {
		t.Errorf("host %+v, warnings %q", h, s.Warnings)
	}

	// A broken driver is still a host with CPUs.
	s, err = ParseSMI("h", script(host, sec{name: "gpu", rc: 9, stdout: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}))
	wantState(t, s, err, HostDriverNotLoaded, 0)
	if s.HostInfo == nil || !eqInt(s.HostInfo.CPUs, 4) {
		t.Errorf("driver not loaded: host %+v", s.HostInfo)
	}

	// No /proc: grep's complaints on stderr, getconf answers.
	noProc := sec{name: "host", stderr: "grep: /proc/meminfo: No such file or directory\ngrep: /proc/self/status: No such file or directory", stdout: "online: 8"}
	s, err = ParseSMI("h", script(append([]sec{noProc}, healthy()...)...))
	wantState(t, s, err, HostOK, 2)
	if s.HostInfo == nil || !eqInt(s.HostInfo.CPUs, 8) || s.HostInfo.MemTotal != nil || s.HostInfo.MemAvailable != nil || s.HostInfo.CPUIDs != nil {
		t.Errorf("no /proc: host %+v", s.HostInfo)
	}
	wantWarning(t, s, "host memory unknown: no MemTotal line")
	wantWarning(t, s, "CPU ids unknown")

	// Nothing readable at all: no host facts, one warning.
	s, err = ParseSMI("h", script(append([]sec{{name: "host", stdout: "online: "}}, healthy()...)...))
	wantState(t, s, err, HostOK, 2)
	if s.HostInfo != nil || len(s.Warnings) != 1 {
		t.Errorf("nothing readable: host %+v, warnings %q", s.HostInfo, s.Warnings)
	}

	// Garbage in the section: no zeros, warnings name the line.
	s, err = ParseSMI("h", script(append([]sec{{name: "host", stdout: "MemTotal: 12 MB\nMemAvailable: -3 kB\nCpus_allowed_list: 0-x\nonline: 2"}}, healthy()...)...))
	wantState(t, s, err, HostOK, 2)
	if h := s.HostInfo; h == nil || h.MemTotal != nil || h.MemAvailable != nil || !eqInt(h.CPUs, 2) || h.CPUIDs != nil {
		t.Errorf("garbage: host %+v", s.HostInfo)
	}
	wantWarning(t, s, `MemTotal "12 MB"`)
	wantWarning(t, s, `Cpus_allowed_list "0-x"`)

	// The section cut short.
	s, err = ParseSMI("h", append([]byte("@@gssh section=host@@\nMemTotal: 1 kB\n"), script(healthy()...)...))
	if err != nil || s.HostInfo != nil {
		t.Errorf("cut short: error %v, host %+v", err, s.HostInfo)
	}

	// No host section (an output of another script): nothing, silently.
	s, err = ParseSMI("h", script(healthy()...))
	if err != nil || s.HostInfo != nil || len(s.Warnings) != 0 {
		t.Errorf("no section: error %v host %+v warnings %q", err, s.HostInfo, s.Warnings)
	}
}
