package eventlog

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/job"
)

// TestMain lets the test binary be one of the writers of
// TestWritersInProcesses: EVENTLOG_WRITER=path,name,count.
func TestMain(m *testing.M) {
	if spec := os.Getenv("EVENTLOG_WRITER"); spec != "" {
		p := strings.Split(spec, ",")
		n, _ := strconv.Atoi(p[2])
		os.WriteFile(p[0]+"."+p[1]+".ready", nil, 0o600)
		for { // all start together
			if _, err := os.Stat(p[0] + ".go"); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		failed := writeMany(p[0], p[1], n)
		if failed > 0 {
			fmt.Fprintf(os.Stderr, "%d events not written\n", failed)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pad makes each event about 16 KiB, so that a few hundred of them
// rotate a 1 MiB log several times.
var pad = strings.Repeat("x", 16<<10)

// writeMany writes n events as writer name to the log at path (rotated
// at 1 MiB) and returns how many were not written.
func writeMany(path, name string, n int) int {
	failed := 0
	l := Open(path, Options{MaxSizeMiB: 1, LockWait: time.Minute, Warn: func(string) { failed++ }})
	for i := range n {
		l.Write(Event{Kind: JobStart, Job: job.ID(i + 1), User: name, Reason: pad})
	}
	l.Close()
	return failed
}

func readAll(t *testing.T, path string) (recs []Record, warnings []string) {
	t.Helper()
	found, err := Read(path, Filter{}, func(r Record) error { recs = append(recs, r); return nil }, func(s string) { warnings = append(warnings, s) })
	if err != nil || !found {
		t.Fatalf("Read: found %v, %v", found, err)
	}
	return recs, warnings
}

// checkWriters checks that recs hold every event of every writer once,
// in each writer's order, each line whole.
func checkWriters(t *testing.T, recs []Record, writers []string, n int) {
	t.Helper()
	next := map[string]job.ID{}
	for _, r := range recs {
		if r.Fields["reason"] != pad || r.Kind != JobStart {
			t.Fatalf("%s:%d: a line mixed with another: %.80q", r.File, r.LineNo, r.Line)
		}
		if want := next[r.User] + 1; r.Job != want {
			t.Fatalf("%s:%d: writer %s's event %d, want %d (lost or out of order)", r.File, r.LineNo, r.User, r.Job, want)
		}
		next[r.User] = r.Job
	}
	for _, w := range writers {
		if next[w] != job.ID(n) {
			t.Errorf("writer %s: %d events read back, want %d", w, next[w], n)
		}
	}
}

// Processes writing at once, through rotations, lose no line and mix no
// two: each write and its rotation hold the log's lock.
func TestWritersInProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	const n = 60 // 4 writers × 60 × 16 KiB: about 4 rotations
	writers := []string{"w1", "w2", "w3", "w4"}
	var wg sync.WaitGroup
	errs := make([]error, len(writers))
	out := make([][]byte, len(writers))
	for i, w := range writers {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("EVENTLOG_WRITER=%s,%s,%d", path, w, n))
		wg.Go(func() { out[i], errs[i] = cmd.CombinedOutput() })
	}
	for _, w := range writers {
		for {
			if _, err := os.Stat(path + "." + w + ".ready"); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	os.WriteFile(path+".go", nil, 0o600)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %s: %v: %s", writers[i], err, out[i])
		}
	}
	recs, warnings := readAll(t, path)
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	checkWriters(t, recs, writers, n)
	fs, _ := files(path)
	if len(fs) < 3 {
		t.Errorf("%d files; want the log rotated at least twice", len(fs))
	}
	for _, f := range fs[:len(fs)-1] {
		if !f.gz {
			t.Errorf("rotated file %s not compressed", f.path)
		}
	}
}

// Goroutines with a Log each (their own lock file descriptors) are kept
// apart the same way.
func TestWritersInGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	const n = 40
	writers := []string{"g1", "g2", "g3"}
	var wg sync.WaitGroup
	failed := make([]int, len(writers))
	for i, w := range writers {
		wg.Go(func() { failed[i] = writeMany(path, w, n) })
	}
	wg.Wait()
	if slices.ContainsFunc(failed, func(f int) bool { return f > 0 }) {
		t.Fatalf("events not written: %v", failed)
	}
	recs, _ := readAll(t, path)
	checkWriters(t, recs, writers, n)
}

// One line per event with the package doc's names: time in UTC with
// milliseconds first, then event; no slog level or message.
func TestLineFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	start := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	l := Open(path, Options{Now: func() time.Time { return start }})
	exit := 3
	j := job.Job{ID: 42, User: "ann", State: job.Failed, Reason: "exit status 3", Attempt: 2, ExitCode: &exit,
		Spec:      job.Spec{Name: "train", GPUs: 2},
		Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-a", "GPU-b"}, Indexes: []int{0, 3}},
		Runs:      []job.Use{{User: "ann", Started: start.Add(-2 * time.Hour), Ended: start.Add(-time.Hour), Share: 2}},
		StartedAt: start, EndedAt: start.Add(90 * time.Minute)}
	at := time.Date(2026, 11, 30, 15, 30, 0, 123456789, time.FixedZone("CET", 3600))
	l.Write(OfJob(at, JobEnd, j))
	l.Write(Drain(at, "gpu02", "root", "driver upgrade", start.Add(24*time.Hour)))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := `{"time":"2026-11-30T14:30:00.123Z","event":"job_end","job":42,"user":"ann","host":"gpu01","gpus":[0,3],"state":"failed","reason":"exit status 3","attempt":2,"exit":3,"name":"train","runtime_s":5400,"gpu_hours":5,"restarts":0}`
	want = strings.Replace(want, `,"restarts":0`, "", 1) // no requeue after a start: left out
	if len(lines) != 2 || lines[0] != want {
		t.Fatalf("lines:\n%s\nwant first:\n%s", data, want)
	}
	if want := `{"time":"2026-11-30T14:30:00.123Z","event":"host_drain","host":"gpu02","reason":"driver upgrade","by":"root","from":"2026-12-01T14:00:00.000Z"}`; lines[1] != want {
		t.Errorf("drain line\n%s\nwant\n%s", lines[1], want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
}

// A rotated file older than MaxAge goes at the first write, a rotated file
// left uncompressed is compressed, one both compressed and not (a crash
// between the two) is read once, and a compression's leftover goes.
func TestRetentionAndCompression(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, Name)
	now := time.Now()
	name := func(t time.Time) string { return filepath.Join(dir, "events-"+t.UTC().Format(backupLayout)+".log") }
	line := func(k Kind, id int) string {
		return fmt.Sprintf(`{"time":%q,"event":%q,"job":%d}`+"\n", Stamp(now), k, id)
	}
	old, plain, both := name(now.AddDate(0, 0, -8)), name(now.Add(-2*time.Hour)), name(now.Add(-time.Hour))
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(old, line(JobSubmit, 1))
	write(plain, line(JobSubmit, 2))
	write(both, line(JobSubmit, 3))
	writeGz(t, both+".gz", line(JobSubmit, 3))
	write(plain+".gz.tmp", "half")
	write(filepath.Join(dir, "events-notatime.log"), "not the log's")

	l := Open(path, Options{MaxAge: 7 * 24 * time.Hour})
	l.Write(Event{Kind: JobStart, Job: 4})
	l.Close()
	for p, gone := range map[string]bool{old: true, plain: true, plain + ".gz": false, plain + ".gz.tmp": true, both: true, both + ".gz": false,
		filepath.Join(dir, "events-notatime.log"): false} {
		if _, err := os.Stat(p); (err != nil) != gone {
			t.Errorf("%s: stat %v; want gone %v", filepath.Base(p), err, gone)
		}
	}
	recs, _ := readAll(t, path)
	var got []job.ID
	for _, r := range recs {
		got = append(got, r.Job)
	}
	if !slices.Equal(got, []job.ID{2, 3, 4}) {
		t.Errorf("jobs read %v, want [2 3 4] (oldest file first, the old one removed)", got)
	}
}

func writeGz(t *testing.T, p, s string) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	io.WriteString(zw, s)
	zw.Close()
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A file whose first event is more than a day old is rotated before the
// next write, so a quiet lab's log is still trimmed to MaxAge.
func TestRotatedWhenADayOld(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := Open(path, Options{Now: func() time.Time { return now }})
	l.Write(Event{Time: now.Add(-25 * time.Hour), Kind: JobSubmit, Job: 1})
	l.Write(Event{Kind: JobSubmit, Job: 2})
	l.Write(Event{Kind: JobSubmit, Job: 3})
	l.Close()
	fs, err := files(path)
	if err != nil || len(fs) != 2 || !fs[0].gz {
		t.Fatalf("files %v (%v); want one rotated (compressed) and the current one", fs, err)
	}
	recs, _ := readAll(t, path)
	if len(recs) != 3 || recs[0].File != fs[0].path || recs[1].File != path || recs[2].Job != 3 {
		t.Errorf("read %d events: %+v", len(recs), recs)
	}
}

// A line that is not an event (a torn write, a hand edit) is skipped
// with a warning naming its file and line; the line written after a torn
// one starts a line of its own.
func TestBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	l := Open(path, Options{})
	l.Write(Event{Kind: JobSubmit, Job: 1})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("hand edit\n{\"time\":\"2026-11-30T14:00:00Z\",\"event\":\"job_st") // torn: no newline
	f.Close()
	l.Write(Event{Kind: JobSubmit, Job: 2})
	l.Close()
	recs, warnings := readAll(t, path)
	if len(recs) != 2 || recs[0].Job != 1 || recs[1].Job != 2 || recs[1].LineNo != 4 {
		t.Errorf("events %+v; want jobs 1 and 2, the second on line 4", recs)
	}
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], path+":2: skipped: not JSON") || !strings.HasPrefix(warnings[1], path+":3: skipped: not JSON") {
		t.Errorf("warnings %q; want lines 2 and 3 named", warnings)
	}
}

// The records and the filter: job (or array), user, host, since, kinds.
func TestFilter(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := Open(path, Options{Now: func() time.Time { return t0 }})
	l.Write(OfJob(t0, JobSubmit, job.Job{ID: 7, User: "ann", Spec: job.Spec{Array: &job.ArrayTask{Job: 7, Task: 0, Tasks: 2}}}))
	l.Write(OfJob(t0.Add(time.Minute), JobSubmit, job.Job{ID: 8, User: "ann", Spec: job.Spec{Array: &job.ArrayTask{Job: 7, Task: 1, Tasks: 2}}}))
	l.Write(OfJob(t0.Add(2*time.Minute), JobStart, job.Job{ID: 9, User: "bob", Placement: job.Placement{Host: "gpu01"}}))
	l.Write(Event{Time: t0.Add(3 * time.Minute), Kind: HostDown, Host: "gpu01", Reason: "unreachable"})
	l.Close()
	ids := func(f Filter) []string {
		var out []string
		if _, err := Read(path, f, func(r Record) error { out = append(out, fmt.Sprintf("%s %d", r.Kind, r.Job)); return nil }, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"job_submit 7", "job_submit 8", "job_start 9", "host_down 0"}},
		{Filter{Job: 7}, []string{"job_submit 7", "job_submit 8"}},
		{Filter{Job: 8}, []string{"job_submit 8"}},
		{Filter{Job: 7, Task: true}, []string{"job_submit 7"}}, // task 7_0 alone
		{Filter{User: "bob"}, []string{"job_start 9"}},
		{Filter{Host: "gpu01"}, []string{"job_start 9", "host_down 0"}},
		{Filter{Since: t0.Add(90 * time.Second)}, []string{"job_start 9", "host_down 0"}},
		{Filter{Kinds: []Kind{HostDown, JobSubmit}, User: "ann"}, []string{"job_submit 7", "job_submit 8"}},
	} {
		if got := ids(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
	var r Record
	Read(path, Filter{Kinds: []Kind{HostDown}}, func(x Record) error { r = x; return nil }, nil)
	if !r.Time.Equal(t0.Add(3*time.Minute)) || r.Host != "gpu01" || r.Fields["reason"] != "unreachable" || !json.Valid(r.Line) {
		t.Errorf("host_down record %+v", r)
	}
}

func TestParseSince(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, loc)
	for in, want := range map[string]time.Time{
		"90m":                       now.Add(-90 * time.Minute),
		"1h":                        now.Add(-time.Hour),
		"7d":                        now.AddDate(0, 0, -7),
		"2w":                        now.AddDate(0, 0, -14),
		"2026-11-29":                time.Date(2026, 11, 29, 0, 0, 0, 0, loc),
		"2026-11-29T08:30":          time.Date(2026, 11, 29, 8, 30, 0, 0, loc),
		"2026-11-29 08:30:05":       time.Date(2026, 11, 29, 8, 30, 5, 0, loc),
		"2026-11-29T08:30:00Z":      time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC),
		"2026-11-29T08:30:00+01:00": time.Date(2026, 11, 29, 7, 30, 0, 0, time.UTC),
	} {
		got, err := ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "0s", "1x", "2026-13-01", "0d", "0w", "2026-12-01", "2026-11-30T14:00:01+02:00"} { // the last two: to come
		if _, err := ParseSince(in, now); err == nil {
			t.Errorf("ParseSince(%q): no error", in)
		}
	}
}

// No file yet: found is false, and that is no error.
func TestReadNothingYet(t *testing.T) {
	for _, p := range []string{filepath.Join(t.TempDir(), Name), filepath.Join(t.TempDir(), "nodir", Name)} {
		found, err := Read(p, Filter{}, func(Record) error { return nil }, nil)
		if found || err != nil {
			t.Errorf("%s: found %v, %v", p, found, err)
		}
	}
}

// Another process holding the lock past the wait: the event is not
// written, a warning says so, and the next write does not wait; once the
// lock is free, writes go on, and Close counts what was not written.
func TestLockHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), Name)
	other := flock.New(path + ".lock")
	if err := other.Lock(); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	l := Open(path, Options{LockWait: 20 * time.Millisecond, Warn: func(s string) { warnings = append(warnings, s) }})
	l.Write(Event{Kind: JobSubmit, Job: 1})
	l.Write(Event{Kind: JobSubmit, Job: 2})
	other.Unlock()
	l.Write(Event{Kind: JobSubmit, Job: 3})
	l.Close()
	recs, _ := readAll(t, path)
	if len(recs) != 1 || recs[0].Job != 3 {
		t.Errorf("events %+v; want job 3's only", recs)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "job_submit of job 1 not written: the event log's lock is held by another gssh") ||
		!strings.Contains(warnings[1], "1 more events not written") {
		t.Errorf("warnings %q", warnings)
	}
}

// Shared-lab mode: every file of the log is 0660 whatever the writer's
// umask, so every member can write it.
func TestSharedModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), Name)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := Open(path, Options{Shared: true, Now: func() time.Time { return now }})
	l.Write(Event{Time: now.Add(-25 * time.Hour), Kind: JobSubmit, Job: 1, Extra: []slog.Attr{slog.String("k", "v")}})
	l.Write(Event{Kind: JobSubmit, Job: 2}) // rotates the first away
	l.Close()
	fs, _ := files(path)
	for _, p := range []string{path, path + ".lock", fs[0].path} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o660 {
			t.Errorf("%s: %v; want mode 0660", p, fi.Mode())
		}
	}
}
