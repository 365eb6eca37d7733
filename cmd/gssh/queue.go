package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

// exitGssh is the exit status of the commands that pass a job's exit
// status through (wait, submit --wait) when gssh itself failed: 255, as
// ssh exits when it, not the remote command, failed.
const exitGssh = 255

// passThroughHelp is the exit statuses of gssh wait.
const passThroughHelp = `  the first job's (in the order given) that did not succeed: its exit
  status, 128 + N for a job signal N killed, 124 for one stopped at its
  walltime, 1 for one cancelled, lost or never started; 0 when all succeeded
  255  gssh itself failed (the state unreadable, no such job, a bad flag)
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM); the jobs go on`

// needIDs refuses a command line without job ids, saying what they are
// for.
func needIDs(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("give the ids of the jobs to %s (gssh ps lists them)", what)
		}
		return nil
	}
}

func newHoldCmd(a *app, release bool) *cobra.Command {
	use, short, long := "hold ID...", "Keep queued jobs from starting until gssh release",
		`Hold queued jobs: they stay in the queue, in their place, but are never
placed until released (gssh release). gssh ps shows them as held, with who
held them. A running job cannot be held (gssh cancel stops it). An
array's id holds every queued task of it (the others are skipped, and
counted); 12_3 holds one task. A job named in the wrong state is an error
(exit 1); the others given are still held.`
	example := "  gssh hold 7 8\n  gssh hold 12_3"
	if release {
		example = "  gssh release 7 8\n  gssh release 12      # every held task of array 12"
		use, short, long = "release ID...", "Release held jobs, then run one scheduling pass",
			`Take the holds off jobs (gssh hold, gssh submit --hold), then run one
scheduling pass, so that they start at once where there is room. Their
dependencies (--after) and --begin still apply. A job that is not held is
an error (exit 1; the others given are still released); an array's id
releases its held tasks, 12_3 one task.`
	}
	return &cobra.Command{
		Use:         use,
		Short:       short,
		Long:        long,
		Example:     example,
		Annotations: exits(exitLineUsage, exitLineState),
		Args:        needIDs(strings.Fields(use)[0]),
		RunE: func(c *cobra.Command, args []string) error {
			ids, arrays, err := a.resolve(c.Context(), args)
			if err != nil {
				return err
			}
			do := a.service().Hold
			if release {
				do = a.service().Release
			}
			res, err := do(c.Context(), ids)
			if err != nil {
				return interrupted(c.Context(), err)
			}
			return a.printHolds(res, arrays, func(j job.Job) string {
				switch {
				case release && j.State == job.Running:
					return fmt.Sprintf("job %s released, running on %s", j.Ref(), where(j.Placement))
				case release:
					return fmt.Sprintf("job %s released: %s: %s", j.Ref(), stateWord(j), j.Reason)
				}
				return fmt.Sprintf("job %s held", j.Ref())
			})
		},
	}
}

// exitCodeHold is 1 for a job in the wrong state or missing, else the
// usual mapping.
func exitCodeHold(err error) int {
	if errors.Is(err, state.ErrNotFound) {
		return exitUsage
	}
	return max(exitCode(err), exitUsage)
}

type waitOptions struct {
	ids      []job.ID
	interval time.Duration
	quiet    bool
}

func newWaitCmd(a *app) *cobra.Command {
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
		Annotations: exitsText(passThroughHelp),
		Args:        needIDs("wait for"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--interval", opts.interval, time.Second, time.Hour); err != nil {
				return &reported{err: err, code: exitGssh, print: true}
			}
			ids, err := a.service().Resolve(c.Context(), args)
			if err != nil {
				return &reported{err: err, code: exitGssh, print: true}
			}
			opts.ids = ids
			return waitRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.interval, "interval", 5*time.Second, "time between scheduling passes while waiting")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "print nothing but errors")
	return cmd
}

// waitRun waits for opts.ids to end; see newWaitCmd.
func waitRun(ctx context.Context, a *app, opts *waitOptions) error {
	jobs, err := waitFor(ctx, a, opts.ids, opts.interval, func(j job.Job) {
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
// (130 for Ctrl-C).
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
				return nil, &reported{err: fmt.Errorf("job %d: %w", id, err), code: exitGssh, print: true}
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

// jobsStatus is the exit status of ended jobs: the first one's that did
// not succeed (see passThroughHelp), as a reported error; nil when all
// succeeded.
func jobsStatus(jobs []job.Job) error {
	for _, j := range jobs {
		if code := jobExit(j); code != 0 {
			return &reported{err: fmt.Errorf("job %s %s: %s", j.Ref(), j.State, j.Reason), code: code}
		}
	}
	return nil
}

// jobExit is the exit status an ended job passes through: its own, 128 +
// its signal's number, 124 at its walltime (as timeout(1) exits), else 1.
func jobExit(j job.Job) int {
	switch {
	case j.State == job.Succeeded:
		return 0
	case j.Signal != "":
		if n := signalNumber(j.Signal); n > 0 {
			return 128 + n
		}
	case j.ExitCode != nil && *j.ExitCode > 0 && *j.ExitCode < 256:
		return *j.ExitCode
	case j.State == job.Timeout:
		return 124
	}
	return 1
}

// signalNumber is the number of the signal named like "TERM" (as
// sshexec.SignalName gives it) or "SIGKILL", or given as a number; 0 when
// unknown.
func signalNumber(name string) int {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 128 {
		return n
	}
	return int(unix.SignalNum("SIG" + strings.TrimPrefix(strings.ToUpper(name), "SIG")))
}

type updateOptions struct {
	priority      int
	timeout, mem  string
	cpus, hostMem string
	name          string
	logLimit      string
}

func newUpdateCmd(a *app) *cobra.Command {
	opts := &updateOptions{}
	cmd := &cobra.Command{
		Use:   "update ID... [flags]",
		Short: "Change queued jobs: priority, walltime, memory, CPUs, name (scontrol update)",
		Long: `Change queued jobs, as scontrol update does, then run one scheduling pass
(a job may start at once). An array's id changes every task. Running and
ended jobs cannot be changed; a --mem, --cpus or --host-mem no host could
ever give is refused, as at submit.`,
		Example: `  gssh update 7 --priority 3
  gssh update 12 --timeout 4:00:00 --mem 16G`,
		Annotations: exits(exitLineUsage, exitLineState),
		Args:        needIDs("update"),
		RunE: func(c *cobra.Command, args []string) error {
			fl := c.Flags()
			r := service.UpdateRequest{}
			if fl.Changed("priority") {
				r.Priority = &opts.priority
			}
			if fl.Changed("timeout") {
				d, err := units.ParseWalltime(opts.timeout)
				if err != nil {
					return fmt.Errorf("--timeout: %w", err)
				}
				r.Timeout = &d
			}
			if fl.Changed("mem") {
				m, err := memFlag("--mem", opts.mem, a.warnf)
				if err != nil {
					return err
				}
				r.Mem = &m
			}
			if fl.Changed("name") {
				r.Name = &opts.name
			}
			if fl.Changed("cpus") {
				n, err := cpusFlag(opts.cpus)
				if err != nil {
					return err
				}
				r.CPUs = &n
			}
			if fl.Changed("host-mem") {
				m, err := memFlag("--host-mem", opts.hostMem, a.warnf)
				if err != nil {
					return err
				}
				r.HostMem = &m
			}
			if fl.Changed("log-limit") {
				n, err := logLimitFlag(opts.logLimit)
				if err != nil {
					return err
				}
				if n == 0 {
					return errors.New("--log-limit is empty: give the log's cap, such as 1G")
				}
				r.LogLimit = &n
			}
			if r.Priority == nil && r.Timeout == nil && r.Mem == nil && r.Name == nil && r.CPUs == nil && r.HostMem == nil && r.LogLimit == nil {
				return errors.New("nothing to update: give --priority, --timeout, --mem, --cpus, --host-mem, --log-limit or --name")
			}
			ids, arrays, err := a.resolve(c.Context(), args)
			if err != nil {
				return err
			}
			r.IDs = ids
			res, err := a.service().Update(c.Context(), r)
			if err != nil {
				return interrupted(c.Context(), err)
			}
			return a.printHolds(res, arrays, func(j job.Job) string {
				if j.State == job.Running {
					return fmt.Sprintf("job %s updated, running on %s", j.Ref(), where(j.Placement))
				}
				return fmt.Sprintf("job %s updated: %s: %s", j.Ref(), stateWord(j), j.Reason)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.priority, "priority", 0, "the new priority: 0 (first) to 10 (last); 0-3 are admin bands (see gssh submit --help)")
	fl.StringVar(&opts.timeout, "timeout", "", "walltime: 90m, 2h, or [D-]HH:MM:SS")
	fl.StringVar(&opts.mem, "mem", "", "GPU memory per GPU, such as 8G")
	fl.StringVar(&opts.name, "name", "", "job name")
	fl.StringVar(&opts.cpus, "cpus", "", "host CPUs to book (Slurm's --cpus-per-task)")
	fl.StringVar(&opts.hostMem, "host-mem", "", "host memory to book, such as 64G (Slurm's --mem)")
	fl.StringVar(&opts.logLimit, "log-limit", "", "cap the job's log at this size, such as 1G")
	return cmd
}

// resolve turns job names into ids, and says which came from naming a
// whole array: a task of one that is in no state for the command is
// skipped, as Slurm skips them, not an error.
func (a *app) resolve(ctx context.Context, names []string) ([]job.ID, map[job.ID]bool, error) {
	refs, err := service.ParseRefs(names)
	if err != nil {
		return nil, nil, err
	}
	var ids []job.ID
	arrays := map[job.ID]bool{}
	for _, r := range refs {
		got, err := a.service().Resolve(ctx, []string{r.String()})
		if err != nil {
			return nil, nil, err
		}
		for _, id := range got {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			if len(got) > 1 {
				arrays[id] = true
			}
		}
	}
	return ids, arrays, nil
}

// skippable reports whether err only says a job is in no state for the
// command (ended, running, not held), which an array's task may be.
func skippable(err error) bool {
	return errors.Is(err, control.ErrNotQueued) || errors.Is(err, control.ErrNotHeld) || errors.Is(err, control.ErrNotRunning) || errors.Is(err, control.ErrEnded)
}

// printHolds prints what Hold, Release, Update or Requeue did, a line per
// job (line says it), errors on stderr; exit 1 if any job could not be
// done. A task of an array named whole (arrays) that is in no state for
// it is skipped, and counted in one line.
func (a *app) printHolds(res []service.HoldResult, arrays map[job.ID]bool, line func(job.Job) string) error {
	var errs []error
	code := exitOK
	skipped := 0
	defer func() {
		if skipped > 0 {
			fmt.Fprintf(a.stderr, "gssh: %d %s of the arrays given %s skipped: %s in no state for it (ended, running, or not held)\n",
				skipped, units.Plural(skipped, "task", "tasks"), units.Plural(skipped, "was", "were"), units.Plural(skipped, "it was", "they were"))
		}
	}()
	for _, r := range res {
		if r.Err != nil && arrays[r.Job.ID] && skippable(r.Err) {
			skipped++
			continue
		}
		if r.Err != nil {
			fmt.Fprintln(a.stderr, "gssh:", r.Err)
			errs = append(errs, r.Err)
			code = max(code, exitCodeHold(r.Err))
			continue
		}
		fmt.Fprintln(a.stdout, line(r.Job))
	}
	if len(errs) > 0 {
		return &reported{err: errors.Join(errs...), code: code}
	}
	return nil
}

func newRequeueCmd(a *app) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "requeue ID... [--grace 10s]",
		Short: "Stop running jobs and put them back in the queue, keeping their ids",
		Long: `Stop running jobs as gssh cancel does and put them back in the queue under
their ids, as scontrol requeue does; then run one pass, so a job may start
again at once, anywhere it fits, as a new attempt. The time it ran counts
in fair-share.`,
		Example: `  gssh requeue 7
  gssh requeue 7 8 --grace 2m`,
		Annotations: exits(exitLineUsage, exitLineJobHost, exitLineState),
		Args:        needIDs("requeue"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--grace", grace, 0, time.Hour); err != nil {
				return err
			}
			ids, arrays, err := a.resolve(c.Context(), args)
			if err != nil {
				return err
			}
			res, err := a.service().Requeue(c.Context(), ids, grace)
			if err != nil {
				return interrupted(c.Context(), err)
			}
			return a.printHolds(res, arrays, func(j job.Job) string {
				if j.State == job.Running {
					return fmt.Sprintf("job %s requeued, running on %s", j.Ref(), where(j.Placement))
				}
				return fmt.Sprintf("job %s requeued: %s: %s", j.Ref(), stateWord(j), j.Reason)
			})
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", service.DefaultGrace, "time between SIGTERM and SIGKILL")
	return cmd
}
