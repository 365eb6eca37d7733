package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

type reapOptions struct {
	hosts  []string
	dryRun bool
	json   bool
}

func newReapCmd(a *app, runF func(*reapOptions) error) *cobra.Command {
	opts := &reapOptions{}
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Kill GPU processes of ended gssh jobs (orphans); show everyone else's",
		Long: `Probe the hosts and tell whose each GPU process is. Orphans (processes of
a gssh job that ended, or of an earlier attempt) get SIGTERM, then SIGKILL
after 2 s; foreign ones (no gssh job's) are only reported, unless the host
says reap_foreign: kill; unattributed ones (environment unreadable) are
never killed. Every pass that probes does the same. More:
docs/failure-modes.md.`,
		Example: `  gssh reap --dry-run
  gssh reap --host gpu01 --host gpu02
  gssh reap --json`,
		Annotations: exits(usageExit, hostsExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkHostFlag(c, opts.hosts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return reapRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.hosts, "host", nil, "only these hosts (repeat or comma-separate)")
	fl.BoolVar(&opts.dryRun, "dry-run", false, "say what would be killed; kill nothing")
	fl.BoolVar(&opts.json, "json", false, `print JSON (schema "gssh.reap/v1") instead of a table`)
	return cmd
}

var reapHeader = []string{"HOST", "GPU", "PID", "USER", "MEMORY", "COMMAND", "FOUND", "DONE"}

func reapRun(ctx context.Context, a *app, opts *reapOptions) error {
	doc, err := a.service().Reap(ctx, service.ReapRequest{Hosts: opts.hosts, DryRun: opts.dryRun})
	var pe *service.PartialError
	damaged := errors.Is(err, state.ErrDamaged) && len(doc.Hosts) > 0 // shown, then exit 3
	if err != nil && !errors.As(err, &pe) && !damaged {
		return interrupted(ctx, err)
	}
	if opts.json {
		if jerr := a.printJSON(doc); jerr != nil {
			return jerr
		}
		return err
	}
	rows := reapRows(doc)
	if len(rows) > 0 {
		if terr := printTable(a.stdout, a.tty, reapHeader, rows); terr != nil {
			return terr
		}
	}
	fmt.Fprintln(a.stdout, reapSummary(doc))
	if doc.JobsError != "" && !damaged {
		a.warnf("processes were matched to no job where the state file could not be read: " + doc.JobsError)
	}
	return err
}

// reapRows are the rows of gssh reap: each GPU process that is no running
// gssh job's (what it is, what was done), the invisible memory, and each
// host that could not be probed or reaped.
func reapRows(doc service.ReapDoc) [][]string {
	var rows [][]string
	for _, h := range doc.Hosts {
		if h.Error != "" && len(h.Processes) == 0 {
			rows = append(rows, []string{h.Name, "-", "-", "-", "-", "-", string(h.State) + ": " + oneLine(h.Error), "not reaped"})
			continue
		}
		for _, p := range h.Processes {
			if p.Kind == reap.KindJob {
				continue
			}
			found := string(p.Kind) + ": " + p.Why
			if p.Kind == reap.KindOtherQueue {
				found = p.Why
			}
			rows = append(rows, []string{h.Name, strconv.Itoa(p.GPU), strconv.Itoa(p.PID), cmp.Or(printable(p.User), "?"), size(p.UsedBytes),
				cmp.Or(printable(p.Name), "?"), printable(found), p.Action})
		}
		for _, v := range h.Invisible {
			rows = append(rows, []string{h.Name, strconv.Itoa(v.GPU), "-", "-", units.FormatMem(v.Bytes), "-",
				"memory held by an invisible process (in use, but no process visible: a container or another PID namespace?)", "counted as used, never offered as free"})
		}
	}
	return rows
}

// reapSummary is the last line: what was found and done, in counts.
func reapSummary(doc service.ReapDoc) string {
	var orphans, foreign, unattributed, jobs, invisible, probed, done, fdone int
	for _, h := range doc.Hosts {
		if h.State == "ok" || h.State == "degraded" || h.State == "no devices" {
			probed++
		}
		invisible += len(h.Invisible)
		for _, p := range h.Processes {
			hit := p.Outcome == reap.Terminated || p.Outcome == reap.Killed || p.Action == "would kill"
			switch p.Kind {
			case reap.KindJob:
				jobs++
			case reap.KindOrphan:
				orphans++
				if hit {
					done++
				}
			case reap.KindForeign:
				foreign++
				if hit {
					fdone++
				}
			case reap.KindUnattributed:
				unattributed++
			}
		}
	}
	verb := "killed"
	if doc.DryRun {
		verb = "would be killed"
	}
	return fmt.Sprintf("%d of %d hosts probed: %s (%d %s), %s (%d %s), %d unattributed (never killed), %d in running gssh jobs (left alone), invisible memory on %s",
		probed, len(doc.Hosts), count(orphans, "orphan", "orphans"), done, verb, count(foreign, "foreign process", "foreign processes"), fdone, verb,
		unattributed, jobs, count(invisible, "GPU", "GPUs"))
}

// count is "1 orphan", "2 orphans".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
