package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

type logsOptions struct {
	id      job.ID
	follow  bool
	tail    int
	attempt int // 0: the latest attempt that ran
}

func newLogsCmd(a *app, runF func(*logsOptions) error) *cobra.Command {
	opts := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs ID [--attempt N]",
		Short: "Print a job's output (stdout and stderr); -f follows it until the job ends",
		Long: `Print a job's output (stdout and stderr together) from its worker. -f
follows it until the job ends, then says on stderr how it ended and exits
with the job's status, as gssh wait does; a queued job is waited for. Each
attempt of a job has its own log: --attempt N prints attempt N's (gssh show
lists them); without it, the latest attempt that ran. The log is removed
with the job's directory keep_job_dirs (14 days) after the job ended; gssh
logs then says so.`,
		Example: `  gssh logs 7
  gssh logs -f 7
  gssh logs --attempt 1 7
  gssh logs --tail 50 12_3`,
		Annotations: exits(usageExit, jobHostExit, stateExit, signalExit, termExit,
			passedJobExit("with -f"), passedGsshExit("with -f")),
		Args: oneJobID,
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.oneJob(c.Context(), args[0], runF != nil)
			if err != nil {
				return err
			}
			if opts.tail < -1 {
				return fmt.Errorf("--tail %d: give a number of lines, or -1 for all", opts.tail)
			}
			switch {
			case opts.attempt < 0 || c.Flags().Changed("attempt") && opts.attempt == 0:
				return fmt.Errorf("--attempt %d: give an attempt's number, 1 or more (gssh show %d lists them)", opts.attempt, id)
			case opts.attempt > 0 && opts.follow:
				return fmt.Errorf("--attempt goes without -f: -f follows the job's current attempt")
			}
			opts.id = id
			if runF != nil {
				return runF(opts)
			}
			return logsRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "keep printing output until the job ends")
	cmd.Flags().IntVar(&opts.tail, "tail", -1, "print only the last N lines first (-1: all)")
	cmd.Flags().IntVar(&opts.attempt, "attempt", 0, "print launch attempt N's log (default: the latest that ran)")
	return cmd
}

func logsRun(ctx context.Context, a *app, opts *logsOptions) error {
	if !opts.follow {
		_, err := a.service().Logs(ctx, service.LogsRequest{ID: opts.id, Tail: opts.tail, Attempt: opts.attempt}, a.stdout)
		return interrupted(ctx, err)
	}
	// -f: wait for a queued job to start (running the passes that start
	// it), follow its log, and pass its exit status through, as gssh wait
	// does; a job requeued meanwhile is followed into its next attempt.
	tail := opts.tail
	for {
		if err := a.waitStart(ctx, opts.id); err != nil {
			return err
		}
		j, err := a.service().Job(ctx, opts.id)
		if err != nil {
			return err
		}
		if j.State.Terminal() && j.Placement.Host == "" { // ended before it started: no log
			fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", j.Ref(), j.State, j.Reason)
			return jobsStatus([]job.Job{j})
		}
		res, err := a.service().Logs(ctx, service.LogsRequest{ID: opts.id, Tail: tail, Follow: true}, a.stdout)
		if err != nil {
			return interrupted(ctx, err)
		}
		now, err := a.service().Job(ctx, opts.id)
		if err != nil {
			return err
		}
		if now.Attempt != res.Job.Attempt || now.State == job.Queued {
			fmt.Fprintf(a.stderr, "gssh: job %s was requeued; following its next attempt\n", now.Ref())
			tail = -1 // all of the next attempt's log
			continue
		}
		end := res.Job
		switch s := res.Ended; {
		case s != nil:
			fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", res.Job.Ref(), s.State, s.Reason)
			end.State, end.ExitCode, end.Signal = s.State, s.ExitCode, s.Signal
		case end.State.Terminal():
			// It had ended, and a pass recorded it, before the log was read.
			fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", end.Ref(), end.State, end.Reason)
		}
		if !end.State.Terminal() {
			return nil
		}
		return jobsStatus([]job.Job{end})
	}
}

// waitStart waits while job id is queued, running a pass every 2 s, and
// says so once on stderr.
func (a *app) waitStart(ctx context.Context, id job.ID) error {
	for said := false; ; said = true {
		j, err := a.service().Job(ctx, id)
		if err != nil {
			return err
		}
		if j.State != job.Queued {
			return nil
		}
		if !said {
			fmt.Fprintf(a.stderr, "gssh: job %s is %s (%s); waiting for it to start\n", j.Ref(), stateWord(j), j.Reason)
		} else if _, err := a.service().Schedule(ctx, service.ScheduleRequest{}); err != nil && !errors.Is(err, service.ErrPassBusy) && ctx.Err() == nil {
			fmt.Fprintf(a.stderr, "gssh: warning: a scheduling pass could not run: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(2 * time.Second):
		}
	}
}
