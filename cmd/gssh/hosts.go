package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

type hostsOptions struct {
	hosts   []string
	labels  []string
	json    bool
	verbose bool // -v: on a terminal too, the table of whole cells
}

func newHostsCmd(a *app, runF func(*hostsOptions) error) *cobra.Command {
	opts := &hostsOptions{}
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Show each host: address, reachable or why not, probe source, driver, GPUs",
		Long: `Connect to every host in parallel and show, per host: the address as
resolved through the inventory and ~/.ssh/config, whether it is reachable,
the probe source, the driver, the GPU count, the SSH round trip, and what
the scheduling passes found lately (PASSES: -, ok, N failed, down). On a
terminal the table fits its width: errors, and why a host is probed
through nvidia-smi, are listed under it; -v puts every cell whole in the
table (and the connect time), as a pipe and --json (docs/json.md) get it.`,
		Example: `  gssh hosts
  gssh hosts -v --label a100
  gssh hosts --json | jq '.hosts[] | select(.state != "ok") | .name'`,
		Annotations: exits(usageExit, hostsExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkHostFlag(c, opts.hosts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return hostsRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.hosts, "host", nil, "only these hosts (repeat or comma-separate)")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.BoolVar(&opts.json, "json", false, "print JSON instead of a table")
	fl.BoolVarP(&opts.verbose, "verbose", "v", false, "on a terminal too, every cell whole and the CONNECT column, however wide")
	return cmd
}

func hostsRun(ctx context.Context, a *app, opts *hostsOptions) error {
	doc, err := a.service().Hosts(ctx, service.HostQuery{Hosts: opts.hosts, Labels: opts.labels})
	var pe *service.PartialError
	if err != nil && !errors.As(err, &pe) && !errors.Is(err, state.ErrDamaged) { // damaged: the table, then the error
		return interrupted(ctx, err)
	}
	if opts.json {
		if jerr := a.printJSON(doc); jerr != nil {
			return jerr
		}
		return err
	}
	var t hostsTable
	if a.tty && !opts.verbose {
		t = shortHostsTable(doc.Hosts, a.localUser(), a.now())
	} else {
		t = wholeHostsTable(doc.Hosts, a.now())
	}
	width := a.tableWidth()
	cut := a.tty && !opts.verbose && fitColumns(t.header, t.rows, t.cuttable, width)
	if terr := printTable(a.stdout, a.tty, t.header, t.rows); terr != nil {
		return terr
	}
	under := t.notes
	if cut {
		under = append(under, "(cells ending in … are cut to fit the terminal: gssh hosts -v prints them whole)")
	}
	for _, d := range doc.Hosts {
		if r := d.Record; r != nil {
			under = append(under, fmt.Sprintf("%s: %s", d.Name, recordText(*r)))
		}
		if note := drainNote(d.Name, d.DrainDoc, a.now()); note != "" {
			under = append(under, note)
		}
	}
	if a.tty {
		under = wrapLines(under, width)
	}
	for _, l := range under {
		fmt.Fprintln(a.stdout, l)
	}
	return err
}

// hostsTable is gssh hosts's table: its header, rows, the columns that
// may be cut to fit a terminal (fitColumns), and the lines printed under
// it.
type hostsTable struct {
	header   []string
	rows     [][]string
	cuttable []int
	notes    []string
}

// wholeHostsTable is the table with every cell whole: for a pipe (tab
// separated, for scripts) and for -v.
func wholeHostsTable(hosts []service.HostInfo, now time.Time) hostsTable {
	t := hostsTable{header: []string{"HOST", "ADDRESS", "STATE", "SOURCE", "DRIVER", "GPUS", "RTT", "CONNECT", "PASSES"}}
	for _, d := range hosts {
		state := d.State
		if d.Error != "" {
			state += ": " + oneLine(d.Error)
		}
		src := cmp.Or(d.Source, "-")
		if d.SourceWhy != "" {
			src += " (" + d.SourceWhy + ")"
		}
		state += drainCell(d.DrainDoc, now)
		t.rows = append(t.rows, []string{d.Name, d.Address, state, src, driverCell(d), fmt.Sprint(d.GPUs), msCell(d.RTTS), msCell(d.ConnectS), failedCell(d.Record)})
	}
	return t
}

// shortHostsTable is the table for a terminal, made to fit its width:
// the address without the login when it is user's own, the state without
// its error, the probe source with a footnote mark for why it is not the
// helper ("nvidia-smi[1]"), an old driver marked "(old)", no CONNECT
// column. Under it, each host's error and old driver's missing facts,
// then the footnotes, whole.
func shortHostsTable(hosts []service.HostInfo, user string, now time.Time) hostsTable {
	t := hostsTable{header: []string{"HOST", "ADDRESS", "STATE", "SOURCE", "DRIVER", "GPUS", "RTT", "PASSES"}, cuttable: []int{1, 2, 4, 7}}
	var why []string // footnotes, in order of first use
	var errs []string
	for _, d := range hosts {
		src := cmp.Or(d.Source, "-")
		if d.SourceWhy != "" {
			note := src + ", not gssh-helper: " + oneLine(d.SourceWhy)
			n := slices.Index(why, note)
			if n < 0 {
				why = append(why, note)
				n = len(why) - 1
			}
			src += fmt.Sprintf("[%d]", n+1)
		}
		driver := cmp.Or(d.Driver, "-")
		if len(d.MissingFields) > 0 {
			driver += " (old)"
			errs = append(errs, fmt.Sprintf("%s: old driver %s: nvidia-smi cannot report %s", d.Name, d.Driver, probe.MissingFacts(d.MissingFields)))
		}
		if d.Error != "" {
			errs = append(errs, fmt.Sprintf("%s: %s: %s", d.Name, d.State, oneLine(d.Error)))
		}
		t.rows = append(t.rows, []string{d.Name, strings.TrimPrefix(d.Address, user+"@"), d.State + drainCell(d.DrainDoc, now), src, driver, fmt.Sprint(d.GPUs), msCell(d.RTTS), failedCell(d.Record)})
	}
	t.notes = errs
	for i, w := range why {
		t.notes = append(t.notes, fmt.Sprintf("[%d] %s", i+1, w))
	}
	return t
}

// failedCell is the PASSES column: what the queue's passes found of the
// host lately ("-" when they never failed to reach it).
func failedCell(r *health.Host) string {
	switch {
	case r == nil:
		return "-"
	case r.Failures == 0 && !r.Down():
		return "ok"
	case r.Down():
		return fmt.Sprintf("down (%d failed)", r.Failures)
	}
	return fmt.Sprintf("%d failed", r.Failures)
}

// recordText says in words what the passes learned of a host.
func recordText(r health.Host) string {
	var parts []string
	if s := r.Summary(); s != "" {
		parts = append(parts, "passes: "+s)
	}
	if r.LastError != "" {
		parts = append(parts, fmt.Sprintf("last failed contact %s: %s", r.LastErrorAt.Local().Format("2006-01-02 15:04:05"), oneLine(r.LastError)))
	}
	for _, k := range slices.Sorted(maps.Keys(r.GPUs)) {
		parts = append(parts, r.GPUs[k].Text()+fmt.Sprintf(": no new jobs until it reads healthy in %d probes in a row", health.HealthyProbes))
	}
	if n := len(r.Strays); n > 0 {
		parts = append(parts, fmt.Sprintf("%d job attempt(s) given up there, to kill when it answers", n))
	}
	return strings.Join(parts, "; ")
}

// driverCell is the driver version, and for a driver whose nvidia-smi
// lacks query fields the facts it cannot give: "418.87.01 (old: no MIG
// mode)".
func driverCell(d service.HostInfo) string {
	cell := cmp.Or(d.Driver, "-")
	if len(d.MissingFields) > 0 {
		cell += " (old: no " + probe.MissingFacts(d.MissingFields) + ")"
	}
	return cell
}

// msCell is a time in seconds, in milliseconds ("-" for 0): a tenth
// below 10 ms ("0.4ms", "9.8ms"), whole ones above ("13ms", "161ms"), so
// that a slow host widens the column by a character at most (the table
// fits 100 columns with any round trip under 10 s).
func msCell(s float64) string {
	switch ms := s * 1000; {
	case s == 0:
		return "-"
	case ms < 9.95:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.0fms", ms)
	}
}

// checkHostFlag refuses `--host ”`, which pflag reads as no host at all and
// would otherwise select every host.
func checkHostFlag(c *cobra.Command, hosts []string) error {
	if !c.Flags().Changed("host") {
		return nil
	}
	if len(hosts) == 0 {
		return fmt.Errorf("--host was given an empty name; name a host of the inventory")
	}
	return nil
}
