package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
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
		Short: "Find and kill GPU processes of gssh jobs that have ended (orphans); show everyone else's",
		Long: `Probe every host (or the --host ones) and tell, for each GPU process, whose
it is. Orphans are processes of gssh jobs that have ended, or of an attempt
that is not the job's current one, matched on the GSSH_CLUSTER_ID,
GSSH_JOB_ID and GSSH_ATTEMPT in their environment (or on the job's
session): they get SIGTERM, then SIGKILL after 2 s. Before it signals a
process the worker checks that it is still the one the probe saw (same
pid, same start time, same marks), so a reused pid or the job's next
attempt is never touched.

Foreign processes (their environment names no gssh job: someone ran them
by hand) are reported, and killed only on hosts whose inventory entry
says reap_foreign: kill. A process whose environment cannot be read
(another user's, one in a container's PID namespace, and every process seen
through nvidia-smi, which shows no environment) is unattributed: it is
never killed, and the table says why. GPU memory in use that no visible
process accounts for is memory held by an invisible process: never free.

Every scheduling pass that probes does the same (gssh schedule prints what
it killed); gssh reap does it on demand. --dry-run says what it would kill
and kills nothing. A host that cannot be reached is a row with its reason;
the others are still reaped.

` + exitCodesHelp,
		Example: `  gssh reap --dry-run
  gssh reap --host gpu01 --host gpu02
  gssh reap --json`,
		Args: cobra.NoArgs,
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
	if err != nil && !errors.As(err, &pe) {
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
	if doc.JobsError != "" {
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
			rows = append(rows, []string{h.Name, strconv.Itoa(v.GPU), "-", "-", sched.FormatMem(v.Bytes), "-",
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
