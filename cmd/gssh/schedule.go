package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

type scheduleOptions struct {
	wait      time.Duration
	rebalance bool
	dryRun    bool
}

func newScheduleCmd(a *app, runF func(*scheduleOptions) error) *cobra.Command {
	opts := &scheduleOptions{}
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run one scheduling pass (for cron or a systemd timer)",
		Long: `Run one scheduling pass, for cron or a systemd timer: record the jobs
that ended, stop those past their walltime, start queued jobs where they
fit in the policy's order, and trim old records and job directories. It
prints only what changed, so a cron log stays short. --rebalance also
preempts --preemptible jobs for jobs ranked ahead (docs/scheduling.md).`,
		Example: `  gssh schedule
  gssh schedule --rebalance --dry-run
  * * * * * /opt/gssh/bin/gssh schedule >>~/.local/state/gssh/schedule.log 2>&1`,
		Annotations: exits(usageExit,
			exitLine{exitPartial, "a host with jobs to poll or launch, or a job, had a problem"},
			exitLine{exitState, stateExit.text + ";\nor another pass held the pass lock past --wait"}, signalExit, termExit),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkDuration("--wait", opts.wait, 0, 24*time.Hour); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return scheduleRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.wait, "wait", 30*time.Second, "how long to wait for another pass to finish")
	cmd.Flags().BoolVar(&opts.rebalance, "rebalance", false, "preempt --preemptible jobs for jobs ranked ahead of them, in this pass (policy rebalance: true does it in every pass)")
	cmd.Flags().BoolVar(&opts.dryRun, "dry-run", false, "with --rebalance: print what the pass would preempt and why, changing nothing")
	return cmd
}

func scheduleRun(ctx context.Context, a *app, opts *scheduleOptions) error {
	res, err := a.service().Schedule(ctx, service.ScheduleRequest{Wait: opts.wait, Rebalance: opts.rebalance, DryRun: opts.dryRun})
	if err != nil {
		return interrupted(ctx, err)
	}
	var b strings.Builder
	if opts.dryRun {
		for _, p := range res.Preempts {
			fmt.Fprintf(&b, "would preempt job %s on %s: %s\n", cmp.Or(p.Ref, strconv.FormatUint(uint64(p.Job), 10)), p.Host, p.Reason.Text)
		}
		if len(res.Preempts) == 0 {
			for _, h := range res.Holds {
				if h.Job != 0 {
					fmt.Fprintf(&b, "job %s waits: ", cmp.Or(h.Ref, strconv.FormatUint(uint64(h.Job), 10)))
				}
				fmt.Fprintln(&b, h.Text)
			}
			b.WriteString("nothing to preempt: no waiting job qualifies (see docs/scheduling.md, Rebalancing)\n")
		}
		_, err := io.WriteString(a.stdout, b.String())
		return err
	}
	b.WriteString(passText(res, true))
	if _, err := io.WriteString(a.stdout, b.String()); err != nil {
		return err
	}
	a.warn(res.Problems)
	return problems(res.Problems)
}

// passText is what gssh schedule prints of a pass: only what changed, so
// that a cron log stays short; hosts found still down too when stillDown
// (gssh serve, passing every few seconds, says so once, when they go down).
func passText(res service.PassResult, stillDown bool) string {
	var b strings.Builder
	for _, h := range res.Hosts {
		switch h.Change {
		case "up":
			fmt.Fprintf(&b, "host %s answers again\n", h.Host)
		case "still down":
			if !stillDown {
				continue
			}
			fallthrough
		default: // down
			fmt.Fprintf(&b, "host %s is down: %s; last error: %s\n", h.Host, h.Record.Summary(), oneLine(h.Record.LastError))
		}
	}
	for _, j := range res.Unknown {
		fmt.Fprintf(&b, "job %s unknown: %s\n", j.Ref(), j.Reason)
	}
	for _, j := range res.GPUFailed {
		fmt.Fprintf(&b, "job %s: %s\n", j.Ref(), j.Reason)
	}
	for _, s := range res.Strays {
		fmt.Fprintf(&b, "job %s: attempt %d on %s (%s) was still running there: killed\n", s.Job.Ref(), s.Job.Attempt, s.Job.Placement.Host, s.Why)
	}
	for _, j := range res.Preempted {
		fmt.Fprintf(&b, "job %s preempting: %s\n", j.Ref(), j.Reason)
	}
	for _, j := range res.Requeued {
		fmt.Fprintf(&b, "job %s requeued: %s\n", j.Ref(), j.Reason)
	}
	for _, j := range res.Finished {
		fmt.Fprintf(&b, "job %s %s: %s\n", j.Ref(), j.State, j.Reason)
	}
	for _, x := range res.Reaped { // the probe's safety net: orphans (foreign processes where reap_foreign: kill)
		fmt.Fprintf(&b, "%s GPU %d: pid %d (%s, %s, %s), %s: %s: %s\n", x.Host, x.GPU, x.PID, printable(x.Name), cmp.Or(printable(x.User), "?"),
			size(x.UsedBytes), x.Kind, printable(x.Why), x.Action)
	}
	for _, j := range res.Started {
		fmt.Fprintf(&b, "job %s running on %s\n", j.Ref(), where(j.Placement))
	}
	for _, j := range res.Pending { // only the reasons that changed: a cron log stays short
		fmt.Fprintf(&b, "job %s queued: %s\n", j.Ref(), j.Reason)
	}
	b.WriteString(housekeepingText(res.Housekeeping))
	return b.String()
}

// housekeepingText is what gssh schedule says of a pass's housekeeping,
// only when it removed or moved something: "housekeeping: 12 job records
// older than 90d moved to history; 5 job dirs older than 14d removed on
// a100 (1.2 GiB)", and one line per job whose directories it left.
func housekeepingText(hk control.Housekeeping) string {
	if !hk.Did() {
		return ""
	}
	var parts []string
	if hk.Moved > 0 {
		parts = append(parts, fmt.Sprintf("%d job %s older than %s moved to history", hk.Moved, units.Plural(hk.Moved, "record", "records"), units.FormatAge(hk.KeepJobs)))
	}
	for _, d := range hk.Dirs {
		parts = append(parts, fmt.Sprintf("%d job %s older than %s removed on %s (%s)", d.Removed, units.Plural(d.Removed, "dir", "dirs"), units.FormatAge(hk.KeepJobDirs), d.Host, bytesText(d.Bytes)))
	}
	if hk.Pruned > 0 {
		parts = append(parts, fmt.Sprintf("%d fair-share usage %s older than the policy counts pruned", hk.Pruned, units.Plural(hk.Pruned, "entry", "entries")))
	}
	var b strings.Builder
	if len(parts) > 0 {
		b.WriteString("housekeeping: " + strings.Join(parts, "; ") + "\n")
	}
	for _, j := range hk.Kept {
		fmt.Fprintf(&b, "housekeeping: job %s: job dirs left: %s\n", j.Ref(), printable(j.Housekept.Kept))
	}
	return b.String()
}

// problems is the end of a pass that ran with problems, printed already
// as warnings: a *passProblems (exit 2, or 3 when the state file failed).
func problems(ps []error) error {
	if len(ps) == 0 {
		return nil
	}
	return &passProblems{errs: ps}
}
