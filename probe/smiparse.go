package probe

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gssh/gssh/gpuinfo"
)

// ErrUnparsable is wrapped by ParseSMI's error when the output could not be
// understood (Snapshot.State HostProbeError).
var ErrUnparsable = errors.New("nvidia-smi output not understood")

// ParseSMI parses the whole output of SMIScript (every section, stderr
// merged as the script does) into a Snapshot of host. It is pure: it reads
// only out.
//
// The host's state comes from the --query-gpu section: its rows give the
// GPUs; without rows its exit status, then its text, name the failure
// (exit 9 "driver not loaded", 18 "driver mismatch", 12 or
// "libnvidia-ml.so" "nvml not found", 127 "nvidia-smi missing", "No
// devices were found" "no devices"), and Error holds the tool's message.
// GPUs nvidia-smi names in an "Unable to determine the device handle"
// line, lists in -L but not in the query, or skips in the index sequence
// are listed as lost, and any GPU not ok makes the host "degraded". -L adds
// MIG devices; the process list attaches by GPU UUID; ps adds users.
// Warnings and error lines mixed into the output go to Warnings.
//
// The error is non-nil when the output could not be understood (garbage
// instead of CSV, a missing section): then State is HostProbeError, Error
// says which row and what was expected, the error wraps ErrUnparsable, and
// the GPUs that did parse are still listed. It is a *RejectedFieldError
// when nvidia-smi refused a query field it does not know (State
// HostProbeError): SMI then asks again without it. Every other state, a
// broken driver included, is a fact about the host.
func ParseSMI(host string, out []byte) (Snapshot, error) {
	return parseSMI(host, strings.Split(smiGPUFields, ","), out)
}

// parseSMI is ParseSMI of a script whose --query-gpu asked for gpuFields.
func parseSMI(host string, gpuFields []string, out []byte) (Snapshot, error) {
	p := smiParse{
		snap:      Snapshot{Host: host, State: HostOK, Source: SourceSMI, Warnings: []string{}, GPUs: []GPU{}},
		warned:    map[string]bool{},
		gpuFields: gpuFields,
	}
	p.parse(out)
	return p.result()
}

// RejectedFieldError is nvidia-smi refusing a query field it does not
// know, as a driver older than the field does (corpus f01-f04):
//
//	Field "mig.mode.current" is not a valid field to query.
//
// on stdout, then an empty line, exit status 2, and nothing queried.
type RejectedFieldError struct {
	Host    string
	Query   string // "--query-gpu" (a rejection in --query-compute-apps is a warning)
	Field   string // as nvidia-smi names it
	Message string // its line
}

func (e *RejectedFieldError) Error() string { return e.Host + ": " + e.detail() }

// detail is the error without the host, for Snapshot.Error.
func (e *RejectedFieldError) detail() string {
	return fmt.Sprintf("nvidia-smi %s rejects the field %s: %s", e.Query, e.Field, e.Message)
}

// rejectedField finds nvidia-smi's refusal of a query field among a
// section's lines and returns the field and the line. The quotes may be
// typographic (“…”) where the line was copied through a word processor.
func rejectedField(lines []string) (field, msg string, ok bool) {
	for _, l := range lines {
		rest, found := strings.CutPrefix(strings.TrimSpace(l), "Field ")
		if !found {
			continue
		}
		var closing string
		switch {
		case strings.HasPrefix(rest, `"`):
			rest, closing = rest[1:], `"`
		case strings.HasPrefix(rest, "“"):
			rest, closing = strings.TrimPrefix(rest, "“"), "”"
		default:
			continue
		}
		name, tail, found := strings.Cut(rest, closing)
		tail = strings.TrimSuffix(strings.TrimSpace(tail), ".")
		if found && isFieldName(name) && tail == "is not a valid field to query" {
			return name, strings.TrimSpace(l), true
		}
	}
	return "", "", false
}

// maxWarnings bounds Snapshot.Warnings: broken output can make one per
// line.
const maxWarnings = 32

// smiParse is one run of ParseSMI.
type smiParse struct {
	snap      Snapshot
	gpuFields []string            // what --query-gpu asked for
	rejected  *RejectedFieldError // --query-gpu refused a field
	warned    map[string]bool     // warnings already given
	dropped   int                 // warnings past maxWarnings
	lost      []lostLine          // "Unable to determine the device handle" lines, in order
	problems  []error             // why the output is not understood
}

// parse reads out into p.snap.
func (p *smiParse) parse(out []byte) {
	secs := splitSections(out)
	p.outside(secs.outside)
	sifted := map[string]sifted{}
	p.host(secs.byName["host"])
	for _, name := range []string{"gpu", "list", "apps", "ps"} {
		if s := secs.byName[name]; s != nil {
			sifted[name] = p.sift(s)
		}
	}
	gpu := secs.byName["gpu"]
	switch {
	case len(secs.byName) == 0:
		p.problem(fmt.Errorf("no nvidia-smi section in the output: the probe script did not run (is the login shell POSIX sh?)%s", firstLine(secs.outside)))
		return
	case gpu == nil:
		p.problem(errors.New("no --query-gpu section in the output"))
		return
	case !gpu.done:
		p.problem(errors.New("nvidia-smi --query-gpu: output ends before its exit status"))
		return
	case len(secs.twice) > 0:
		p.problem(fmt.Errorf("section %s appears twice in the output", secs.twice[0]))
	}
	if !p.gpus(gpu, sifted["gpu"]) {
		return
	}
	listed := p.list(secs.byName["list"], sifted["list"])
	p.mergeLost(listed)
	p.procs(secs.byName["apps"], sifted["apps"])
	p.users(secs.byName["ps"], sifted["ps"])
	if !secs.ended {
		p.warn("the probe script's output ends early: later sections may be missing")
	}
}

// result settles the host state from the GPUs and problems found.
func (p *smiParse) result() (Snapshot, error) {
	slices.SortStableFunc(p.snap.GPUs, func(a, b GPU) int { return a.Index - b.Index })
	if p.dropped > 0 {
		p.snap.Warnings = append(p.snap.Warnings, fmt.Sprintf("(%d more warnings)", p.dropped))
	}
	if p.rejected != nil {
		return p.snap, p.rejected
	}
	if len(p.problems) > 0 {
		err := problems(p.problems)
		p.snap.State, p.snap.Error = HostProbeError, err.Error()
		return p.snap, fmt.Errorf("%s: %w: %w", p.snap.Host, ErrUnparsable, err)
	}
	if p.snap.State != HostOK {
		return p.snap, nil
	}
	var bad []string
	for _, g := range p.snap.GPUs {
		if g.Health != HealthOK {
			bad = append(bad, fmt.Sprintf("GPU %d %s: %s", g.Index, g.Health, g.HealthWhy))
		}
	}
	if len(bad) > 0 {
		p.snap.State, p.snap.Error = HostDegraded, strings.Join(bad, "; ")
	}
	return p.snap, nil
}

// problems are why an output is not understood. Its message is the first
// and how many more there are (garbage makes one per line); errors.Is and
// errors.As see them all.
type problems []error

func (ps problems) Error() string {
	if len(ps) == 1 {
		return ps[0].Error()
	}
	return fmt.Sprintf("%v (and %d more)", ps[0], len(ps)-1)
}

func (ps problems) Unwrap() []error { return ps }

// problem records why the output is not understood.
func (p *smiParse) problem(err error) { p.problems = append(p.problems, err) }

// warn adds a warning once.
func (p *smiParse) warn(w string) {
	switch {
	case p.warned[w]:
	case len(p.snap.Warnings) >= maxWarnings:
		p.dropped++
	default:
		p.warned[w] = true
		p.snap.Warnings = append(p.snap.Warnings, w)
	}
}

// fail sets a host state that leaves no GPUs to list.
func (p *smiParse) fail(state HostState, msg string) {
	p.snap.State, p.snap.Error = state, msg
}

// outside warns about output that is in no section (a login script that
// prints, or what follows the end marker).
func (p *smiParse) outside(lines []line) {
	if s := firstLine(lines); s != "" {
		p.warn("output outside the probe's sections (login scripts?)" + s)
	}
}

// firstLine quotes the first non-blank line of lines for a message, with
// how many more there are; "" when all are blank.
func firstLine(lines []line) string {
	var first string
	more := 0
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l.text) == "":
		case first == "":
			first = strings.TrimSpace(l.text)
		default:
			more++
		}
	}
	switch {
	case first == "":
		return ""
	case more > 0:
		return fmt.Sprintf(": %q (and %d more lines)", clip(first), more)
	}
	return fmt.Sprintf(": %q", clip(first))
}

// sifted is a section's output with lost-GPU lines and warnings taken out.
type sifted struct {
	data []line   // stdout lines to parse
	msgs []string // stderr lines: the tool's own messages
	text []string // every remaining non-blank line, stderr first: the tool's message when it fails
}

// sift takes lost-GPU lines and warnings out of a section. Both can come on
// stdout or stderr, and every nvidia-smi call repeats them.
func (p *smiParse) sift(s *section) sifted {
	var out sifted
	for i, l := range slices.Concat(s.stderr, s.stdout) {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		if lost, ok := parseLost(t); ok {
			p.lost = append(p.lost, lost)
			continue
		}
		if isWarning(t) {
			p.warn(t)
			continue
		}
		out.text = append(out.text, t)
		if i < len(s.stderr) {
			out.msgs = append(out.msgs, t)
		} else {
			out.data = append(out.data, l)
		}
	}
	return out
}

// isWarning reports whether a line is one of nvidia-smi's warnings
// ("WARNING: infoROM is corrupted at gpu 0000:04:00.0").
func isWarning(s string) bool {
	return strings.HasPrefix(strings.ToLower(s), "warning")
}

// host reads the host section (the host's CPUs and memory) into
// Snapshot.HostInfo, whatever became of nvidia-smi. Facts it lacks (no
// /proc: not Linux) are warnings, never a probe error. An output without
// the section (one not of SMIScript) leaves HostInfo nil, silently.
func (p *smiParse) host(s *section) {
	if s == nil {
		return
	}
	lines := make([]string, len(s.stdout))
	for i, l := range s.stdout {
		lines[i] = l.text
	}
	info, warns := gpuinfo.ParseHostInfo(lines)
	p.snap.HostInfo = info
	for _, w := range warns {
		p.warn(w)
	}
	if !s.done {
		p.warn("the host section ends before its exit status: host facts may be missing")
	}
}

// gpus reads the --query-gpu section. It reports false when the host has
// no GPU list to go on (a failure state or a problem).
func (p *smiParse) gpus(s *section, d sifted) bool {
	t, rowErrs := parseTable(p.gpuFields, d.data)
	if len(t.Rows) == 0 && len(p.lost) == 0 {
		if field, msg, ok := rejectedField(d.text); ok {
			p.rejected = &RejectedFieldError{Host: p.snap.Host, Query: "--query-gpu", Field: field, Message: msg}
			p.fail(HostProbeError, p.rejected.detail())
			return false
		}
		text := strings.Join(d.text, "; ")
		if state, ok := smiFailure(s.rc, text); ok {
			if state == HostSMIMissing {
				text = "nvidia-smi not found on PATH, in /usr/lib/wsl/lib or in /usr/bin: " + text
			}
			p.fail(state, text)
			return false
		}
		if len(rowErrs) == 0 {
			rowErrs = []error{fmt.Errorf("printed no GPU rows (exit status %d)", s.rc)}
		}
	}
	for _, err := range rowErrs {
		p.problem(fmt.Errorf("nvidia-smi --query-gpu: %w", err))
	}
	seen := map[int]bool{}
	for i, r := range t.Rows {
		g, err := t.gpu(r, i)
		if err != nil {
			p.problem(fmt.Errorf("nvidia-smi --query-gpu: row %d: %w", r.Line, err))
			continue
		}
		if seen[g.Index] {
			p.problem(fmt.Errorf("nvidia-smi --query-gpu: GPU index %d appears twice", g.Index))
			continue
		}
		seen[g.Index] = true
		p.snap.GPUs = append(p.snap.GPUs, g)
	}
	for _, r := range t.Rows {
		if v, _ := t.Get(r, "driver_version"); v.Known() {
			p.snap.Driver = v.Text
			break
		}
	}
	p.exitWarning("nvidia-smi --query-gpu", s.rc, d.msgs)
	return len(p.problems) == 0 || len(p.snap.GPUs) > 0
}

// exitWarning warns about a command that exited non-zero although its
// output was used, or that wrote to stderr.
func (p *smiParse) exitWarning(cmd string, rc int, msgs []string) {
	switch {
	case rc != 0 && len(msgs) > 0:
		p.warn(fmt.Sprintf("%s: exit status %d: %s", cmd, rc, strings.Join(msgs, "; ")))
	case rc != 0:
		p.warn(fmt.Sprintf("%s: exit status %d", cmd, rc))
	case len(msgs) > 0:
		p.warn(fmt.Sprintf("%s: %s", cmd, strings.Join(msgs, "; ")))
	}
}

// smiFailure names the failure of an nvidia-smi that printed no GPU rows:
// by its exit status first, by its message second.
func smiFailure(rc int, text string) (HostState, bool) {
	switch rc {
	case 9:
		return HostDriverNotLoaded, true
	case 12:
		return HostNVMLNotFound, true
	case 18:
		return HostDriverMismatch, true
	case 126, 127:
		return HostSMIMissing, true
	}
	l := strings.ToLower(text)
	switch {
	case strings.Contains(l, "no devices were found"):
		return HostNoDevices, true
	case strings.Contains(l, "couldn't communicate with the nvidia driver"):
		return HostDriverNotLoaded, true
	case strings.Contains(l, "driver/library version mismatch"):
		return HostDriverMismatch, true
	case strings.Contains(l, "libnvidia-ml.so"):
		return HostNVMLNotFound, true
	case strings.Contains(l, "command not found"), strings.Contains(l, "nvidia-smi: not found"):
		return HostSMIMissing, true
	}
	return "", false
}

// list reads the -L section: MIG devices attach to their GPU by index.
// It returns the GPUs -L names, for the lost-GPU cross-check.
func (p *smiParse) list(s *section, d sifted) []ListedGPU {
	if s == nil || !s.done {
		p.warn("nvidia-smi -L did not run: MIG devices unknown")
		return nil
	}
	listed, errs := parseList(d.data)
	for _, err := range errs {
		p.warn(fmt.Sprintf("nvidia-smi -L: %v", err))
	}
	p.exitWarning("nvidia-smi -L", s.rc, d.msgs)
	pos := p.positions()
	for _, lg := range listed {
		k, ok := pos[lg.Index]
		if !ok {
			continue
		}
		g := &p.snap.GPUs[k]
		if lg.UUID != "" && g.UUID != "" && lg.UUID != g.UUID {
			p.warn(fmt.Sprintf("nvidia-smi -L names GPU %d %s, --query-gpu %s", lg.Index, lg.UUID, g.UUID))
		}
		g.MIG = append(g.MIG, lg.MIG...)
	}
	return listed
}

// positions maps GPU index to position in p.snap.GPUs.
func (p *smiParse) positions() map[int]int {
	pos := make(map[int]int, len(p.snap.GPUs))
	for k, g := range p.snap.GPUs {
		pos[g.Index] = k
	}
	return pos
}

// lostLine is one "Unable to determine the device handle" line:
//
//	Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error
//	Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU
type lostLine struct {
	index int    // -1 when the line names only the bus id
	busID string // in --query-gpu's form, 00000000:34:00.0
	msg   string // the whole line
}

// parseLost reads a lost-GPU line.
func parseLost(s string) (lostLine, bool) {
	rest, ok := strings.CutPrefix(s, "Unable to determine the device handle for ")
	if !ok || len(rest) < 3 || !strings.EqualFold(rest[:3], "gpu") {
		return lostLine{}, false
	}
	rest = strings.TrimSpace(rest[3:])
	l := lostLine{index: -1, msg: s}
	if idx, after, ok := strings.Cut(rest, ": "); ok {
		if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < maxGPUs {
			l.index, rest = n, after
		}
	}
	bus, _, _ := strings.Cut(rest, ": ")
	if !strings.Contains(bus, ":") {
		return lostLine{}, false
	}
	l.busID = canonicalBusID(bus)
	return l, true
}

// canonicalBusID writes a PCI bus id as --query-gpu does: an 8-digit
// domain, upper case ("0000:ac:00.0" → "00000000:AC:00.0").
func canonicalBusID(s string) string {
	domain, rest, ok := strings.Cut(s, ":")
	d, err := strconv.ParseUint(domain, 16, 32)
	if !ok || err != nil {
		return strings.ToUpper(s)
	}
	return fmt.Sprintf("%08X:%s", d, strings.ToUpper(rest))
}

// mergeLost lists the GPUs that nvidia-smi could not read. A GPU is lost
// when a lost line names it (by index, or by bus id), when -L names an
// index the query has no row for, or when the query's indices have a gap:
// indices are never renumbered, so GPU 1 missing between 0 and 2 is a GPU
// that did not answer. A line naming only a bus id fills the lowest
// missing index.
func (p *smiParse) mergeLost(listed []ListedGPU) {
	var byBus []lostLine
	seen := map[string]bool{}
	for _, l := range p.lost {
		if seen[l.msg] {
			continue
		}
		seen[l.msg] = true
		switch g := p.lostTarget(l); {
		case g != nil:
			markLost(g, l)
		case l.index >= 0:
			p.snap.GPUs = append(p.snap.GPUs, lostGPU(l.index, l.busID, l.msg))
		default:
			byBus = append(byBus, l)
		}
	}
	slices.SortStableFunc(byBus, func(a, b lostLine) int { return strings.Compare(a.busID, b.busID) })
	names := map[int]ListedGPU{}
	for _, lg := range listed {
		names[lg.Index] = lg
	}
	for _, i := range p.missing(listed, len(byBus)) {
		why := fmt.Sprintf("nvidia-smi --query-gpu has no row for GPU %d", i)
		if _, ok := names[i]; ok {
			why += " (nvidia-smi -L lists it)"
		}
		g := lostGPU(i, "", why)
		if len(byBus) > 0 {
			g.BusID, g.HealthWhy, byBus = byBus[0].busID, byBus[0].msg, byBus[1:]
		}
		p.snap.GPUs = append(p.snap.GPUs, g)
	}
	for _, l := range byBus {
		p.warn("no GPU index left for a lost GPU: " + l.msg)
	}
	for k := range p.snap.GPUs {
		g := &p.snap.GPUs[k]
		if lg, ok := names[g.Index]; ok && g.Health == HealthLost && g.Name == "" {
			g.Name, g.UUID = lg.Name, lg.UUID
		}
	}
}

// lostTarget returns the listed GPU a lost line names, or nil: the same
// lost line repeats in every nvidia-smi call.
func (p *smiParse) lostTarget(l lostLine) *GPU {
	for k := range p.snap.GPUs {
		g := &p.snap.GPUs[k]
		if l.index >= 0 && g.Index == l.index || l.index < 0 && canonicalBusID(g.BusID) == l.busID {
			return g
		}
	}
	return nil
}

// markLost marks a GPU lost by a lost line; the first line wins.
func markLost(g *GPU, l lostLine) {
	if g.Health == HealthLost {
		return
	}
	g.Health, g.HealthWhy, g.ProcsKnown = HealthLost, l.msg, false
	if g.BusID == "" {
		g.BusID = l.busID
	}
}

// lostGPU is a GPU that nvidia-smi could not read.
func lostGPU(index int, busID, why string) GPU {
	return GPU{Index: index, BusID: busID, Health: HealthLost, HealthWhy: why, Procs: []Proc{}}
}

// missing returns the indices, ascending, that have no GPU: those -L
// names, the gaps below the highest index, and extra ones past it for
// lost lines naming only a bus id.
func (p *smiParse) missing(listed []ListedGPU, extra int) []int {
	have := map[int]bool{}
	top := -1
	for _, g := range p.snap.GPUs {
		have[g.Index] = true
		top = max(top, g.Index)
	}
	for _, lg := range listed {
		top = max(top, lg.Index)
	}
	var idx []int
	for i := 0; i <= top; i++ {
		if !have[i] {
			idx = append(idx, i)
		}
	}
	for i := top + 1; len(idx) < extra && i < maxGPUs; i++ {
		idx = append(idx, i)
	}
	return idx
}

// procs reads the --query-compute-apps section. Processes attach to their
// GPU by UUID (a MIG device's UUID to its parent). A GPU's list is known
// only when the query succeeded and none of its rows was unreadable.
func (p *smiParse) procs(s *section, d sifted) {
	if s == nil || !s.done {
		p.warn("nvidia-smi --query-compute-apps did not run: process lists unknown")
		return
	}
	if field, msg, ok := rejectedField(d.text); ok && s.rc != 0 {
		// Every field of the process query is one the lists need.
		p.warn(fmt.Sprintf("process lists unknown: nvidia-smi --query-compute-apps rejects the field %s (%s)", field, msg))
		p.unknownProcs(p.all())
		return
	}
	p.exitWarning("nvidia-smi --query-compute-apps", s.rc, d.msgs)
	for k := range p.snap.GPUs {
		g := &p.snap.GPUs[k]
		g.ProcsKnown = s.rc == 0 && g.Health != HealthLost
	}
	if s.rc != 0 {
		p.warn("process lists unknown: nvidia-smi --query-compute-apps failed")
	}
	data := slices.DeleteFunc(d.data, func(l line) bool {
		return strings.EqualFold(strings.TrimSpace(l.text), "No running processes found")
	})
	t, errs := parseTable(strings.Split(smiProcFields, ","), data)
	for _, err := range errs {
		p.warn(fmt.Sprintf("nvidia-smi --query-compute-apps: %v: process lists unknown", err))
		p.unknownProcs(p.all())
	}
	for _, r := range t.Rows {
		p.proc(t, r)
	}
}

// proc attaches one process row to its GPU.
func (p *smiParse) proc(t Table, r Row) {
	uuid := gpuUUID(t.text(r, "gpu_uuid"))
	targets := p.byUUID(uuid)
	gpuName := uuid
	switch {
	case len(targets) == 1:
		gpuName = strconv.Itoa(p.snap.GPUs[targets[0]].Index)
	case uuid == "":
		gpuName = "without a UUID"
	}
	proc, err := t.proc(r)
	switch {
	case err != nil:
		p.warn(fmt.Sprintf("nvidia-smi --query-compute-apps: row %d: %v: process skipped; the process list of GPU %s is incomplete", r.Line, err, gpuName))
		if len(targets) == 0 {
			targets = p.all()
		}
		p.unknownProcs(targets)
	case len(targets) == 1:
		g := &p.snap.GPUs[targets[0]]
		g.Procs = append(g.Procs, proc)
	case len(targets) == 0:
		p.warn(fmt.Sprintf("process %d runs on GPU %s, which --query-gpu does not list", proc.PID, gpuName))
	default:
		p.warn(fmt.Sprintf("process %d runs on a GPU without a UUID: it could be any of %d GPUs", proc.PID, len(targets)))
		p.unknownProcs(targets)
	}
}

// byUUID returns the positions in p.snap.GPUs of the GPUs a process's GPU
// UUID can mean: the one with that UUID or with a MIG device of that UUID;
// for "" every readable GPU without a UUID.
func (p *smiParse) byUUID(uuid string) []int {
	var ks []int
	for k, g := range p.snap.GPUs {
		switch {
		case uuid == "" && g.UUID == "" && g.Health != HealthLost:
			ks = append(ks, k)
		case uuid != "" && (g.UUID == uuid || slices.ContainsFunc(g.MIG, func(m MIG) bool { return m.UUID == uuid })):
			return []int{k}
		}
	}
	return ks
}

// all returns the positions of every GPU in p.snap.GPUs.
func (p *smiParse) all() []int {
	ks := make([]int, len(p.snap.GPUs))
	for k := range ks {
		ks[k] = k
	}
	return ks
}

// unknownProcs marks the process lists of the GPUs at positions ks
// unknown: an empty or partial list there does not mean idle.
func (p *smiParse) unknownProcs(ks []int) {
	for _, k := range ks {
		p.snap.GPUs[k].ProcsKnown = false
	}
}

// users reads the ps section (`ps -o pid= -o user=`) and names each
// process's user. Pids ps cannot see (another pid namespace) keep "".
func (p *smiParse) users(s *section, d sifted) {
	if s == nil {
		return
	}
	users := map[int]string{}
	for _, l := range d.data {
		pid, user, ok := psRow(l.text)
		if !ok {
			p.warn(fmt.Sprintf("ps: row %d: not `PID USER`: %q", l.n, clip(l.text)))
			continue
		}
		users[pid] = user
	}
	for k := range p.snap.GPUs {
		for i := range p.snap.GPUs[k].Procs {
			pr := &p.snap.GPUs[k].Procs[i]
			pr.User = users[pr.PID]
		}
	}
}

// psRow reads one `ps -o pid= -o user=` line.
func psRow(s string) (pid int, user string, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, "", false
	}
	pid, err := strconv.Atoi(f[0])
	return pid, f[1], err == nil
}
