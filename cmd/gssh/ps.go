package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

type psOptions struct {
	all, json bool
	user      string
	since     string // --since: an age or a date
}

func newPsCmd(a *app, runF func(*psOptions) error) *cobra.Command {
	opts := &psOptions{}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List jobs: queued, launching and running (-a: all)",
		Long: `List jobs, oldest first: ID, USER, STATE, PRIORITY, HOST:GPUS, MEM ("excl":
whole GPUs), AGE (queued) or RUNTIME, REASON (why a queued job waits, as a
code: gssh show ID says it in words), NAME and command. It reads the state
file only (a pass changes what it shows) and never creates it. -a adds the
jobs that ended; --since 30d the jobs active since then.`,
		Example: `  gssh ps
  gssh ps --user ann
  gssh ps --since 7d --json | jq '.jobs[] | {id, state}'`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("since") {
				if _, err := sinceFlag(opts.since, a.now()); err != nil { // before anything is read
					return err
				}
				opts.all = true
			}
			if runF != nil {
				return runF(opts)
			}
			return psRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.all, "all", "a", false, "include ended jobs")
	cmd.Flags().StringVar(&opts.since, "since", "", "only jobs active since then (ended since, or not ended; implies -a): 30d, 2w, 12h, 2026-12-24")
	cmd.Flags().StringVar(&opts.user, "user", "", "only this user's jobs")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

// sinceFlag reads gssh ps --since as gssh events reads its own (a time
// ago, a date, a local or RFC 3339 time; not empty, not one to come).
func sinceFlag(s string, now time.Time) (time.Time, error) {
	t, err := eventlog.ParseSince(s, now)
	if err != nil {
		return t, fmt.Errorf("--since %w", err)
	}
	return t, nil
}

func psRun(ctx context.Context, a *app, opts *psOptions) error {
	q := service.JobQuery{All: opts.all, User: opts.user}
	if opts.since != "" {
		since, err := sinceFlag(opts.since, a.now())
		if err != nil {
			return err
		}
		q.Since = since
	}
	doc, err := a.service().Jobs(ctx, q)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return err
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "gssh: warning:", err) // the others are listed
	}
	if opts.json {
		return a.printJSON(doc)
	}
	now := a.now()
	var rows [][]string
	for i := 0; i < len(doc.Jobs); i++ {
		j := doc.Jobs[i]
		id := j.Ref()
		if t := j.Spec.Array; t != nil {
			// The queued tasks of an array that wait alike are one line,
			// as squeue folds them: 12[3-31].
			k := i
			for k+1 < len(doc.Jobs) && foldsWith(doc.Jobs[k+1], j) {
				k++
			}
			if k > i {
				idx := make([]int, 0, k-i+1)
				for _, f := range doc.Jobs[i : k+1] {
					idx = append(idx, f.Spec.Array.Task)
				}
				slices.Sort(idx)
				id = fmt.Sprintf("%d[%s]", t.Job, units.Ranges(idx, 2)) // as squeue writes them: 0-3,7,9-10
				i = k
			}
		}
		rows = append(rows, []string{id, j.User, stateWord(j), strconv.Itoa(j.Spec.Priority), where(j.Placement), memCell(j.Spec),
			age(j, now), reasonCell(j), jobName(j)})
	}
	return printTable(a.stdout, a.tty, []string{"ID", "USER", "STATE", "PRIORITY", "HOST:GPUS", "MEM", "AGE/RUNTIME", "REASON", "NAME/CMD"}, rows)
}

// foldsWith reports whether queued task next folds into the line of
// task j: the same array, both queued, alike held, for the same reason.
func foldsWith(next, j job.Job) bool {
	a, b := next.Spec.Array, j.Spec.Array
	return a != nil && b != nil && a.Job == b.Job && j.State == job.Queued && next.State == job.Queued &&
		(next.Hold == nil) == (j.Hold == nil) && next.ReasonCode == j.ReasonCode
}

// reasonCell is a queued job's pending reason code ("no_free_gpu",
// "reserved", "mem"; see gssh show for the words), "idle" for a running
// job gssh serve found idle, "-" otherwise.
func reasonCell(j job.Job) string {
	if u := j.GPUUse; u != nil && u.Idle && j.State == job.Running {
		return "idle" // its GPUs at 0 % for the policy's idle_after: gssh show says since when
	}
	if (j.State == job.Queued || j.State == job.Unknown || j.ReasonCode == "not_in_inventory" || j.ReasonCode == "gpu_failed") && j.ReasonCode != "" {
		return printable(j.ReasonCode)
	}
	return "-"
}
