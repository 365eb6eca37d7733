package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/doctor"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

type doctorOptions struct {
	hosts []string
	json  bool
}

func newDoctorCmd(a *app, runF func(*doctorOptions) error) *cobra.Command {
	opts := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [HOST...]",
		Short: "Check each host for what keeps jobs from running there, and say what to do",
		Long: `Check every host (or those named): SSH (reachable, key, host key), what the
login prints besides a command's output, nvidia-smi (present, answering,
driver loaded and matching its library), the NVML helper (and that it sees
what nvidia-smi sees), the CUDA version the driver supports (which PyTorch
wheels work), persistence mode, the job and helper cache directories
(writable, free space), setsid, sudo -n on run_as: sudo hosts, the clock
against this one's, and GPU memory held by processes gssh did not start.
One line per check: HOST, CHECK, VERDICT (ok, warn, fail, skip, info), DETAIL, FIX.`,
		Example: `  gssh doctor
  gssh doctor gpu01 gpu02
  gssh doctor --json | jq '.checks[] | select(.verdict == "fail")'`,
		Annotations: exits(usageExit, exitLine{exitPartial, "some check failed (its line says what to do)"}, signalExit, termExit),
		RunE: func(c *cobra.Command, args []string) error {
			opts.hosts = args
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the checks as JSON (schema gssh.doctor/v1)")
	return cmd
}

// doctorRun is gssh doctor; see newDoctorCmd.
func doctorRun(ctx context.Context, a *app, opts *doctorOptions) error {
	doc, err := a.service().Doctor(ctx, service.HostQuery{Hosts: opts.hosts})
	if err != nil {
		return interrupted(ctx, err)
	}
	if opts.json {
		if err := a.printJSON(doc); err != nil {
			return err
		}
	} else {
		rows := make([][]string, len(doc.Checks))
		for i, c := range doc.Checks {
			rows[i] = []string{c.Host, c.Name, string(c.Verdict), printable(c.Detail), dash(c.Fix)}
		}
		if err := printTable(a.stdout, a.tty, []string{"HOST", "CHECK", "VERDICT", "DETAIL", "FIX"}, rows); err != nil {
			return err
		}
	}
	if doc.Failed == 0 {
		return nil
	}
	hosts := map[string]bool{}
	all := map[string]bool{}
	for _, c := range doc.Checks {
		all[c.Host] = true
		if c.Verdict == doctor.Fail {
			hosts[c.Host] = true
		}
	}
	if !opts.json {
		fmt.Fprintf(a.stderr, "gssh: %d %s failed on %d of %d %s\n", doc.Failed, units.Plural(doc.Failed, "check", "checks"), len(hosts), len(all), units.Plural(len(all), "host", "hosts"))
	}
	return &service.PartialError{Failed: len(hosts), Total: len(all)}
}
