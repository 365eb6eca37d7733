package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec"
)

// TestRejectedFieldCorpus: nvidia-smi's refusal of a field it does not
// know, in the forms the public record holds (testdata/corpus/README.md):
// the field is read out of each, and a --query-gpu that printed it is a
// *RejectedFieldError naming it, not "output not understood".
func TestRejectedFieldCorpus(t *testing.T) {
	for id, want := range map[string]string{
		"f01": "device_minor",                    // stdout, then an empty line; exit 2
		"f02": "compute_cap",                     // exit 2
		"f03": "encoder.stats.sessionCount",      // typographic quotes
		"f04": "clocks_throttle_reasons.unknown", // underscores
	} {
		out := string(corpus(t, id))
		field, msg, ok := rejectedField(strings.Split(out, "\n"))
		if !ok || field != want || !strings.HasSuffix(msg, "is not a valid field to query.") {
			t.Errorf("%s: field %q (%v), line %q; want %q", id, field, ok, msg, want)
		}
		s, err := ParseSMI("h", script(sec{name: "gpu", rc: 2, stdout: strings.TrimSuffix(out, "\n")}))
		var rej *RejectedFieldError
		if !errors.As(err, &rej) || rej.Field != want || rej.Query != "--query-gpu" || errors.Is(err, ErrUnparsable) {
			t.Errorf("%s: error %v; want a rejection of %s", id, err, want)
		}
		if s.State != HostProbeError || s.Error != "nvidia-smi --query-gpu rejects the field "+want+": "+msg || len(s.GPUs) != 0 {
			t.Errorf("%s: state %q error %q", id, s.State, s.Error)
		}
	}
	// Lines that only look alike are not a rejection.
	for _, l := range []string{
		`Field mig.mode.current is not a valid field to query.`,
		`Field "mig mode" is not a valid field to query.`,
		`Field "mig.mode.current" is not supported.`,
		`0, Field "x" is not a valid field to query.`,
	} {
		if f, _, ok := rejectedField([]string{l}); ok {
			t.Errorf("%q read as a rejection of %q", l, f)
		}
	}
}

// TestRejectedAppsField: --query-compute-apps has no optional field, so a
// rejection there leaves the GPUs listed with their process lists unknown
// and says why.
func TestRejectedAppsField(t *testing.T) {
	secs := healthy()
	secs[2] = sec{name: "apps", rc: 2, stdout: `Field "used_gpu_memory" is not a valid field to query.` + "\n"}
	s, err := ParseSMI("h", script(secs...))
	wantState(t, s, err, HostOK, 2)
	wantWarning(t, s, `process lists unknown: nvidia-smi --query-compute-apps rejects the field used_gpu_memory`)
	for _, g := range s.GPUs {
		if g.ProcsKnown || len(g.Procs) != 0 {
			t.Errorf("GPU %d: processes %v known %v", g.Index, g.Procs, g.ProcsKnown)
		}
	}
}

// oldSMI answers the probe script as an nvidia-smi that does not know the
// fields in unknown: the first of them in the query is rejected (f01's
// form); otherwise one GPU row of the fields asked. It counts the runs.
type oldSMI struct {
	unknown []string
	say     string // the name its message gives instead of the field's ("" = the field's)
	driver  string
	runs    []string // the --query-gpu field list of each run
}

func (o *oldSMI) Run(_ context.Context, _, cmd string, _ io.Reader) (sshexec.Result, error) {
	_, rest, _ := strings.Cut(cmd, "--query-gpu=")
	list, _, _ := strings.Cut(rest, " ")
	o.runs = append(o.runs, list)
	fields := strings.Split(list, ",")
	for _, f := range fields {
		if slices.Contains(o.unknown, f) {
			if o.say != "" {
				f = o.say
			}
			return sshexec.Result{Stdout: script(sec{name: "gpu", rc: 2, stdout: fmt.Sprintf("Field %q is not a valid field to query.\n", f)})}, nil
		}
	}
	values := map[string]string{"index": "0", "uuid": "GPU-a", "pci.bus_id": "00000000:01:00.0", "name": "Tesla P100-PCIE-16GB",
		"memory.total": "16280", "memory.used": "0", "memory.free": "16280", "utilization.gpu": "0", "temperature.gpu": "30",
		"driver_version": o.driver, "mig.mode.current": "[N/A]"}
	var row []string
	for _, f := range fields {
		row = append(row, values[f])
	}
	return sshexec.Result{Stdout: script(
		sec{name: "gpu", stdout: strings.Join(row, ", ")},
		sec{name: "list", stdout: "GPU 0: Tesla P100-PCIE-16GB (UUID: GPU-a)"},
		sec{name: "apps"},
	)}, nil
}

// fieldMemo is a FieldMemo in memory that records what it is told.
type fieldMemo struct {
	m       map[string]SMIFields
	ttl     time.Duration
	forgets int
}

func (m *fieldMemo) Fields(host string) (SMIFields, bool) { f, ok := m.m[host]; return f, ok }
func (m *fieldMemo) PutFields(host string, f SMIFields, ttl time.Duration) {
	if m.m == nil {
		m.m = map[string]SMIFields{}
	}
	m.m[host], m.ttl = f, ttl
}
func (m *fieldMemo) ForgetFields(host string) { delete(m.m, host); m.forgets++ }

const fullQuery = "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,temperature.gpu,driver_version,mig.mode.current"

// TestSMIFieldFallback: which queries the probe asks after rejections,
// what it lists and what it remembers.
func TestSMIFieldFallback(t *testing.T) {
	noMIG := "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,temperature.gpu,driver_version"
	required := "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,driver_version"
	for _, c := range []struct {
		name    string
		unknown []string
		say     string
		runs    []string // the queries asked, in order
		missing []string // Snapshot.MissingFields
		state   HostState
		note    string
	}{
		{"current driver", nil, "", []string{fullQuery}, nil, HostOK, ""},
		{"R418", []string{"mig.mode.current"}, "", []string{fullQuery, noMIG}, []string{"mig.mode.current"}, HostOK,
			"old driver 418.87.01: nvidia-smi cannot report MIG mode (it does not know mig.mode.current); shown as unknown"},
		{"two unknown", []string{"temperature.gpu", "mig.mode.current"}, "",
			[]string{fullQuery, "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,driver_version,mig.mode.current", "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,driver_version"},
			[]string{"temperature.gpu", "mig.mode.current"}, HostOK,
			"old driver 418.87.01: nvidia-smi cannot report temperature and MIG mode (it does not know temperature.gpu, mig.mode.current); shown as unknown"},
		{"all optional unknown", []string{"utilization.gpu", "temperature.gpu", "mig.mode.current"}, "",
			[]string{fullQuery, "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,temperature.gpu,driver_version,mig.mode.current",
				"index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,driver_version,mig.mode.current", required},
			[]string{"utilization.gpu", "temperature.gpu", "mig.mode.current"}, HostOK, "cannot report utilization, temperature and MIG mode"},
		// A required field: asking again cannot help.
		{"required unknown", []string{"pci.bus_id"}, "", []string{fullQuery}, nil, HostProbeError, ""},
		// Not even the required fields pass.
		{"odd name, required unknown", []string{"index"}, "gpu_index", []string{fullQuery, required}, nil, HostProbeError, ""},
		// A rejection naming no field gssh asked as optional: once more
		// with the fields every driver has.
		{"odd name", []string{"mig.mode.current"}, "mig.mode", []string{fullQuery, required},
			[]string{"utilization.gpu", "temperature.gpu", "mig.mode.current"}, HostOK, "cannot report utilization, temperature and MIG mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := &oldSMI{unknown: c.unknown, say: c.say, driver: "418.87.01"}
			memo := &fieldMemo{}
			s, err := SMIMemo(run, "h", memo).Snapshot(context.Background())
			if !slices.Equal(run.runs, c.runs) {
				t.Errorf("queries:\n got %q\nwant %q", run.runs, c.runs)
			}
			if s.State != c.state || !slices.Equal(s.MissingFields, c.missing) {
				t.Fatalf("state %q (%s), missing %q, error %v", s.State, s.Error, s.MissingFields, err)
			}
			if c.state == HostProbeError {
				var rej *RejectedFieldError
				want := "does not know the query field pci.bus_id, which gssh needs (gssh asks at least for " + strings.ReplaceAll(required, ",", ", ") + "): Field \"pci.bus_id\""
				if c.say != "" {
					want = "does not know even the fields gssh needs (gssh asks at least for "
				}
				if !errors.As(err, &rej) || rej.Field != cmp.Or(c.say, "pci.bus_id") || !strings.Contains(s.Error, want) {
					t.Errorf("error %v, %q", err, s.Error)
				}
				if len(memo.m) != 0 {
					t.Errorf("memo %v", memo.m)
				}
				return
			}
			if err != nil || len(s.GPUs) != 1 || s.Driver != "418.87.01" {
				t.Fatalf("error %v, GPUs %+v", err, s.GPUs)
			}
			g := s.GPUs[0]
			if g.MIGMode != "" || g.Name != "Tesla P100-PCIE-16GB" || !eqU64(g.MemFree, mib(16280)) || (g.TempC == nil) != slices.Contains(c.missing, "temperature.gpu") {
				t.Errorf("GPU %+v", g)
			}
			if c.note == "" {
				if len(s.Warnings) != 0 || len(memo.m) != 0 {
					t.Errorf("warnings %q memo %v", s.Warnings, memo.m)
				}
				return
			}
			wantWarning(t, s, c.note)
			if len(s.Warnings) != 1 {
				t.Errorf("warnings %q: want one note for the host", s.Warnings)
			}
			if m := memo.m["h"]; m.Driver != "418.87.01" || !slices.Equal(m.Missing, c.missing) || memo.ttl != FieldsRecheck {
				t.Errorf("remembered %+v for %v", m, memo.ttl)
			}
		})
	}
}

// TestSMIFieldMemo: a host remembered as lacking a field is asked the
// right query at once (one run), until its driver changes: then the full
// query is asked again and the entry dropped.
func TestSMIFieldMemo(t *testing.T) {
	memo := &fieldMemo{}
	run := &oldSMI{unknown: []string{"mig.mode.current"}, driver: "418.87.01"}
	if _, err := SMIMemo(run, "h", memo).Snapshot(context.Background()); err != nil || len(run.runs) != 2 {
		t.Fatalf("first probe: %v, runs %q", err, run.runs)
	}
	for range 3 {
		run.runs = nil
		s, err := SMIMemo(run, "h", memo).Snapshot(context.Background())
		if err != nil || len(run.runs) != 1 || strings.Contains(run.runs[0], "mig.mode.current") || !slices.Equal(s.MissingFields, []string{"mig.mode.current"}) {
			t.Fatalf("remembered probe: %v, runs %q, missing %q", err, run.runs, s.MissingFields)
		}
		wantWarning(t, s, "old driver 418.87.01: nvidia-smi cannot report MIG mode")
	}
	// Another host is not affected.
	other := &oldSMI{driver: "535.161.08"}
	if _, err := SMIMemo(other, "g", memo).Snapshot(context.Background()); err != nil || !slices.Equal(other.runs, []string{fullQuery}) {
		t.Fatalf("other host: %v, runs %q", err, other.runs)
	}
	// The driver was upgraded: its answer to the remembered query names
	// another version, so the full query is asked and passes.
	up := &oldSMI{driver: "535.161.08"}
	s, err := SMIMemo(up, "h", memo).Snapshot(context.Background())
	if err != nil || len(up.runs) != 2 || up.runs[1] != fullQuery || len(s.MissingFields) != 0 || len(s.Warnings) != 0 {
		t.Fatalf("after the upgrade: %v, runs %q, missing %q, warnings %q", err, up.runs, s.MissingFields, s.Warnings)
	}
	if _, ok := memo.m["h"]; ok || memo.forgets != 1 {
		t.Errorf("memo %v after the upgrade (%d forgets)", memo.m, memo.forgets)
	}
	up.runs = nil
	if _, err := SMIMemo(up, "h", memo).Snapshot(context.Background()); err != nil || !slices.Equal(up.runs, []string{fullQuery}) {
		t.Errorf("then: %v, runs %q", err, up.runs)
	}
}
