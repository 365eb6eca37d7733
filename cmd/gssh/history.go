package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

type historyOptions struct {
	user, since string
	json        bool
}

func newHistoryCmd(a *app, runF func(*historyOptions) error) *cobra.Command {
	opts := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history [--user U] [--since 7d] [--json]",
		Short: "List ended jobs with what they asked for and what they used, like sacct",
		Long: `List the jobs that ended since --since (7 days), oldest first: ID, USER,
STATE, HOST:GPUS, MEM (asked per GPU; "excl": whole GPUs), PEAK (the most
GPU memory its processes used on one GPU, as gssh serve sampled it every
10 s; "-": never sampled), UTIL (its GPUs' mean utilization), GPU-HOURS,
WAIT (submitted to started), RUNTIME, NAME and command. gssh show ID says
what --mem would have done for a job that asked far more than it used.`,
		Example: `  gssh history
  gssh history --user ann --since 30d
  gssh history --json | jq '.jobs[] | {id, peak: .gpu_use.peak_memory_bytes}'`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if _, err := sinceFlag(opts.since, a.now()); err != nil { // before anything is read
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return historyRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().StringVar(&opts.user, "user", "", "only this user's jobs")
	cmd.Flags().StringVar(&opts.since, "since", "7d", "only jobs that ended since then: 30d, 2w, 12h, 2026-12-24")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema "+service.JobsSchema+", the ended jobs alone)")
	return cmd
}

// historyRun is gssh history; see newHistoryCmd.
func historyRun(ctx context.Context, a *app, opts *historyOptions) error {
	since, err := sinceFlag(opts.since, a.now())
	if err != nil {
		return err
	}
	doc, err := a.service().Jobs(ctx, service.JobQuery{All: true, User: opts.user, Since: since})
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return err
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "gssh: warning:", err) // the others are listed
	}
	ended := doc.Jobs[:0]
	for _, j := range doc.Jobs {
		if j.State.Terminal() && !j.EndedAt.Before(since) {
			ended = append(ended, j)
		}
	}
	doc.Jobs = ended
	if opts.json {
		return a.printJSON(doc)
	}
	rows := make([][]string, 0, len(doc.Jobs))
	for _, j := range doc.Jobs {
		peak, util := "-", "-"
		if u := j.GPUUse; u != nil {
			peak = units.FormatMem(u.PeakBytes)
			if u.UtilSamples > 0 {
				util = strconv.FormatFloat(u.UtilPct, 'f', 0, 64) + "%"
			}
		}
		wait, runtime := "-", "-"
		if first := firstStart(j); !first.IsZero() {
			wait = units.FormatDuration(first.Sub(j.SubmittedAt).Round(time.Second))
		}
		if !j.StartedAt.IsZero() && !j.EndedAt.IsZero() {
			runtime = units.FormatDuration(j.EndedAt.Sub(j.StartedAt).Round(time.Second))
		}
		rows = append(rows, []string{j.Ref(), j.User, string(j.State), where(j.Placement), memCell(j.Spec), peak, util,
			strconv.FormatFloat(eventlog.GPUHours(j), 'f', 2, 64), wait, runtime, jobName(j)})
	}
	return printTable(a.stdout, a.tty, []string{"ID", "USER", "STATE", "HOST:GPUS", "MEM", "PEAK", "UTIL", "GPU-HOURS", "WAIT", "RUNTIME", "NAME/CMD"}, rows)
}

// firstStart is when j first started: its first run's start when it was
// requeued after starting, else its start (zero: never started).
func firstStart(j job.Job) time.Time {
	if len(j.Runs) > 0 {
		return j.Runs[0].Started
	}
	return j.StartedAt
}
