package eventlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Record is one event as read back from the log.
type Record struct {
	Time  time.Time
	Kind  Kind
	Job   job.ID
	Array job.ID // the array job of an array task's event
	// Ref names the event's job as gssh does (job.Job.Ref): "18", or
	// "16_2" for task 2 of array 16; a line of an array task written
	// before the task field was has the id alone. "" for no job.
	Ref  string
	User string
	Host string
	// Fields are all the line's fields as JSON decodes them (numbers as
	// json.Number), time and event included.
	Fields map[string]any
	Line   []byte // the line as written, without its newline
	File   string // where it was read
	LineNo int    // its line in File, from 1
}

// Filter selects events; its zero value selects them all.
type Filter struct {
	Job job.ID // the job's events, or an array's (its tasks'); 0: every job's and the hosts'
	// Task makes Job select that job's own events only, not those of the
	// array whose id it is too (an array's id is its first task's): gssh
	// events --job 12_0.
	Task  bool
	User  string
	Host  string
	Since time.Time // from then on
	Kinds []Kind    // any of them; none: every kind
}

// Match reports whether f selects r.
func (f Filter) Match(r Record) bool {
	switch {
	case f.Job != 0 && r.Job != f.Job && (f.Task || r.Array != f.Job),
		f.User != "" && r.User != f.User,
		f.Host != "" && r.Host != f.Host,
		!f.Since.IsZero() && r.Time.Before(f.Since),
		len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind):
		return false
	}
	return true
}

// file is one file of the log, with its rotation time (zero for the
// current file).
type file struct {
	path    string
	rotated time.Time
	gz      bool
}

// files lists the log's files at path, oldest first: the rotated ones by
// the time in their names (a rotated file both compressed and not, left
// by a crash in between, is read from its .gz, which is written whole
// before the other is removed), then the current one when it exists.
func files(path string) ([]file, error) {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	var out []file
	for _, e := range entries {
		t, gz, ok := backupTime(base, e.Name())
		if !ok || !gz && have[e.Name()+".gz"] {
			continue
		}
		out = append(out, file{path: filepath.Join(dir, e.Name()), rotated: t, gz: gz})
	}
	slices.SortFunc(out, func(a, b file) int { return a.rotated.Compare(b.rotated) })
	if have[base] {
		out = append(out, file{path: path})
	}
	return out, nil
}

// maxBadLines is how many lines that are not events Read names one by
// one; the others are counted.
const maxBadLines = 5

// Read calls fn with each event of the log at path that f selects,
// oldest first: the rotated files (compressed or not), then path. It
// opens every file under a shared lock on the log (so that no rotation
// or compression happens while it lists them) and reads them after
// releasing it: a writer never waits for a slow reader. A line that is
// not an event (a torn write, a hand edit) is skipped and warn is told
// its file and line. found is false when the log has no file yet (or
// its directory does not exist). fn's error stops the read and is
// returned; a file that cannot be read is an error naming it.
func Read(path string, f Filter, fn func(Record) error, warn func(string)) (found bool, err error) {
	opened, err := openAll(path, f.Since)
	defer func() {
		for _, o := range opened {
			o.Close()
		}
	}()
	if err != nil || len(opened) == 0 {
		if isNotExist(err) {
			err = nil
		}
		return false, err
	}
	if warn == nil {
		warn = func(string) {}
	}
	bad := 0
	for _, o := range opened {
		if err := readFile(o, f, fn, func(line int, why string) {
			if bad++; bad <= maxBadLines {
				warn(fmt.Sprintf("%s:%d: skipped: %s", o.Name(), line, why))
			}
		}); err != nil {
			return true, err
		}
	}
	if bad > maxBadLines {
		warn(fmt.Sprintf("%d more lines that are not events skipped", bad-maxBadLines))
	}
	return true, nil
}

// openAll opens the log's files, leaving out the rotated ones rotated
// before since (all their events are older). The lock is a reader's,
// taken only when a writer made the lock file (a reader never makes it,
// at a mode that could keep a lab's writers out); if it cannot be had (a
// stuck writer), the files are opened without it.
func openAll(path string, since time.Time) ([]*os.File, error) {
	if release, ok := readLock(path+".lock", DefaultLockWait); ok {
		defer release()
	}
	fs, err := files(path)
	if err != nil {
		return nil, err
	}
	var out []*os.File
	for _, f := range fs {
		if f.path != path && !since.IsZero() && f.rotated.Before(since) {
			continue
		}
		o, err := os.Open(f.path)
		if isNotExist(err) {
			continue // removed or compressed meanwhile (no lock)
		}
		if err != nil {
			return out, err
		}
		out = append(out, o)
	}
	return out, nil
}

// readFile reads the events of one file, gunzipping a .gz.
func readFile(o *os.File, f Filter, fn func(Record) error, bad func(line int, why string)) error {
	var r io.Reader = o
	if strings.HasSuffix(o.Name(), ".gz") {
		zr, err := gzip.NewReader(o)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Name(), err)
		}
		defer zr.Close()
		r = zr
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte("\n"))
			if len(bytes.TrimSpace(line)) > 0 {
				rec, why := parse(line)
				if why != "" {
					bad(n, why)
				} else if rec.File, rec.LineNo = o.Name(), n; f.Match(rec) {
					if err := fn(rec); err != nil {
						return err
					}
				}
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("%s: line %d: %w", o.Name(), n, err)
		}
	}
}

// parse reads one line; why says what is wrong with a line that is not
// an event.
func parse(line []byte) (Record, string) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return Record{}, "not JSON (" + err.Error() + ")"
	}
	if d.More() {
		return Record{}, "more than one JSON value on the line"
	}
	r := Record{Fields: m, Line: slices.Clone(line)}
	ts, _ := m["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Record{}, "no RFC 3339 \"time\""
	}
	r.Time = t
	k, _ := m["event"].(string)
	if k == "" {
		return Record{}, "no \"event\""
	}
	r.Kind = Kind(k)
	r.Job, r.Array = id(m["job"]), id(m["array"])
	if r.Job != 0 {
		r.Ref = strconv.FormatUint(uint64(r.Job), 10)
		if n, ok := m["task"].(json.Number); ok && r.Array != 0 {
			if k, err := strconv.Atoi(string(n)); err == nil {
				r.Ref = job.RefOf(r.Job, &job.ArrayTask{Job: r.Array, Task: k})
			}
		}
	}
	r.User, _ = m["user"].(string)
	r.Host, _ = m["host"].(string)
	return r, ""
}

func id(v any) job.ID {
	n, _ := v.(json.Number)
	u, _ := strconv.ParseUint(string(n), 10, 64)
	return job.ID(u)
}

// ParseSince reads gssh events --since (and gssh ps --since): a time ago
// (a Go duration, 90m, 2h30m, or days or weeks, 7d, 2w), a date
// (2026-11-30: its midnight, local time), a local time (2026-11-30T14:00,
// 2026-11-30 14:00:05) or an RFC 3339 time (2026-11-30T14:00:00Z), as of
// now. An empty string and a time after now are errors.
func ParseSince(s string, now time.Time) (time.Time, error) {
	t, err := parseSince(s, now)
	if err == nil && t.After(now) {
		return t, fmt.Errorf("%q is %s, to come: give a time ago (7d, 12h) or a date in the past (2026-11-30)", s, t.Local().Format("2006-01-02 15:04 MST"))
	}
	return t, err
}

func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New(`"": give a time ago (90m, 2h, 7d, 2w), a date (2026-11-30), a local time (2026-11-30T14:00) or an RFC 3339 time (2026-11-30T14:00:00Z)`)
	}
	if d, err := time.ParseDuration(s); err == nil && d <= 0 {
		return time.Time{}, fmt.Errorf("%q: give a time ago more than 0, such as 90m, 2h or 7d", s)
	}
	// A time ago as keep_jobs reads an age (90m, 7d, 2w); a bare number
	// (minutes, to ParseAge) is too likely a year or a typo here.
	if strings.Trim(s, "0123456789") != "" {
		if d, err := units.ParseAge(s); err == nil {
			return now.Add(-d), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give a time ago (90m, 2h, 7d, 2w), a date (2026-11-30), a local time (2026-11-30T14:00) or an RFC 3339 time (2026-11-30T14:00:00Z)", s)
}
