package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/service"
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
version, the GPU count, the SSH round-trip time and the connect time.

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
	if err != nil && !errors.As(err, &pe) {
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
		if d.Drain {
			state += " (drained)"
		}
		rows[i] = []string{d.Name, d.Address, state, src, cmp.Or(d.Driver, "-"), fmt.Sprint(d.GPUs), msCell(d.RTTMS), msCell(d.ConnectMS)}
	}
	if terr := printTable(a.stdout, a.tty, []string{"HOST", "ADDRESS", "STATE", "SOURCE", "DRIVER", "GPUS", "RTT", "CONNECT"}, rows); terr != nil {
		return terr
	}
	return err
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
