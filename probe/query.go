package probe

import (
	"github.com/gssh/gssh/gpuinfo"

	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Field states: why a Value holds no value. nvidia-smi prints these in
// place of a value; Value.State carries them in lower case, without the
// brackets. A bracketed sentinel this list does not name keeps its own text
// ("[Requested functionality has been deprecated]" → "requested
// functionality has been deprecated"). GPU.MemoryState uses the same words.
const (
	FieldNA            = gpuinfo.FieldNA
	FieldNotSupported  = gpuinfo.FieldNotSupported
	FieldNoPermission  = gpuinfo.FieldNoPermission
	FieldUnknownError  = gpuinfo.FieldUnknownError
	FieldRequiresReset = gpuinfo.FieldRequiresReset
	FieldGPULost       = gpuinfo.FieldGPULost
	FieldErr           = gpuinfo.FieldErr
	FieldEmpty         = gpuinfo.FieldEmpty
	MemoryUnified      = gpuinfo.MemoryUnified
)

// Errors of the query parsers, matched with errors.Is.
var (
	// ErrColumnAligned: the output is nvidia-smi CSV passed through
	// `column -t` (corpus 016), or some other space-aligned table. gssh
	// always asks for --format=csv,noheader,nounits and does not parse it.
	ErrColumnAligned = errors.New("column-aligned output is not supported: ask nvidia-smi for --format=csv,noheader,nounits")
	// ErrFieldCount: a row has more or fewer fields than were asked for.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrNoHeader: no field list was given and the output has no header line.
	ErrNoHeader = errors.New("no header line and no field list")
)

// Value is one field of nvidia-smi's CSV output: its text, or the state
// that stands in for a value nvidia-smi could not give.
type Value struct {
	// Text is the field as printed, spaces trimmed and any unit suffix
	// removed ("81559 MiB" → "81559"); "" when State is set.
	Text string `json:"text,omitempty"`
	// Unit is the unit the value is in: from the header (`memory.total
	// [MiB]`) or stripped from the value; "" with csv,noheader,nounits.
	Unit string `json:"unit,omitempty"`
	// State says why there is no value (one of the Field constants, or a
	// sentinel's own text); "" when Text holds the value.
	State string `json:"state,omitempty"`
}

// Known reports whether v holds a value rather than a state.
func (v Value) Known() bool { return v.State == "" }

// Int returns v as a whole number (a utilization in %, a temperature in °C,
// a pid). Without a value the error is the state ("insufficient
// permissions").
func (v Value) Int() (int, error) {
	if !v.Known() {
		return 0, errors.New(v.State)
	}
	n, err := strconv.Atoi(v.Text)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", v.Text)
	}
	return n, nil
}

// Bytes returns a memory size in bytes. nvidia-smi reports memory in MiB;
// a value without a unit (csv,nounits) is taken as MiB.
func (v Value) Bytes() (uint64, error) {
	if !v.Known() {
		return 0, errors.New(v.State)
	}
	var scale uint64
	switch v.Unit {
	case "", "MiB":
		scale = 1 << 20
	case "KiB":
		scale = 1 << 10
	case "GiB":
		scale = 1 << 30
	default:
		return 0, fmt.Errorf("%q: unit %q is not a memory size", v.Text, v.Unit)
	}
	n, err := strconv.ParseUint(v.Text, 10, 64)
	if err != nil || n > math.MaxUint64/scale {
		return 0, fmt.Errorf("%q is not a memory size", v.Text)
	}
	return n * scale, nil
}

// parseValue reads one field. headerUnit is the unit the header gave the
// column ("" for none).
func parseValue(raw, headerUnit string) Value {
	s := strings.TrimSpace(raw)
	switch {
	case s == "":
		return Value{State: FieldEmpty}
	case s == "ERR!":
		return Value{State: FieldErr}
	case s == "N/A":
		return Value{State: FieldNA}
	case len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']':
		state := strings.ToLower(strings.TrimSpace(s[1 : len(s)-1]))
		if state == "" {
			state = FieldEmpty
		}
		return Value{State: state}
	}
	text, unit := stripUnit(s, headerUnit)
	return Value{Text: text, Unit: unit}
}

// stripUnit removes a unit suffix from a number: the header's unit, or
// without a header one of the units nvidia-smi prints (csv without
// nounits: "2296 MiB", "100.00 %", "71.15 W", "0 us").
func stripUnit(s, headerUnit string) (text, unit string) {
	if headerUnit != "" {
		if t, ok := strings.CutSuffix(s, " "+headerUnit); ok {
			return t, headerUnit
		}
		return s, headerUnit
	}
	num, u, ok := strings.Cut(s, " ")
	if !ok {
		return s, ""
	}
	switch u {
	case "MiB", "KiB", "GiB", "%", "W", "MHz", "us", "ms":
		if _, err := strconv.ParseFloat(num, 64); err == nil {
			return num, u
		}
	}
	return s, ""
}

// canonicalField names a query field by the name nvidia-smi's header uses,
// so that aliases compare equal (gpu_name = name, used_memory =
// used_gpu_memory, clocks.gr = clocks.current.graphics, ...). Field names
// are case-sensitive, as nvidia-smi's are.
func canonicalField(f string) string {
	switch f {
	case "gpu_name":
		return "name"
	case "gpu_bus_id":
		return "pci.bus_id"
	case "gpu_serial":
		return "serial"
	case "gpu_uuid":
		return "uuid"
	case "used_memory":
		return "used_gpu_memory"
	case "clocks.gr":
		return "clocks.current.graphics"
	case "clocks.sm":
		return "clocks.current.sm"
	case "clocks.mem":
		return "clocks.current.memory"
	case "clocks.video":
		return "clocks.current.video"
	case "clocks.max.gr":
		return "clocks.max.graphics"
	case "clocks.max.mem":
		return "clocks.max.memory"
	case "clocks.applications.gr":
		return "clocks.applications.graphics"
	case "clocks.applications.mem":
		return "clocks.applications.memory"
	case "clocks.default_applications.gr":
		return "clocks.default_applications.graphics"
	case "clocks.default_applications.mem":
		return "clocks.default_applications.memory"
	}
	if rest, ok := strings.CutPrefix(f, "clocks_throttle_reasons"); ok {
		return "clocks_event_reasons" + rest
	}
	return f
}

// headerNames reports whether a header column h stands for requested field
// f. In --query-compute-apps "name" is an alias of process_name, while in
// --query-gpu it is the GPU's name: the pair is accepted only here, by
// position, never for lookups.
func headerNames(h, f string) bool {
	if canonicalField(h) == canonicalField(f) {
		return true
	}
	return (h == "process_name" && f == "name") || (h == "name" && f == "process_name")
}

// freeTextField is the one field whose values may contain commas (process
// names are paths and command names: anything goes). Rows are split from
// both ends around it.
const freeTextField = "process_name"

// Row is one data line of a query.
type Row struct {
	Line   int     `json:"line"` // 1-based line number in the output
	Values []Value `json:"values"`
}

// Table is the parsed output of one `nvidia-smi --query-gpu=...` or
// `--query-compute-apps=...` command.
type Table struct {
	Fields []string `json:"fields"` // as asked for, or as the header names them when no list was given
	Rows   []Row    `json:"rows"`
}

// Col returns the column of field name (aliases allowed), or -1.
func (t Table) Col(name string) int {
	for i, f := range t.Fields {
		if f == name {
			return i
		}
	}
	c := canonicalField(name)
	for i, f := range t.Fields {
		if canonicalField(f) == c {
			return i
		}
	}
	return -1
}

// Get returns r's value of field name; ok is false when t has no such
// column.
func (t Table) Get(r Row, name string) (v Value, ok bool) {
	i := t.Col(name)
	if i < 0 || i >= len(r.Values) {
		return Value{}, false
	}
	return r.Values[i], true
}

// text returns r's field name as text: "" when absent or unknown.
func (t Table) text(r Row, name string) string {
	v, _ := t.Get(r, name)
	return v.Text
}

// ParseQuery parses the output of `nvidia-smi --query-gpu=FIELDS` or
// `--query-compute-apps=FIELDS` in csv format, with or without header and
// units. fields is the list that was asked for; a header line, when
// present, must name the same fields (aliases such as gpu_name = name
// allowed, unit suffixes like ` [MiB]` stripped and kept as the column's
// unit). With fields nil the header is required and names the columns.
//
// Rows that cannot be read are left out of the table and reported in the
// error, one "row N: ..." per row, joined; the table holds the rest. Values
// are not interpreted here: see Table.GPUs and Table.Procs.
func ParseQuery(fields []string, data []byte) (Table, error) {
	t, errs := parseTable(fields, splitLines(data))
	return t, errors.Join(errs...)
}

// line is one line of output and its 1-based number.
type line struct {
	n    int
	text string
}

// splitLines splits output into numbered lines, dropping "\r".
func splitLines(data []byte) []line {
	s := strings.ReplaceAll(string(data), "\r", "")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "\n")
	lines := make([]line, len(parts))
	for i, p := range parts {
		lines[i] = line{n: i + 1, text: p}
	}
	return lines
}

// parseTable is ParseQuery over numbered lines (ParseSMI passes a section's
// data lines, with its warnings and error lines taken out).
func parseTable(fields []string, lines []line) (Table, []error) {
	t := Table{Fields: fields, Rows: []Row{}}
	var units []string
	var errs []error
	for _, l := range lines {
		if strings.TrimSpace(l.text) == "" {
			continue
		}
		if units == nil {
			names, us, isHeader := readHeader(fields, l.text)
			if fields == nil && !isHeader {
				if aligned(l.text) {
					return t, []error{fmt.Errorf("row %d: %w: %q", l.n, ErrColumnAligned, clip(l.text))}
				}
				return t, []error{fmt.Errorf("row %d: %w", l.n, ErrNoHeader)}
			}
			if isHeader {
				t.Fields, units = names, us
				continue
			}
			units = make([]string, len(fields))
		}
		values, err := splitRow(t.Fields, units, l.text)
		if err != nil {
			errs = append(errs, fmt.Errorf("row %d: %w", l.n, err))
			if errors.Is(err, ErrColumnAligned) {
				return t, errs // one is enough: every row is the same
			}
			continue
		}
		t.Rows = append(t.Rows, Row{Line: l.n, Values: values})
	}
	return t, errs
}

// readHeader reads s as a header line: column names and their units. With
// fields given, s is a header only when it names exactly those fields.
func readHeader(fields []string, s string) (names, units []string, ok bool) {
	cols := strings.Split(s, ",")
	if fields != nil && len(cols) != len(fields) {
		return nil, nil, false
	}
	for i, c := range cols {
		name, unit := strings.TrimSpace(c), ""
		if base, u, found := strings.Cut(name, " ["); found && strings.HasSuffix(u, "]") {
			name, unit = base, strings.TrimSuffix(u, "]")
		}
		if !isFieldName(name) || (fields != nil && !headerNames(name, fields[i])) {
			return nil, nil, false
		}
		names, units = append(names, name), append(units, unit)
	}
	if fields != nil {
		names = fields
	}
	return names, units, true
}

// isFieldName reports whether s can be a query field name
// ("memory.total", "clocks_event_reasons.sw_power_cap"): a letter, then
// letters, digits, dots and underscores.
func isFieldName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// aligned reports whether s looks like a line of a space-aligned table
// (`column -t` output, nvidia-smi's default table): no commas, and table
// rules or at least two runs of spaces between columns.
func aligned(s string) bool {
	if strings.Contains(s, ",") {
		return false
	}
	if strings.HasPrefix(s, "+-") || strings.HasPrefix(s, "|") {
		return true
	}
	return strings.Count(strings.TrimSpace(s), "  ") >= 2
}

// splitRow splits one data line into len(fields) values. Only the free
// text field (process_name) may hold commas: the fields left of it are
// taken from the left, those right of it from the right, and the name is
// everything between.
func splitRow(fields, units []string, s string) ([]Value, error) {
	parts := strings.Split(s, ",")
	want := len(fields)
	if len(parts) > want {
		if k := freeTextCol(fields); k >= 0 {
			right := want - k - 1
			name := strings.Join(parts[k:len(parts)-right], ",")
			parts = append(append(parts[:k:k], name), parts[len(parts)-right:]...)
		}
	}
	if len(parts) != want {
		if aligned(s) {
			return nil, fmt.Errorf("%w: %q", ErrColumnAligned, clip(s))
		}
		return nil, fmt.Errorf("%w: expected %d (%s), got %d: %q", ErrFieldCount, want, strings.Join(fields, ", "), len(parts), clip(s))
	}
	values := make([]Value, want)
	for i, p := range parts {
		values[i] = parseValue(p, units[i])
	}
	return values, nil
}

// freeTextCol returns the column of the process name, or -1.
func freeTextCol(fields []string) int {
	for i, f := range fields {
		if f == freeTextField {
			return i
		}
	}
	return -1
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 80
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
