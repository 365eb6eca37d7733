package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

type waitOptions struct {
	names    []string // the jobs as given: ids, array ids, ARRAY_TASK
	interval time.Duration
	quiet    bool
}

// jobStatusExit is the exit line of the job's status that gssh wait
// passes through (see jobExit).
var jobStatusExit = exitLine{exitJob, fmt.Sprintf(`the first job's (in the order given) that did not succeed: its exit
status, %d + N for a job signal N killed, %d for one stopped at its
walltime, %d for one cancelled, lost or never started`, jobExitSignal, jobExitTimeout, jobExitFailed)}

func newWaitCmd(a *app, runF func(*waitOptions) error) *cobra.Command {
	opts := &waitOptions{}
	cmd := &cobra.Command{
		Use:   "wait ID...",
		Short: "Wait for jobs to end; exit with the first failed job's exit status",
		Long: `Wait until every job given has ended, and exit with the status of the
first that did not succeed, so a script goes on only when its jobs did.
Meanwhile it runs a scheduling pass every --interval, so jobs start and
their ends are recorded without cron, and prints each job's end on stderr.`,
		Example: `  gssh wait 7 8 && ./publish.sh
  id=$(gssh submit --json -- python prep.py | jq .id) && gssh wait $id`,
		Annotations: exits(exitLine{exitOK, "every job succeeded"}, jobStatusExit,
			exitLine{exitGssh, "gssh itself failed (the state unreadable, no such job, a bad flag)"},
			exitLine{exitSignal, "interrupted (Ctrl-C): the jobs go on"},
			exitLine{exitTerm, "terminated (SIGTERM): the jobs go on"}),
		Args: needIDs("wait for"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--interval", opts.interval, time.Second, time.Hour); err != nil {
				return err
			}
			if _, err := service.ParseRefs(args); err != nil {
				return err
			}
			opts.names = args
			if runF != nil {
				return runF(opts)
			}
			return waitRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.interval, "interval", 5*time.Second, "time between scheduling passes while waiting")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "print nothing but errors")
	return cmd
}

// waitRun waits for the jobs of opts.names to end; see newWaitCmd.
func waitRun(ctx context.Context, a *app, opts *waitOptions) error {
	ids, err := a.service().Resolve(ctx, opts.names)
	if err != nil {
		return err
	}
	jobs, err := waitFor(ctx, a, ids, opts.interval, func(j job.Job) {
		if !opts.quiet {
			fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", j.Ref(), j.State, j.Reason)
		}
	})
	if err != nil {
		return err
	}
	return jobsStatus(jobs)
}

// waitFor waits until every job of ids has ended, running a pass every
// interval, and returns them in the order given; ended is called once
// for each as it is seen to end. Its errors are gssh's own, exit 255
// (130 for Ctrl-C; see exitStatus).
func waitFor(ctx context.Context, a *app, ids []job.ID, interval time.Duration, ended func(job.Job)) ([]job.Job, error) {
	out := make([]job.Job, len(ids))
	done := make([]bool, len(ids))
	for first := true; ; first = false {
		if !first {
			a.tryPass(ctx)
		}
		left := 0
		for i, id := range ids {
			if done[i] {
				continue
			}
			j, err := a.service().Job(ctx, id)
			switch {
			case ctx.Err() != nil:
				return nil, errInterrupted
			case err != nil:
				return nil, fmt.Errorf("job %d: %w", id, err)
			}
			out[i] = j
			if j.State.Terminal() {
				done[i] = true
				ended(j)
				continue
			}
			if first && j.Hold != nil {
				fmt.Fprintf(a.stderr, "gssh: job %s is held: it waits for gssh release %s\n", j.Ref(), j.Ref())
			}
			left++
		}
		if left == 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, errInterrupted
		case <-time.After(interval):
		}
	}
}
