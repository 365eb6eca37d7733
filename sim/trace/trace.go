// Package trace reads GPU-cluster job traces for gssh's simulator.
//
// A trace is a CSV file in the normalized format of the project's trace
// collection (shared/traces/README.md):
//
//	job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class
//
// Read parses and checks it and returns the jobs sorted by submit time.
// The traces have no users; AssignUsers makes some up (recorded in
// Trace.UsersMadeUp) and UsersFrom takes them from a column of the raw
// trace, such as Philly's virtual cluster. Scale, Span, GPUSeconds, Load
// and ScaleToLoad stretch or squeeze the arrivals so that a trace offers a
// chosen load to a lab of a given size.
//
// Every error names the file, and the line and column where there is one,
// as "file:line: column: what is wrong; give what is wanted". Reading
// stops at the first error.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Header is the header of a normalized trace file.
const Header = "job,submit_s,user,gpus,gpu_fraction,duration_s,priority_class"

// The normalized columns. job, submit_s, gpus and duration_s are required;
// a file without user or priority_class has none ("" for every job), and a
// file without gpu_fraction asks for whole GPUs (1.0).
const (
	colJob      = "job"
	colSubmit   = "submit_s"
	colUser     = "user"
	colGPUs     = "gpus"
	colFraction = "gpu_fraction"
	colDuration = "duration_s"
	colClass    = "priority_class"
)

var (
	requiredCols = []string{colJob, colSubmit, colGPUs, colDuration}
	knownCols    = []string{colJob, colSubmit, colUser, colGPUs, colFraction, colDuration, colClass}
)

// maxSeconds is the most seconds a time.Duration holds, in whole seconds
// (about 292 years).
const maxSeconds = math.MaxInt64 / int64(time.Second)

// Job is one job of a trace.
type Job struct {
	ID       string        // the trace's job id
	Submit   time.Duration // after the trace's first job (normalized submit_s, kept as the file gives it: 0 for the first job of a normalized file)
	User     string        // "" when the trace has none
	GPUs     int           // >= 1
	Fraction float64       // share of each GPU, in (0, 1]; < 1 only with GPUs == 1
	Duration time.Duration // what the job runs, > 0 (a 0 s duration in the file: kept as 1 s and counted in a warning)
	Class    string        // priority_class, "" when none
	Line     int           // line in the file (1 = header)
}

// Trace is a job trace read by Read.
type Trace struct {
	Name     string   // the file's base name
	Jobs     []Job    // sorted by Submit (stable: jobs submitted at the same time keep the file's order)
	Warnings []string // what Read repaired, e.g. "itp.norm.csv: rows not sorted by submit_s (first at line 17): sorted"

	// UsersMadeUp is true once AssignUsers has given the jobs made-up
	// users; reports should say so.
	UsersMadeUp bool

	file string // the name given to Read, for messages
}

// label is the file name that messages give: the name passed to Read.
func (t *Trace) label() string {
	switch {
	case t.file != "":
		return t.file
	case t.Name != "":
		return t.Name
	}
	return "trace"
}

// Read reads a trace in the normalized CSV format (see Header) from r.
// name is the file's name; Trace.Name is its base name, and messages give
// name as it is passed.
//
// Columns are found by their header names, in any order; other columns
// are ignored. job, submit_s, gpus and duration_s are required, user,
// gpu_fraction and priority_class optional (none, 1.0, none). submit_s
// and duration_s are seconds (decimals allowed), gpus a whole number.
//
// Every bad value is an error "file:line: column: what is wrong; give
// what is wanted": a value that is not a number, negative, NaN or
// infinite, gpus below 1, gpu_fraction outside (0, 1] or below 1 with
// more than one GPU, an empty or repeated job id, a row with another
// number of fields than the header. An empty file and a file with only a
// header ("no jobs") are errors too. Read returns the first error only.
//
// Read repairs two things and says so in Trace.Warnings, once each: rows
// not sorted by submit_s are sorted (stably), and a duration_s of 0 (or
// below a nanosecond) becomes 1 s.
func Read(name string, r io.Reader) (*Trace, error) {
	t := &Trace{Name: filepath.Base(name), file: name}
	file := t.label()
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked below, with a clearer message
	cr.ReuseRecord = true

	rec, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file; give a CSV file with the header %s and one row per job", file, Header)
	}
	if err != nil {
		return nil, csvError(file, err)
	}
	header := cleanHeader(rec)
	col, err := findColumns(file, header)
	if err != nil {
		return nil, err
	}

	var (
		seen       = map[string]int{} // job id -> line
		zeros      int                // jobs with a 0 s duration
		zeroLine   int                // the first of them
		unsorted   int                // the first line whose submit_s is below the one before
		prevSubmit time.Duration
	)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(file, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, but the header has %d; give one value per header column", file, line, len(rec), len(header))
		}
		bad := func(column, format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s: %s", file, line, column, fmt.Sprintf(format, args...))
		}

		j := Job{Line: line, Fraction: 1}
		j.ID = strings.TrimSpace(rec[col[colJob]])
		if j.ID == "" {
			return nil, bad(colJob, "empty; give the job's id")
		}
		if first, ok := seen[j.ID]; ok {
			return nil, bad(colJob, "%q appears again (first at line %d); give every job its own id", j.ID, first)
		}
		seen[j.ID] = line

		const giveSubmit = "seconds after the first job, a number >= 0"
		if j.Submit, err = parseSeconds(rec[col[colSubmit]], giveSubmit); err != nil {
			return nil, bad(colSubmit, "%v", err)
		}

		const giveGPUs = "the GPU count, a whole number >= 1"
		s := strings.TrimSpace(rec[col[colGPUs]])
		j.GPUs, err = strconv.Atoi(s)
		switch {
		case s == "":
			return nil, bad(colGPUs, "empty; give %s", giveGPUs)
		case errors.Is(err, strconv.ErrRange):
			return nil, bad(colGPUs, "%s is too large; give %s", s, giveGPUs)
		case err != nil:
			return nil, bad(colGPUs, "%q is not a whole number; give %s", s, giveGPUs)
		case j.GPUs < 1:
			return nil, bad(colGPUs, "%s is less than 1; give %s", s, giveGPUs)
		}

		if c, ok := col[colFraction]; ok {
			const giveFraction = "the share of each GPU, more than 0 and at most 1 (1.0 for whole GPUs)"
			s := strings.TrimSpace(rec[c])
			f, err := strconv.ParseFloat(s, 64)
			switch {
			case s == "":
				return nil, bad(colFraction, "empty; give %s", giveFraction)
			case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(f):
				return nil, bad(colFraction, "%q is not a number; give %s", s, giveFraction)
			case !(f > 0 && f <= 1):
				return nil, bad(colFraction, "%s is outside (0, 1]; give %s", s, giveFraction)
			case f < 1 && j.GPUs > 1:
				return nil, bad(colFraction, "%s with gpus %d; a share below 1 is allowed only with gpus 1: give 1.0, or gpus 1", s, j.GPUs)
			}
			j.Fraction = f
		}

		const giveDuration = "the run time in seconds, a number >= 0"
		if j.Duration, err = parseSeconds(rec[col[colDuration]], giveDuration); err != nil {
			return nil, bad(colDuration, "%v", err)
		}
		if j.Duration == 0 {
			j.Duration = time.Second
			if zeros == 0 {
				zeroLine = line
			}
			zeros++
		}

		if c, ok := col[colUser]; ok {
			j.User = strings.TrimSpace(rec[c])
		}
		if c, ok := col[colClass]; ok {
			j.Class = strings.TrimSpace(rec[c])
		}

		if len(t.Jobs) > 0 && j.Submit < prevSubmit && unsorted == 0 {
			unsorted = line
		}
		prevSubmit = j.Submit
		t.Jobs = append(t.Jobs, j)
	}
	if len(t.Jobs) == 0 {
		return nil, fmt.Errorf("%s: no jobs (only a header); give one row per job under the header", file)
	}

	if unsorted != 0 {
		slices.SortStableFunc(t.Jobs, func(a, b Job) int {
			switch {
			case a.Submit < b.Submit:
				return -1
			case a.Submit > b.Submit:
				return 1
			}
			return 0
		})
		t.Warnings = append(t.Warnings, fmt.Sprintf("%s: rows not sorted by submit_s (first at line %d): sorted", file, unsorted))
	}
	if zeros != 0 {
		jobs := "jobs have"
		if zeros == 1 {
			jobs = "job has"
		}
		t.Warnings = append(t.Warnings, fmt.Sprintf("%s: %d %s duration_s 0 (first at line %d): kept as 1 s", file, zeros, jobs, zeroLine))
	}
	return t, nil
}

// cleanHeader returns a copy of the header with spaces and a UTF-8 byte
// order mark trimmed from the names.
func cleanHeader(rec []string) []string {
	h := make([]string, len(rec))
	for i, name := range rec {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff")
		}
		h[i] = strings.TrimSpace(name)
	}
	return h
}

// findColumns maps each normalized column the header has to its index.
func findColumns(file string, header []string) (map[string]int, error) {
	col := map[string]int{}
	for i, name := range header {
		if !slices.Contains(knownCols, name) {
			continue
		}
		if j, ok := col[name]; ok {
			return nil, fmt.Errorf("%s:1: column %q appears twice (fields %d and %d); keep one", file, name, j+1, i+1)
		}
		col[name] = i
	}
	var missing []string
	for _, name := range requiredCols {
		if _, ok := col[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		what := "column"
		if len(missing) > 1 {
			what = "columns"
		}
		return nil, fmt.Errorf("%s:1: no %s %s in the header (%s); give the header %s",
			file, what, strings.Join(missing, ", "), strings.Join(header, ","), Header)
	}
	return col, nil
}

// parseSeconds parses a number of seconds >= 0. Its errors say what was
// wrong and end "give " + give.
func parseSeconds(s, give string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty; give %s", give)
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(f):
		return 0, fmt.Errorf("%q is not a number; give %s", s, give)
	case f < 0:
		return 0, fmt.Errorf("%s is negative; give %s", s, give)
	case f >= float64(maxSeconds): // +Inf too
		return 0, fmt.Errorf("%s is too large; give at most %d s (292 years)", s, maxSeconds)
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// csvError turns an error of encoding/csv into one that names the file
// and line.
func csvError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: bad CSV at column %d: %v; check the quotes", file, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: read: %w", file, err)
}
