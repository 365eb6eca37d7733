package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

type holdOptions struct {
	names   []string // the jobs as given: ids, array ids, ARRAY_TASK
	release bool     // gssh release: take the holds off
}

func newHoldCmd(a *app, runF func(*holdOptions) error) *cobra.Command {
	return holdCmd(a, &holdOptions{}, runF, &cobra.Command{
		Use:   "hold ID...",
		Short: "Keep queued jobs from starting until gssh release",
		Long: `Hold queued jobs: they stay in the queue, in their place, but are never
placed until released (gssh release). gssh ps shows them as held, with who
held them. A running job cannot be held (gssh cancel stops it). An
array's id holds every queued task of it (the others are skipped, and
counted); 12_3 holds one task. A job named in the wrong state is an error
(exit 1); the others given are still held.`,
		Example:     "  gssh hold 7 8\n  gssh hold 12_3",
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        needIDs("hold"),
	})
}

func newReleaseCmd(a *app, runF func(*holdOptions) error) *cobra.Command {
	return holdCmd(a, &holdOptions{release: true}, runF, &cobra.Command{
		Use:   "release ID...",
		Short: "Release held jobs, then run one scheduling pass",
		Long: `Take the holds off jobs (gssh hold, gssh submit --hold), then run one
scheduling pass, so that they start at once where there is room. Their
dependencies (--after) and --begin still apply. A job that is not held is
an error (exit 1; the others given are still released); an array's id
releases its held tasks, 12_3 one task.`,
		Example:     "  gssh release 7 8\n  gssh release 12      # every held task of array 12",
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        needIDs("release"),
	})
}

// holdCmd is cmd (gssh hold or release) reading its job ids into opts.
func holdCmd(a *app, opts *holdOptions, runF func(*holdOptions) error, cmd *cobra.Command) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if _, err := service.ParseRefs(args); err != nil {
			return err // before anything is held
		}
		opts.names = args
		if runF != nil {
			return runF(opts)
		}
		return holdRun(c.Context(), a, opts)
	}
	return cmd
}

// holdRun is gssh hold and gssh release; see newHoldCmd, newReleaseCmd.
func holdRun(ctx context.Context, a *app, opts *holdOptions) error {
	ids, arrays, err := a.resolve(ctx, opts.names)
	if err != nil {
		return err
	}
	do := a.service().Hold
	if opts.release {
		do = a.service().Release
	}
	res, err := do(ctx, ids)
	if err != nil {
		return interrupted(ctx, err)
	}
	return a.printHolds(res, arrays, func(j job.Job) string {
		switch {
		case opts.release && j.State == job.Running:
			return fmt.Sprintf("job %s released, running on %s", j.Ref(), where(j.Placement))
		case opts.release:
			return fmt.Sprintf("job %s released: %s: %s", j.Ref(), stateWord(j), j.Reason)
		}
		return fmt.Sprintf("job %s held", j.Ref())
	})
}
