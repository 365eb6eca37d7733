package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

type cancelOptions struct {
	names []string // as given: ids, array ids, ARRAY_TASK
	ids   []job.ID // resolved
	grace time.Duration
	// Selection instead of ids (scancel -u, -t).
	user     string
	mine     bool
	jobState string
	yes      bool
	force    bool
}

// jobStateOf reads --job-state: queued or running, or Slurm's names for
// them; "" for anything else.
func jobStateOf(s string) string {
	switch strings.ToLower(s) {
	case "queued", "pending", "pd":
		return "queued"
	case "running", "r":
		return "running"
	}
	return ""
}

// selecting reports whether the jobs are selected by user or state.
func (o *cancelOptions) selecting() bool { return o.user != "" || o.mine || o.jobState != "" }

func newCancelCmd(a *app, runF func(*cancelOptions) error) *cobra.Command {
	opts := &cancelOptions{}
	cmd := &cobra.Command{
		Use:   "cancel ID... | --user U | --mine | --job-state STATE",
		Short: "Cancel jobs: drop queued ones, stop running ones (SIGTERM, then SIGKILL)",
		Long: `Cancel jobs: a queued one is dropped; a running one's whole process tree
gets SIGTERM, then SIGKILL after --grace, and gssh cancel returns when it is
gone. Then one pass starts what waited for the GPUs freed. An array's id
cancels every task, 12_3 one. --user, --mine and --job-state select jobs
instead of ids (as scancel -u, -t); on a terminal it asks first for more
than 10. A job that had already ended keeps how it ended.`,
		Example: `  gssh cancel 7 8
  gssh cancel --mine --job-state queued
  gssh cancel --force 9      # its host is down`,
		Annotations: exits(usageExit, jobHostExit, stateExit, signalExit, termExit),
		Args: func(c *cobra.Command, args []string) error {
			sel := opts.user != "" || opts.mine || opts.jobState != ""
			switch {
			case len(args) == 0 && !sel:
				return errors.New("give the ids of the jobs to cancel (gssh ps lists them), or select them with --user, --mine or --job-state")
			case len(args) > 0 && sel:
				return errors.New("give job ids or --user/--mine/--job-state, not both")
			case opts.user != "" && opts.mine:
				return errors.New("--user and --mine: give one")
			case opts.jobState != "" && jobStateOf(opts.jobState) == "":
				return fmt.Errorf("--job-state %q: give queued or running (Slurm's PENDING, PD, RUNNING, R too; launching jobs count as running)", opts.jobState)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--grace", opts.grace, 0, time.Hour); err != nil {
				return err
			}
			if !opts.selecting() {
				if _, err := service.ParseRefs(args); err != nil {
					return err // before anything is cancelled
				}
			}
			opts.names = args
			if runF != nil {
				return runF(opts)
			}
			return cancelRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&opts.grace, "grace", service.DefaultGrace, "time between SIGTERM and SIGKILL")
	fl.StringVar(&opts.user, "user", "", "cancel every active job of this user")
	fl.BoolVar(&opts.mine, "mine", false, "cancel every active job of yours")
	fl.StringVar(&opts.jobState, "job-state", "", "cancel only jobs in this state: queued or running")
	fl.BoolVarP(&opts.yes, "yes", "y", false, "do not ask, even for more than 10 jobs on a terminal")
	fl.BoolVar(&opts.force, "force", false, "record the jobs cancelled without reaching their hosts (a host that is down or gone from the inventory); their processes may still run, and are killed if a pass reaches the host again")
	return cmd
}

// selectJobs resolves a cancel's --user/--mine/--job-state into job ids,
// says how many, and on a terminal asks when there are more than 10. ok
// is false when the answer was no (or there is nothing to cancel).
func (a *app) selectJobs(ctx context.Context, opts *cancelOptions) (ok bool, err error) {
	user := opts.user
	if opts.mine {
		user = a.localUser()
	}
	doc, err := a.service().Jobs(ctx, service.JobQuery{User: user})
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return false, err
	}
	opts.ids = nil
	want := jobStateOf(opts.jobState)
	for _, j := range doc.Jobs {
		switch {
		case want == "queued" && j.State != job.Queued, want == "running" && !j.State.Active():
			continue
		}
		opts.ids = append(opts.ids, j.ID)
	}
	kind, noun := "active", "jobs"
	if want != "" {
		kind = want
	}
	if len(opts.ids) == 1 {
		noun = "job"
	}
	what := kind + " " + noun
	if user != "" {
		what += " of " + user
	}
	if len(opts.ids) == 0 {
		fmt.Fprintf(a.stdout, "no %s jobs to cancel%s\n", kind, strings.TrimPrefix(what, kind+" "+noun))
		return false, nil
	}
	if len(opts.ids) > 10 && a.tty && !opts.yes {
		fmt.Fprintf(a.stdout, "cancel %d %s? [y/N] ", len(opts.ids), what)
		answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
		if yes := strings.ToLower(strings.TrimSpace(answer)); yes != "y" && yes != "yes" {
			fmt.Fprintln(a.stdout, "nothing cancelled")
			return false, nil
		}
	}
	fmt.Fprintf(a.stdout, "cancelling %d %s\n", len(opts.ids), what)
	return true, nil
}

func cancelRun(ctx context.Context, a *app, opts *cancelOptions) error {
	if opts.selecting() {
		ok, err := a.selectJobs(ctx, opts)
		if err != nil || !ok {
			return err
		}
	}
	var arrays map[job.ID]bool
	if opts.ids == nil {
		ids, inArrays, err := a.resolve(ctx, opts.names)
		if err != nil {
			return err // before anything is cancelled
		}
		opts.ids, arrays = ids, inArrays
	}
	skipped := 0
	var errs []error
	freed := false
	for _, id := range opts.ids {
		// One pass after the last: a pass after each would start the next
		// job given, only to cancel it.
		res, err := a.service().Cancel(ctx, service.CancelRequest{ID: id, Grace: opts.grace, NoPass: true, Force: opts.force})
		freed = freed || res.Freed
		j := res.Job
		name := strconv.FormatUint(uint64(id), 10)
		if j.ID == id {
			name = j.Ref()
		}
		switch {
		case err != nil && ctx.Err() != nil:
			fmt.Fprintf(a.stderr, "gssh: interrupted; job %s may still be running (see gssh show %s)\n", name, name)
			return errInterrupted
		case err != nil && arrays[id] && errors.Is(err, control.ErrEnded):
			skipped++ // a task of an array named whole that ended already
		case err != nil:
			fmt.Fprintln(a.stderr, "gssh:", err)
			errs = append(errs, err)
		case res.Recorded:
			fmt.Fprintf(a.stdout, "job %s: cancel recorded; the next pass stops it\n", name)
		case opts.force:
			fmt.Fprintf(a.stdout, "job %s cancelled (--force: %s)\n", name, j.Reason)
		case j.State != job.Cancelled:
			fmt.Fprintf(a.stdout, "job %s had already ended (%s: %s): nothing was cancelled\n", name, j.State, j.Reason)
		default:
			fmt.Fprintf(a.stdout, "job %s cancelled\n", name)
		}
	}
	if skipped > 0 {
		fmt.Fprintf(a.stdout, "%d %s of the arrays given had ended already\n", skipped, units.Plural(skipped, "task", "tasks"))
	}
	if freed && ctx.Err() == nil {
		// What waited for the freed GPUs starts now, not at the next cron
		// pass; a pass already running (the lock held) will see them.
		pass, err := a.service().Schedule(ctx, service.ScheduleRequest{Wait: service.DefaultPassWait})
		switch {
		case err == nil:
			for _, s := range pass.Started {
				fmt.Fprintf(a.stdout, "job %s running on %s\n", s.Ref(), where(s.Placement))
			}
			a.warn(pass.Problems)
		case !errors.Is(err, service.ErrPassBusy) && ctx.Err() == nil:
			fmt.Fprintf(a.stderr, "gssh: warning: the jobs are cancelled, but the pass after could not run: %v\n", err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &several{errs: errs}
}
