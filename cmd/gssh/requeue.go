package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

type requeueOptions struct {
	names []string // the jobs as given: ids, array ids, ARRAY_TASK
	grace time.Duration
}

func newRequeueCmd(a *app, runF func(*requeueOptions) error) *cobra.Command {
	opts := &requeueOptions{}
	cmd := &cobra.Command{
		Use:   "requeue ID... [--grace 10s]",
		Short: "Stop running jobs and put them back in the queue, keeping their ids",
		Long: `Stop running jobs as gssh cancel does and put them back in the queue under
their ids, as scontrol requeue does; then run one pass, so a job may start
again at once, anywhere it fits, as a new attempt. The time it ran counts
in fair-share.`,
		Example: `  gssh requeue 7
  gssh requeue 7 8 --grace 2m`,
		Annotations: exits(usageExit, jobHostExit, stateExit, signalExit, termExit),
		Args:        needIDs("requeue"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--grace", opts.grace, 0, time.Hour); err != nil {
				return err
			}
			if _, err := service.ParseRefs(args); err != nil {
				return err // before anything is requeued
			}
			opts.names = args
			if runF != nil {
				return runF(opts)
			}
			return requeueRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.grace, "grace", service.DefaultGrace, "time between SIGTERM and SIGKILL")
	return cmd
}

// requeueRun is gssh requeue; see newRequeueCmd.
func requeueRun(ctx context.Context, a *app, opts *requeueOptions) error {
	ids, arrays, err := a.resolve(ctx, opts.names)
	if err != nil {
		return err
	}
	res, err := a.service().Requeue(ctx, ids, opts.grace)
	if err != nil {
		return interrupted(ctx, err)
	}
	return a.printHolds(res, arrays, func(j job.Job) string {
		if j.State == job.Running {
			return fmt.Sprintf("job %s requeued, running on %s", j.Ref(), where(j.Placement))
		}
		return fmt.Sprintf("job %s requeued: %s: %s", j.Ref(), stateWord(j), j.Reason)
	})
}
