package service_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sim"
)

// documents are one of each JSON document gssh prints (docs/json.md):
// gpus, hosts, ps and show (job records, with the queue's answer),
// submit, usage, reap, drain, a pass's result, sim and sim --fill, and
// the helper's snapshot.
func documents() map[string]any {
	return map[string]any{
		"gpus": &service.GPUsDoc{}, "hosts": &service.HostsDoc{}, "ps": &service.JobsDoc{},
		"show": &struct {
			job.Job
			Queue *service.Explanation `json:"queue,omitempty"`
		}{},
		"submit": &service.SubmitDoc{}, "usage": &service.UsageDoc{}, "reap": &service.ReapDoc{},
		"drain": &service.DrainResult{}, "pass": &service.PassResult{},
		"sim": &sim.Comparison{}, "sim --fill": &sim.FillSummary{}, "helper": &gpuinfo.HelperDoc{},
	}
}

// sentinel is the duration every time.Duration of a filled document
// holds: 1.234567891 s. Its nanoseconds in the JSON (1234567891) are a
// duration that leaked in Go's unit; its seconds, however rounded, must
// sit in a field ending _s.
const sentinel = 1234567891 * time.Nanosecond

// durationWords are what a field named for a duration has in its name.
var durationWords = []string{"timeout", "grace", "wait", "makespan", "duration", "runtime", "elapsed", "half_life",
	"window", "period", "latency", "rtt", "took", "interval", "probe", "connect", "completion"}

// notDurations are names with such a word that are no duration.
var notDurations = map[string]bool{"waited_over_day": true, "busy_while_waiting": true, "jain_waiting": true}

// badSuffixes are units no JSON field may be in.
var badSuffixes = []string{"_ms", "_ns", "_us", "_sec", "_secs", "_seconds", "_min", "_minutes"}

// Every document type, walked by reflection, has no time.Duration in its
// JSON and no field in another unit of time; filled with the sentinel
// duration everywhere and marshalled, its durations come out in seconds
// in fields ending _s (this catches a custom MarshalJSON too).
func TestJSONDurationsInSeconds(t *testing.T) {
	for name, doc := range documents() {
		walkType(t, name, reflect.TypeOf(doc).Elem(), map[reflect.Type]bool{})
		v := reflect.ValueOf(doc).Elem()
		fill(v, 0)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tree any
		if err := json.Unmarshal(b, &tree); err != nil {
			t.Fatal(err)
		}
		checkTree(t, name, "", tree)
	}
}

// walkType reports each JSON field of typ (and of what it holds) that is
// a time.Duration, or named in another unit of time, or named for a
// duration without ending _s.
func walkType(t *testing.T, where string, typ reflect.Type, seen map[reflect.Type]bool) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(time.Time{}) {
		return
	}
	seen[typ] = true
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			walkType(t, where, f.Type, seen)
			continue
		}
		name := tag
		if name == "" {
			name = f.Name
		}
		at := where + ": " + typ.String() + "." + f.Name + " (" + name + ")"
		if f.Type == reflect.TypeOf(time.Duration(0)) {
			t.Errorf("%s is a time.Duration in JSON (nanoseconds): give it in seconds, in a field ending _s", at)
		}
		checkName(t, at, name)
		walkType(t, where, f.Type, seen)
	}
}

// checkName reports a field name in another unit of time, or named for a
// duration without ending _s.
func checkName(t *testing.T, at, name string) {
	t.Helper()
	for _, s := range badSuffixes {
		if strings.HasSuffix(name, s) {
			t.Errorf("%s: a duration in %s; durations are seconds, in fields ending _s", at, s)
		}
	}
	if strings.HasSuffix(name, "_s") || notDurations[name] {
		return
	}
	for _, w := range durationWords {
		if strings.Contains(name, w) {
			t.Errorf("%s is named for a duration (%q) but does not end _s", at, w)
		}
	}
}

// checkTree reports, in marshalled JSON, the sentinel's nanoseconds
// anywhere, and its seconds under a key not ending _s.
func checkTree(t *testing.T, where, key string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			checkName(t, where+": "+key+"."+k, k)
			checkTree(t, where, key+"."+k, x)
		}
	case []any:
		for _, x := range v {
			checkTree(t, where, key+"[]", x)
		}
	case float64:
		if v == float64(sentinel) {
			t.Errorf("%s: %s is a duration in nanoseconds", where, key)
		}
		if v != 0 && (v-sentinel.Seconds())*(v-sentinel.Seconds()) < 1e-3 && !strings.HasSuffix(key, "_s") {
			t.Errorf("%s: %s is a duration in seconds (%v) in a field not ending _s", where, key, v)
		}
	}
}

// fill sets every exported field of v to a value that is not zero
// (durations to the sentinel), slices and maps to one element, down to
// a depth that ends recursive types.
func fill(v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		v.SetInt(int64(sentinel))
		return
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 14, 2, 5, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	}
}

// The event log's lines (every kind, from a job with every field set)
// give durations in seconds, in fields ending _s.
func TestEventDurationsInSeconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.log")
	l := eventlog.Open(path, eventlog.Options{})
	var j job.Job
	fill(reflect.ValueOf(&j).Elem(), 0)
	now := time.Now() // the log rotates a file a day old
	j.StartedAt, j.EndedAt = now, now.Add(sentinel)
	for _, k := range eventlog.Kinds {
		l.Write(eventlog.OfJob(now, k, j).By("ann"))
	}
	l.Write(eventlog.Drain(now, "h", "ann", "why", now.Add(time.Hour)))
	l.Write(eventlog.Restore(now, "ann", "b", "k", 7))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, lines := bufio.NewScanner(f), 0
	for sc.Scan() {
		var tree any
		if err := json.Unmarshal(sc.Bytes(), &tree); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		checkTree(t, "events", "", tree)
		lines++
	}
	if lines < len(eventlog.Kinds) || !strings.Contains(readFile(t, path), `"runtime_s":1.235`) || !strings.Contains(readFile(t, path), `"timeout_s":1.234567891`) {
		t.Errorf("%d lines, want one per kind with runtime_s and timeout_s:\n%s", lines, readFile(t, path))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
