package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

// Bounds of --watch, in seconds: faster than twice a second would only load
// the hosts; a day apart is cron's job.
const minWatch, maxWatch = 0.5, 86400.0

type gpusOptions struct {
	hosts  []string
	labels []string
	json   bool
	watch  float64 // seconds; 0 = once
	// maxAge: what a running gssh serve may answer from (--max-age;
	// --fresh: 0).
	maxAge time.Duration
	fresh  bool
}

func newGPUsCmd(a *app, runF func(*gpusOptions) error) *cobra.Command {
	opts := &gpusOptions{}
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "Show every GPU on every host in one table",
		Long: `Probe every host in parallel and print one table of their GPUs: memory
used / total, utilization, temperature, processes and their users, the
gssh jobs holding each GPU, and its state. A host that cannot be reached is
one row with the reason. A second table lists the GPU processes that are
no running gssh job's (foreign, orphaned, another queue's). Tab-separated
when stdout is not a terminal; --json: docs/json.md. A gssh serve running
for the state answers it over its open connections (--max-age, --fresh).`,
		Example: `  gssh gpus
  gssh gpus --host gpu01,gpu02 --json
  gssh gpus --label a100 --watch 2`,
		Annotations: exits(usageExit, hostsExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkHostFlag(c, opts.hosts); err != nil {
				return err
			}
			if w := opts.watch; w != 0 && !(w >= minWatch && w <= maxWatch) {
				return fmt.Errorf("--watch %v: give a number of seconds from %v to %v", w, minWatch, maxWatch)
			}
			if err := checkDuration("--max-age", opts.maxAge, 0, time.Hour); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return gpusRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.hosts, "host", nil, "only these hosts (repeat or comma-separate)")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.BoolVar(&opts.json, "json", false, "print JSON instead of a table")
	fl.Float64Var(&opts.watch, "watch", 0, "re-probe and reprint every SECONDS (0.5 to 86400) until interrupted; 0: once")
	fl.DurationVar(&opts.maxAge, "max-age", 5*time.Second, "a running gssh serve may answer from its probe of at most this age (0 to 1h)")
	fl.BoolVar(&opts.fresh, "fresh", false, "a probe now, even through gssh serve (--max-age 0)")
	return cmd
}

func gpusRun(ctx context.Context, a *app, opts *gpusOptions) error {
	svc := a.service()
	q := service.HostQuery{Hosts: opts.hosts, Labels: opts.labels, MaxAge: opts.maxAge}
	if w := time.Duration(opts.watch * float64(time.Second)); w > 0 {
		q.MaxAge = min(q.MaxAge, w/2) // each round a newer probe than the last
	}
	if opts.fresh {
		q.MaxAge = 0
	}
	for {
		doc, err := svc.GPUs(ctx, q)
		var pe *service.PartialError
		damaged := errors.Is(err, state.ErrDamaged) // the table, then the error (exit 3)
		if err != nil && !errors.As(err, &pe) && !damaged {
			return interrupted(ctx, err)
		}
		if opts.watch > 0 && a.tty && !opts.json {
			fmt.Fprint(a.stdout, "\x1b[H\x1b[2J")
		}
		if opts.watch > 0 && !a.tty && !opts.json {
			fmt.Fprintf(a.stdout, "# %s\n", a.now().Format(time.RFC3339))
		}
		if opts.json {
			if jerr := a.printJSON(doc); jerr != nil {
				return jerr
			}
		} else if terr := a.printGPUTable(doc.Hosts); terr != nil {
			return terr
		}
		if doc.JobsError != "" && !opts.json && !damaged {
			what := "gssh jobs not shown"
			if strings.Contains(doc.JobsError, state.ErrBadRecord.Error()) {
				what = "some gssh jobs not shown" // the others are
			}
			fmt.Fprintf(a.stderr, "gssh: warning: %s: %s\n", what, doc.JobsError)
		}
		if opts.watch == 0 {
			return err
		}
		if damaged {
			fmt.Fprintf(a.stderr, "gssh: %v\n", err) // each round: the table alone would not say why it has no jobs
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(time.Duration(opts.watch * float64(time.Second))):
		}
	}
}

var gpuHeader = []string{"HOST", "GPU", "NAME", "MEMORY", "UTIL", "TEMP", "PROCESSES", "GSSH JOBS", "STATE"}

// otherHeader heads the table under the GPUs: the GPU processes that are
// no running gssh job's, and the memory held by processes no probe sees.
var otherHeader = []string{"HOST", "GPU", "PID", "USER", "MEMORY", "COMMAND", "WHOSE"}

// otherRows lists, host by host, the GPU processes that are no running
// gssh job's (orphans, other queues', foreign, unattributed: see gssh
// reap --dry-run for why) and then the invisible memory of each GPU.
func otherRows(hosts []service.HostGPUs) [][]string {
	sorted := slices.Clone(hosts)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Host < sorted[j].Host })
	var rows [][]string
	for _, h := range sorted {
		for _, p := range h.Processes {
			if p.Kind == reap.KindJob {
				continue
			}
			rows = append(rows, []string{h.Host, strconv.Itoa(p.GPU), strconv.Itoa(p.PID), cmp.Or(printable(p.User), "?"),
				size(p.UsedBytes), cmp.Or(printable(p.Name), "?"), whose(p)})
		}
		for _, v := range h.Invisible {
			rows = append(rows, []string{h.Host, strconv.Itoa(v.GPU), "-", "-", units.FormatMem(v.Bytes), "-", "memory held by an invisible process"})
		}
	}
	return rows
}

// whose says in a few words whose a process is.
func whose(p service.ProcessDoc) string {
	switch p.Kind {
	case reap.KindOrphan:
		return fmt.Sprintf("orphan of job %s (attempt %d)", p.Ref(), p.Attempt)
	case reap.KindOtherQueue:
		return fmt.Sprintf("job %d of another gssh queue (%.4s)", p.Job, p.Queue)
	}
	return string(p.Kind)
}

// gpuRows turns hosts into table rows, sorted by host then GPU index; MIG
// devices follow their GPU as "0/mig1". Host warnings are returned apart.
func gpuRows(hosts []service.HostGPUs, now time.Time) (rows [][]string, warnings []string) {
	sorted := slices.Clone(hosts)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Host < sorted[j].Host })
	for _, r := range sorted {
		s := r.Snapshot
		name := s.Host
		drained := drainCell(r.DrainDoc, now)
		for _, w := range s.Warnings {
			warnings = append(warnings, name+": "+w)
		}
		if len(s.GPUs) == 0 {
			rows = append(rows, []string{name, "-", "-", "-", "-", "-", "-", "-", hostState(s) + drained})
			continue
		}
		gpus := append([]probe.GPU(nil), s.GPUs...)
		sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
		for _, g := range gpus {
			id := cmp.Or(g.UUID, strconv.Itoa(g.Index))
			held := r.Jobs
			if g.UUID == "" {
				// No UUID read (a GPU fallen off the bus, or none reported):
				// the jobs placed on its index are its.
				held = nil
				for _, j := range r.Jobs {
					if j.Index == g.Index {
						j.ID = id
						held = append(held, j)
					}
				}
			}
			rows = append(rows, []string{name, fmt.Sprint(g.Index), cmp.Or(g.Name, "-"), memory(g.MemUsed, g.MemTotal, g.MemoryState),
				pct(g.UtilPct), temp(g.TempC), procs(g), holdersCell(held, id), gpuState(g, r.Recovering) + drained})
			for _, m := range g.MIG {
				rows = append(rows, []string{name, fmt.Sprintf("%d/mig%d", g.Index, m.Index), "MIG " + m.Profile,
					memory(m.MemUsed, m.MemTotal, ""), "-", "-", "-", holdersCell(r.Jobs, m.UUID), string(g.Health)})
			}
		}
	}
	return rows, warnings
}

// holdersCell names the gssh jobs holding the GPU (or MIG device) id, as
// "14 alice excl" or "16_2 bob 8.0 GiB" (an array task, its booking),
// "-" when none.
func holdersCell(jobs []service.GPUJob, id string) string {
	var out []string
	for _, j := range jobs {
		if id == "" || j.ID != id {
			continue
		}
		booked := "excl"
		if j.BookedBytes > 0 {
			booked = units.FormatMem(j.BookedBytes)
		}
		out = append(out, fmt.Sprintf("%s %s %s", j.Ref(), printable(j.User), booked))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

func (a *app) printGPUTable(hosts []service.HostGPUs) error {
	rows, warnings := gpuRows(hosts, a.now())
	if err := printTable(a.stdout, a.tty, gpuHeader, rows); err != nil {
		return err
	}
	for _, h := range hosts {
		if note := drainNote(h.Host, h.DrainDoc, a.now()); note != "" {
			fmt.Fprintln(a.stdout, note)
		}
	}
	if others := otherRows(hosts); len(others) > 0 {
		fmt.Fprintln(a.stdout)
		if err := printTable(a.stdout, a.tty, otherHeader, others); err != nil {
			return err
		}
	}
	for _, w := range warnings {
		fmt.Fprintln(a.stderr, "gssh: warning:", w)
	}
	return nil
}

// hostState is the STATE cell of a host without GPU rows: the state and why.
func hostState(s probe.Snapshot) string {
	if s.Error == "" || s.State == probe.HostOK {
		return string(s.State)
	}
	return string(s.State) + ": " + oneLine(s.Error)
}

// gpuState is a GPU's STATE cell: its health (and why), MIG, and, for a
// GPU a pass found unhealthy that has not read healthy in enough probes
// since, that it takes no jobs and why.
func gpuState(g probe.GPU, recovering map[string]health.GPU) string {
	st := string(g.Health)
	if g.HealthWhy != "" && g.Health != probe.HealthOK {
		st += ": " + oneLine(g.HealthWhy)
	}
	if rec, ok := recovering[strconv.Itoa(g.Index)]; ok {
		st += " (no new jobs: " + rec.Text() + ")"
	}
	if g.MIGMode == "Enabled" {
		st += " (MIG)"
	}
	return st
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// memory prints "used / total" in IEC units; "?" for an unknown side, with
// the reason when both are unknown.
func memory(used, total *uint64, state string) string {
	if used == nil && total == nil {
		if state != "" {
			return "? (" + state + ")"
		}
		return "-"
	}
	return size(used) + " / " + size(total)
}

// size prints bytes as units.FormatMem does, "?" when unknown.
func size(b *uint64) string {
	if b == nil {
		return "?"
	}
	return units.FormatMem(*b)
}

func pct(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d%%", *p)
}

func temp(c *int) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%dC", *c)
}

// procs prints "3 (alice, bob)": the count and the distinct users, "?" when
// the list could not be read.
func procs(g probe.GPU) string {
	if !g.ProcsKnown {
		return "?"
	}
	if len(g.Procs) == 0 {
		return "0"
	}
	seen := map[string]bool{}
	var users []string
	for _, p := range g.Procs {
		u := p.User
		if u == "" {
			u = "?"
		}
		if !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	sort.Strings(users)
	return fmt.Sprintf("%d (%s)", len(g.Procs), strings.Join(users, ", "))
}
