package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/fleet"
)

type hostsOptions struct {
	hosts  []string
	labels []string
	json   bool
}

func (a *app) newHostsCmd(runF func(*hostsOptions) error) *cobra.Command {
	opts := &hostsOptions{}
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Show each host: address, reachability, probe source, driver, GPU count, round trip",
		Long: `Connect to every host in parallel and show, per host: the address as
resolved through the inventory and ~/.ssh/config (with jump hosts), whether
it is reachable and if not why, which probe source answered, the driver
version, the GPU count, the SSH round-trip time and the connect time.

` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkHostFlag(c, opts.hosts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return a.hostsRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.hosts, "host", nil, "only these hosts (repeat or comma-separate)")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.BoolVar(&opts.json, "json", false, "print JSON instead of a table")
	return cmd
}

// hostDoc is one element of `gssh hosts --json`.
type hostDoc struct {
	Name      string   `json:"name"`
	Address   string   `json:"address"`
	Labels    []string `json:"labels"`
	Drain     bool     `json:"drain"`
	State     string   `json:"state"`
	Error     string   `json:"error,omitempty"`
	Source    string   `json:"source,omitempty"`
	SourceWhy string   `json:"source_reason,omitempty"`
	Driver    string   `json:"driver_version,omitempty"`
	GPUs      int      `json:"gpu_count"`
	RTTMS     float64  `json:"rtt_ms"`     // one SSH request round trip; 0 for local
	ConnectMS float64  `json:"connect_ms"` // TCP + SSH handshake + auth; 0 for local
}

func (a *app) hostsRun(ctx context.Context, opts *hostsOptions) error {
	f, err := a.loadFleet()
	if err != nil {
		return err
	}
	defer f.Remote.Close()
	hosts, err := f.Select(opts.hosts, opts.labels)
	if err != nil {
		return err
	}
	reports := f.Probe(ctx, hosts, fleet.ProbeOptions{Timeout: a.probeTimeout, Ping: true})
	if ctx.Err() != nil {
		return errInterrupted
	}
	docs := make([]hostDoc, len(reports))
	for i, r := range reports {
		s := r.Snapshot
		labels := r.Host.Labels
		if labels == nil {
			labels = []string{}
		}
		docs[i] = hostDoc{Name: r.Host.Name, Address: r.Address, Labels: labels, Drain: r.Host.Drain,
			State: string(s.State), Error: s.Error, Source: s.Source, SourceWhy: s.SourceWhy, Driver: s.Driver,
			GPUs: len(s.GPUs), RTTMS: ms(r.RTT), ConnectMS: ms(r.Connect)}
	}
	if opts.json {
		doc := struct {
			Schema string    `json:"schema"`
			Hosts  []hostDoc `json:"hosts"`
		}{"gssh.hosts/v1", docs}
		if err := a.printJSON(doc); err != nil {
			return err
		}
		return partial(reports)
	}
	rows := make([][]string, len(docs))
	for i, d := range docs {
		state := d.State
		if d.Error != "" {
			state += ": " + oneLine(d.Error)
		}
		src := orDash(d.Source)
		if d.SourceWhy != "" {
			src += " (" + d.SourceWhy + ")"
		}
		if d.Drain {
			state += " (drained)"
		}
		rows[i] = []string{d.Name, d.Address, state, src, orDash(d.Driver), fmt.Sprint(d.GPUs), dur(reports[i].RTT), dur(reports[i].Connect)}
	}
	printTable(a.stdout, a.tty, []string{"HOST", "ADDRESS", "STATE", "SOURCE", "DRIVER", "GPUS", "RTT", "CONNECT"}, rows)
	return partial(reports)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ms(d))
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
