package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/units"

	"github.com/gssh/gssh/state"
)

type usageOptions struct {
	json bool
}

func newUsageCmd(a *app, runF func(*usageOptions) error) *cobra.Command {
	opts := &usageOptions{}
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show each user's fair-share usage and place in the queue's order",
		Long: `Show each user's fair-share standing, as Slurm's sshare does, first in the
queue's order first: WEIGHT, RUNNING jobs and GPUs, QUEUED jobs, GPU-HOURS
used, DECAYED (what the order weighs), SCORE (DECAYED / WEIGHT: lowest
first), FACTOR (the fair-share factor of the user's jobs' priority, from 1
for no usage down to 0), SHARE of everyone's usage, FAIR share by weight,
RANK, and CAPS when the policy sets any. It reads the state file and the policy; it probes no
host. More: docs/scheduling.md.`,
		Example: `  gssh usage
  gssh usage --json | jq '.users[] | {user, score}'`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return usageRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

func usageRun(ctx context.Context, a *app, opts *usageOptions) error {
	doc, err := a.service().Usage(ctx)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return err
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "gssh: warning:", err) // the others count
	}
	if opts.json {
		return a.printJSON(doc)
	}
	capped := false
	for _, u := range doc.Users {
		capped = capped || u.Caps != (sched.Caps{})
	}
	rows := make([][]string, len(doc.Users))
	for i, u := range doc.Users {
		rows[i] = []string{printable(u.User), num(u.Weight), fmt.Sprintf("%d (%s %s)", u.RunningJobs, num(u.RunningGPUs), gpusWord(u.RunningGPUs)),
			strconv.Itoa(u.Queued), hours(u.GPUHours), hours(u.Decayed), hours(u.Score), strconv.FormatFloat(u.Factor, 'f', 2, 64), pctOf(u.Share), pctOf(u.Fair), strconv.Itoa(u.Rank)}
		if capped {
			rows[i] = append(rows[i], capsCell(u.Caps))
		}
	}
	period := units.FormatAge(time.Duration(doc.PeriodS * float64(time.Second)))
	head := []string{"USER", "WEIGHT", "RUNNING", "QUEUED", "GPU-HOURS (" + period + ")", "DECAYED", "SCORE", "FACTOR", "SHARE", "FAIR", "RANK"}
	if capped {
		head = append(head, "CAPS")
	}
	return printTable(a.stdout, a.tty, head, rows)
}

// capsCell prints a user's caps as the inventory writes them: "max_gpus
// 4, max_jobs 2"; "-" for none.
func capsCell(c sched.Caps) string {
	var parts []string
	if c.MaxGPUs > 0 {
		parts = append(parts, "max_gpus "+strconv.Itoa(c.MaxGPUs))
	}
	if c.MaxJobs > 0 {
		parts = append(parts, "max_jobs "+strconv.Itoa(c.MaxJobs))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// num prints a weight or a GPU count to 3 significant digits: 2, 0.5,
// 1.25, 0.001.
func num(f float64) string { return strconv.FormatFloat(f, 'g', 3, 64) }

// hours prints GPU-hours as the queue's words do (sched.ScoreText).
func hours(h float64) string { return sched.ScoreText(h * 3600) }

func pctOf(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }

func gpusWord(n float64) string {
	if n == 1 {
		return "GPU"
	}
	return "GPUs"
}
