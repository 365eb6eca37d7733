package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

type hostsOptions struct {
	hosts  []string
	labels []string
	json   bool
}

func newHostsCmd(a *app, runF func(*hostsOptions) error) *cobra.Command {
	opts := &hostsOptions{}
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Show each host: address, reachability, probe source, driver, GPU count, round trip",
		Long: `Connect to every host in parallel and show, per host: the address as
resolved through the inventory and ~/.ssh/config (with jump hosts), whether
it is reachable and if not why, which probe source answered, the driver
version (for an old driver also the facts its nvidia-smi cannot report:
"418.87.01 (old: no MIG mode)"), the GPU count, the SSH round-trip time
and the connect time.
A host drained (gssh drain, or drain: true in the inventory) shows
"(drained)" in STATE, one drained from a time to come "(draining at
08:00)", and a line under the table says by whom, since when and why.
PASSES is what the queue's scheduling passes found lately: - (never a
failure), ok (answering again after failures), N failed
contacts in a row, or down (3 failed contacts spanning the policy's
down_after: its jobs are unknown, and lost after lost_after); a line
under the table says since when, the last error, and how many attempts
of jobs given up there are to be killed when it answers again.

--json prints one document (schema "gssh.hosts/v1", see README).

` + exitCodesHelp,
		Args: cobra.NoArgs,
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
	rows := make([][]string, len(doc.Hosts))
	for i, d := range doc.Hosts {
		state := d.State
		if d.Error != "" {
			state += ": " + oneLine(d.Error)
		}
		src := cmp.Or(d.Source, "-")
		if d.SourceWhy != "" {
			src += " (" + d.SourceWhy + ")"
		}
		state += drainCell(d.DrainDoc, a.now())
		rows[i] = []string{d.Name, d.Address, state, src, driverCell(d), fmt.Sprint(d.GPUs), msCell(d.RTTMS), msCell(d.ConnectMS), failedCell(d.Record)}
	}
	if terr := printTable(a.stdout, a.tty, []string{"HOST", "ADDRESS", "STATE", "SOURCE", "DRIVER", "GPUS", "RTT", "CONNECT", "PASSES"}, rows); terr != nil {
		return terr
	}
	for _, d := range doc.Hosts {
		if r := d.Record; r != nil {
			fmt.Fprintf(a.stdout, "%s: %s\n", d.Name, recordText(*r))
		}
		if note := drainNote(d.Name, d.DrainDoc, a.now()); note != "" {
			fmt.Fprintln(a.stdout, note)
		}
	}
	return err
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

func msCell(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ms)
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
