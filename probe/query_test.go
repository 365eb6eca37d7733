package probe

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// queryResult is what a corpus query case parses to: its golden file.
type queryResult struct {
	Table Table  `json:"table"`
	GPUs  []GPU  `json:"gpus,omitempty"`
	Procs []Proc `json:"procs,omitempty"`
	Err   string `json:"error,omitempty"`
}

// parseCase runs ParseQuery and the interpretation kind ("gpu" or "apps")
// over data, joining every error.
func parseCase(fields []string, data []byte, kind string) queryResult {
	tab, err := ParseQuery(fields, data)
	r := queryResult{Table: tab}
	var ierr error
	switch kind {
	case "gpu":
		r.GPUs, ierr = tab.GPUs()
	case "apps":
		r.Procs, ierr = tab.Procs()
	}
	if err = errors.Join(err, ierr); err != nil {
		r.Err = err.Error()
	}
	return r
}

var (
	fields001 = []string{"memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed", "utilization.gpu", "utilization.memory"}
	fields005 = []string{"gpu_name", "driver_version", "temperature.gpu", "utilization.gpu", "utilization.memory", "memory.total", "memory.free", "memory.used"}
	fields018 = []string{"name", "memory.total", "memory.used", "memory.free", "utilization.gpu", "utilization.memory"}
	fields025 = []string{"timestamp", "gpu_name", "gpu_bus_id", "gpu_serial", "gpu_uuid", "pid", "process_name", "used_gpu_memory"}
	fields029 = []string{"gpu_uuid", "pid", "process_name", "used_gpu_memory"}
)

// TestCorpusQueries parses each corpus capture of a --query-gpu or
// --query-compute-apps command with its own field list and checks the
// right values the corpus README gives, then the whole result against a
// golden file.
func TestCorpusQueries(t *testing.T) {
	cases := []struct {
		id, name string
		fields   []string
		kind     string
		check    func(t *testing.T, r queryResult)
	}{
		{"001", "fan-na", fields001, "gpu", func(t *testing.T, r queryResult) { checkFanGPU(t, r, FieldNA) }},
		{"002", "fan-not-supported", fields001, "gpu", func(t *testing.T, r queryResult) { checkFanGPU(t, r, FieldNotSupported) }},
		{"003", "fan-unknown-error", []string{"fan.speed"}, "gpu", func(t *testing.T, r queryResult) {
			if v := r.Table.Rows[0].Values[0]; v.State != FieldUnknownError {
				t.Errorf("fan.speed = %+v, want state %q", v, FieldUnknownError)
			}
			// One [Unknown Error] field alone is not a GPU failure.
			if g := r.GPUs[0]; g.Health != HealthOK || !g.Schedulable() {
				t.Errorf("health = %q (%s), want ok", g.Health, g.HealthWhy)
			}
		}},
		{"005", "mig-pod-header-aliases", fields005, "gpu", check005},
		{"005", "mig-pod-header-only", nil, "gpu", check005},
		{"006", "memfree-insufficient-permissions", []string{"memory.free"}, "gpu", func(t *testing.T, r queryResult) {
			g := r.GPUs[0]
			if g.MemFree != nil || g.MemoryState != FieldNoPermission {
				t.Errorf("free = %v (%q), want nil with %q", show(g.MemFree), g.MemoryState, FieldNoPermission)
			}
		}},
		{"007", "vgpu-h100l", []string{"clocks.max.sm", "memory.total", "gpu_name"}, "gpu", func(t *testing.T, r queryResult) {
			g := r.GPUs[0]
			if v, _ := r.Table.Get(r.Table.Rows[0], "clocks.max.sm"); v.State != FieldNA {
				t.Errorf("clocks.max.sm = %+v, want n/a", v)
			}
			if !eqU64(g.MemTotal, mib(24576)) || g.Name != "NVIDIA H100L-2-24C" {
				t.Errorf("got %q total %v, want NVIDIA H100L-2-24C with 24576 MiB", g.Name, show(g.MemTotal))
			}
		}},
		{"013", "h100-mig-full-query", nil, "gpu", check013},
		{"015", "gb10-unified-memory", []string{"memory.free", "memory.total", "memory.used"}, "gpu", func(t *testing.T, r queryResult) {
			g := r.GPUs[0]
			if g.MemTotal != nil || g.MemUsed != nil || g.MemFree != nil || g.MemoryState != FieldNA || g.Health != HealthOK {
				t.Errorf("got %+v, want memory nil with state n/a and the GPU ok", g)
			}
		}},
		{"025", "windows-wddm-apps", fields025, "apps", check025},
		{"025", "windows-wddm-apps-header-only", nil, "apps", check025},
		{"027", "mig-apps-parent-uuid", fields025, "apps", func(t *testing.T, r queryResult) {
			want := []struct {
				pid int
				mib uint64
			}{{21180, 2296}, {21181, 1272}, {21198, 7484}}
			if len(r.Procs) != 3 {
				t.Fatalf("%d processes, want 3", len(r.Procs))
			}
			for i, w := range want {
				p := r.Procs[i]
				if p.PID != w.pid || !eqU64(p.UsedBytes, mib(w.mib)) || p.GPUUUID != "GPU-00000000-0000-0000-0000-000000000000" {
					t.Errorf("process %d = %+v (used %v), want pid %d using %d MiB on the parent GPU", i, p, show(p.UsedBytes), w.pid, w.mib)
				}
			}
		}},
		{"028", "apps-header-only", fields025, "apps", func(t *testing.T, r queryResult) {
			if len(r.Procs) != 0 || r.Err != "" {
				t.Errorf("got %d processes, error %q; want none and no error", len(r.Procs), r.Err)
			}
		}},
		{"029", "apps-insufficient-permissions", fields029, "apps", func(t *testing.T, r queryResult) {
			if len(r.Procs) != 0 || !strings.Contains(r.Err, "row 2: pid: insufficient permissions") {
				t.Errorf("got %d processes, error %q; want the row skipped with an error", len(r.Procs), r.Err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.id+"-"+c.name, func(t *testing.T) {
			r := parseCase(c.fields, corpus(t, c.id), c.kind)
			if c.kind == "gpu" && len(r.GPUs) == 0 {
				t.Fatalf("no GPU: %s", r.Err)
			}
			c.check(t, r)
			golden(t, "corpus/"+c.id+"-"+c.name, r)
		})
	}
}

// checkFanGPU checks corpus 001/002: the same GPU on two drivers.
func checkFanGPU(t *testing.T, r queryResult, fan string) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("error %s", r.Err)
	}
	g := r.GPUs[0]
	if !eqU64(g.MemTotal, mib(2004)) || !eqU64(g.MemFree, mib(2004)) || !eqU64(g.MemUsed, 0) {
		t.Errorf("memory total/free/used = %v/%v/%v, want 2004/2004/0 MiB", show(g.MemTotal), show(g.MemFree), show(g.MemUsed))
	}
	if !eqInt(g.TempC, 44) || !eqInt(g.UtilPct, 0) {
		t.Errorf("temp %v util %v, want 44 and 0", show(g.TempC), show(g.UtilPct))
	}
	if v, _ := r.Table.Get(r.Table.Rows[0], "fan.speed"); v.Known() || v.State != fan {
		t.Errorf("fan.speed = %+v, want unknown (%s), not 0", v, fan)
	}
	if v, _ := r.Table.Get(r.Table.Rows[0], "utilization.memory"); v.Text != "0" {
		t.Errorf("utilization.memory = %+v, want 0", v)
	}
	if !g.Schedulable() {
		t.Errorf("health %q, want schedulable", g.Health)
	}
}

// check005: a MIG A100 in an unprivileged pod, header with units.
func check005(t *testing.T, r queryResult) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("error %s", r.Err)
	}
	if len(r.GPUs) != 1 {
		t.Fatalf("%d GPUs, want 1", len(r.GPUs))
	}
	g := r.GPUs[0]
	if g.Name != "NVIDIA A100-SXM4-80GB" || !eqInt(g.TempC, 47) {
		t.Errorf("name %q temp %v", g.Name, show(g.TempC))
	}
	if g.MemTotal != nil || g.MemFree != nil || g.MemUsed != nil || g.MemoryState != FieldNoPermission {
		t.Errorf("memory %v/%v/%v (%q), want unknown: insufficient permissions", show(g.MemTotal), show(g.MemFree), show(g.MemUsed), g.MemoryState)
	}
	if g.UtilPct != nil {
		t.Errorf("utilization %v, want unknown ([N/A] on MIG)", *g.UtilPct)
	}
}

// check013: H100 with MIG on, the full 212-field query with units.
func check013(t *testing.T, r queryResult) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("error %s", r.Err)
	}
	if len(r.Table.Fields) != 212 || len(r.GPUs) != 2 {
		t.Fatalf("%d fields, %d rows; want 212 and 2", len(r.Table.Fields), len(r.GPUs))
	}
	for i, w := range []struct{ used, free uint64 }{{59, 81022}, {11125, 69956}} {
		g := r.GPUs[i]
		if g.Index != 0 || g.MIGMode != "Enabled" || g.UtilPct != nil || g.Name != "NVIDIA H100 80GB HBM3" || g.Health != HealthOK {
			t.Errorf("row %d: %+v", i, g)
		}
		if !eqU64(g.MemTotal, mib(81559)) || !eqU64(g.MemUsed, mib(w.used)) || !eqU64(g.MemFree, mib(w.free)) {
			t.Errorf("row %d: memory %v/%v/%v, want 81559/%d/%d MiB", i, show(g.MemTotal), show(g.MemUsed), show(g.MemFree), w.used, w.free)
		}
	}
	row := r.Table.Rows[0]
	for field, state := range map[string]string{"display_mode": "requested functionality has been deprecated", "platform.chassis_serial_number": FieldEmpty, "fabric.health.summary": FieldNA, "gpu_recovery_action": ""} {
		if v, ok := r.Table.Get(row, field); !ok || v.State != state {
			t.Errorf("%s = %+v, want state %q", field, v, state)
		}
	}
	if v, _ := r.Table.Get(row, "memory.total"); v.Text != "81559" || v.Unit != "MiB" {
		t.Errorf("memory.total = %+v, want 81559 MiB", v)
	}
	if v, _ := r.Table.Get(row, "power.draw"); v.Text != "71.15" || v.Unit != "W" {
		t.Errorf("power.draw = %+v, want 71.15 W", v)
	}
	if v, _ := r.Table.Get(row, "clocks_throttle_reasons.active"); v.Text != "0x0000000000000001" {
		t.Errorf("alias clocks_throttle_reasons.active = %+v", v)
	}
}

// check025: Windows/WDDM process list.
func check025(t *testing.T, r queryResult) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("error %s", r.Err)
	}
	if len(r.Procs) != 21 {
		t.Fatalf("%d processes, want 21", len(r.Procs))
	}
	for _, p := range r.Procs {
		if p.UsedBytes != nil {
			t.Errorf("pid %d uses %d bytes, want unknown", p.PID, *p.UsedBytes)
		}
	}
	want := map[int]string{
		17840: `C:\Program Files (x86)\Microsoft\EdgeWebView\Application\149.0.4022.80\msedgewebview2.exe`,
		17648: `C:\Program Files\NVIDIA Corporation\NVIDIA App\CEF\NVIDIA Overlay.exe`,
		2140:  `C:\Windows\System32\dwm.exe`,
	}
	for _, p := range r.Procs {
		if w, ok := want[p.PID]; ok && p.Name != w {
			t.Errorf("pid %d name %q, want %q", p.PID, p.Name, w)
		}
	}
	if v, _ := r.Table.Get(r.Table.Rows[0], "gpu_serial"); v.State != FieldNA {
		t.Errorf("gpu_serial = %+v, want n/a", v)
	}
}

// TestCorpusColumnAligned: corpus 016 (csv through `column -t`) and the
// default table (012, 024) are not CSV: a clear error, no rows, no panic.
func TestCorpusColumnAligned(t *testing.T) {
	for _, c := range []struct {
		id     string
		fields []string
	}{
		{"016", nil},
		{"016", []string{"index", "name", "power.draw", "temperature.gpu", "fan.speed", "clocks.current.graphics", "clocks.current.memory"}},
		{"012", []string{"index", "name"}},
		{"024", []string{"index", "name"}},
	} {
		tab, err := ParseQuery(c.fields, corpus(t, c.id))
		if !errors.Is(err, ErrColumnAligned) || len(tab.Rows) != 0 {
			t.Errorf("%s %v: %d rows, error %v; want ErrColumnAligned", c.id, c.fields, len(tab.Rows), err)
		}
	}
}

// TestCorpusChunkedStdout: corpus 018, stdout arrives in chunks that split
// rows. Reading to EOF first gives the one row.
func TestCorpusChunkedStdout(t *testing.T) {
	for i, read := range strings.Split(strings.TrimSuffix(string(corpus(t, "018")), "\n"), "\n\n") {
		chunks := strings.Split(read, "\n")
		var parts []io.Reader
		for _, c := range chunks {
			parts = append(parts, iotest.OneByteReader(strings.NewReader(c)))
		}
		out, err := io.ReadAll(io.MultiReader(parts...))
		if err != nil {
			t.Fatal(err)
		}
		tab, err := ParseQuery(fields018, out)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		gpus, err := tab.GPUs()
		if err != nil || len(gpus) != 1 {
			t.Fatalf("read %d: %d GPUs, %v", i, len(gpus), err)
		}
		g := gpus[0]
		if g.Name != "NVIDIA GeForce GTX 950M" || !eqU64(g.MemTotal, mib(4096)) || !eqU64(g.MemUsed, 0) || !eqU64(g.MemFree, mib(4055)) || !eqInt(g.UtilPct, 0) {
			t.Errorf("read %d: %+v", i, g)
		}
		// Parsing any one chunk alone would be wrong: it is not a row.
		if _, err := ParseQuery(fields018, []byte(chunks[0])); !errors.Is(err, ErrFieldCount) {
			t.Errorf("read %d: a partial chunk parsed: %v", i, err)
		}
	}
}

// TestCorpusList: `nvidia-smi -L` with empty UUIDs (020) and MIG devices (026).
func TestCorpusList(t *testing.T) {
	l020, err := ParseList(corpus(t, "020"))
	if err != nil || len(l020) != 5 {
		t.Fatalf("020: %d GPUs, %v; want 5", len(l020), err)
	}
	for i, g := range l020 {
		wantUUID, wantName := "", "Tesla K80"
		if i == 2 {
			wantUUID, wantName = "GPU-00000000-0000-0000-0000-000000000002", "GeForce RTX 2080 Ti"
		}
		if g.Index != i || g.UUID != wantUUID || g.Name != wantName {
			t.Errorf("020 GPU %d = %+v, want %s %q", i, g, wantName, wantUUID)
		}
	}
	golden(t, "corpus/020-list-empty-uuid", l020)

	l026, err := ParseList(corpus(t, "026"))
	if err != nil || len(l026) != 1 || len(l026[0].MIG) != 4 {
		t.Fatalf("026: %+v, %v; want 1 GPU with 4 MIG devices", l026, err)
	}
	for i, p := range []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"} {
		m := l026[0].MIG[i]
		if m.Index != i || m.Profile != p || !strings.HasPrefix(m.UUID, "MIG-") || m.MemTotal != nil {
			t.Errorf("026 MIG %d = %+v, want %s with a MIG- UUID", i, m, p)
		}
	}
	golden(t, "corpus/026-list-mig", l026)
}

// TestParseQueryShapes covers the parser's edges beyond the corpus.
func TestParseQueryShapes(t *testing.T) {
	t.Run("process names from both ends", func(t *testing.T) {
		data := "GPU-1, 10, /a,b/c, \"q\" \\x, ✓, 12\nGPU-1, 11, , 3\n"
		tab, err := ParseQuery(fields029, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		procs, err := tab.Procs()
		if err != nil || len(procs) != 2 {
			t.Fatalf("%+v %v", procs, err)
		}
		if procs[0].Name != `/a,b/c, "q" \x, ✓` || !eqU64(procs[0].UsedBytes, mib(12)) || procs[1].Name != "" {
			t.Errorf("%+v", procs)
		}
	})
	t.Run("wrong field count names the row", func(t *testing.T) {
		tab, err := ParseQuery([]string{"index", "name"}, []byte("0, A\n1\n2, C, D\n"))
		if len(tab.Rows) != 1 || !errors.Is(err, ErrFieldCount) || !strings.Contains(err.Error(), "row 2: ") || !strings.Contains(err.Error(), "row 3: ") {
			t.Errorf("%d rows, %v", len(tab.Rows), err)
		}
	})
	t.Run("header of other fields is data", func(t *testing.T) {
		tab, err := ParseQuery([]string{"index", "name"}, []byte("index, uuid\n0, A\n"))
		if err != nil || len(tab.Rows) != 2 {
			t.Fatalf("%+v %v", tab, err)
		}
		if _, err := tab.GPUs(); err == nil || !strings.HasPrefix(err.Error(), "row 1: index: ") {
			t.Errorf("a header naming other fields read as a GPU: %v", err)
		}
	})
	t.Run("no header and no fields", func(t *testing.T) {
		for _, data := range []string{"0, 1\n", string(corpus(t, "012"))} {
			if _, err := ParseQuery(nil, []byte(data)); !errors.Is(err, ErrNoHeader) {
				t.Errorf("error %v, want ErrNoHeader", err)
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		tab, err := ParseQuery(fields029, nil)
		if err != nil || len(tab.Rows) != 0 {
			t.Errorf("%+v %v", tab, err)
		}
	})
	t.Run("values", func(t *testing.T) {
		for raw, want := range map[string]Value{
			"[N/A]":                      {State: FieldNA},
			"N/A":                        {State: FieldNA},
			" [Not Supported] ":          {State: FieldNotSupported},
			"[GPU requires reset]":       {State: FieldRequiresReset},
			"[GPU is lost]":              {State: FieldGPULost},
			"[Insufficient Permissions]": {State: FieldNoPermission},
			"ERR!":                       {State: FieldErr},
			"":                           {State: FieldEmpty},
			"[]":                         {State: FieldEmpty},
			"81559 MiB":                  {Text: "81559", Unit: "MiB"},
			"100.00 %":                   {Text: "100.00", Unit: "%"},
			"Direct Connected":           {Text: "Direct Connected"},
			"418.87.01":                  {Text: "418.87.01"},
		} {
			if got := parseValue(raw, ""); got != want {
				t.Errorf("parseValue(%q) = %+v, want %+v", raw, got, want)
			}
		}
	})
	t.Run("bytes", func(t *testing.T) {
		for v, want := range map[Value]uint64{{Text: "1"}: 1 << 20, {Text: "2", Unit: "GiB"}: 2 << 30, {Text: "3", Unit: "KiB"}: 3 << 10} {
			if got, err := v.Bytes(); err != nil || got != want {
				t.Errorf("%+v.Bytes() = %d, %v; want %d", v, got, err, want)
			}
		}
		for _, v := range []Value{{Text: "-1"}, {Text: "1.5"}, {Text: "18446744073709551615"}, {Text: "1", Unit: "W"}, {State: FieldNA}} {
			if _, err := v.Bytes(); err == nil {
				t.Errorf("%+v.Bytes() did not fail", v)
			}
		}
	})
}

// TestGPUHealth: a state in any field decides the GPU's health; one
// [Unknown Error] outside the identity fields does not.
func TestGPUHealth(t *testing.T) {
	fields := []string{"index", "name", "memory.used", "fan.speed"}
	for row, want := range map[string]Health{
		"0, A100, 10, 30":                                  HealthOK,
		"0, A100, 10, [Unknown Error]":                     HealthOK,
		"0, [Unknown Error], 10, 30":                       HealthError,
		"0, ERR!, 0, ERR!":                                 HealthError,
		"0, A100, ERR!, 30":                                HealthError,
		"0, A100, [GPU requires reset], 30":                HealthRequiresReset,
		"0, ERR!, [GPU requires reset], [GPU is lost]":     HealthLost,
		"0, [GPU requires reset], [GPU requires reset], 1": HealthRequiresReset,
	} {
		tab, err := ParseQuery(fields, []byte(row))
		if err != nil {
			t.Fatal(err)
		}
		gpus, err := tab.GPUs()
		if err != nil || len(gpus) != 1 {
			t.Fatalf("%q: %v %v", row, gpus, err)
		}
		if g := gpus[0]; g.Health != want || (want != HealthOK) != (g.HealthWhy != "") {
			t.Errorf("%q: health %q (%s), want %q", row, g.Health, g.HealthWhy, want)
		}
	}
}
