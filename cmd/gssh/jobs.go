package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

// oneJobID accepts exactly one argument, a job id, and says so otherwise.
func oneJobID(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("give one job id, e.g. gssh %s 12 (gssh ps lists them)", c.Name())
	}
	return nil
}

// oneJob is the job name names for show and logs: its id, or the task
// "12_3" names (looked up unless offline: a test of the flags alone). An
// array's id names its first task here.
func (a *app) oneJob(ctx context.Context, name string, offline bool) (job.ID, error) {
	refs, err := service.ParseRefs([]string{name})
	if err != nil {
		return 0, err
	}
	if refs[0].Task < 0 || offline {
		return refs[0].Job, nil
	}
	ids, err := a.service().Resolve(ctx, []string{name})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// parseID reads a job id argument.
func parseID(s string) (job.ID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a job id (a number, as gssh ps shows)", s)
	}
	return job.ID(n), nil
}

func memCell(s job.Spec) string {
	if s.MemPerGPU == 0 {
		return "excl"
	}
	return units.FormatMem(s.MemPerGPU)
}

// age is how long a queued job waits, or how long a job ran / has run.
func age(j job.Job, now time.Time) string {
	switch {
	case j.StartedAt.IsZero():
		return units.FormatElapsed(now.Sub(j.SubmittedAt))
	case j.EndedAt.IsZero():
		return units.FormatElapsed(now.Sub(j.StartedAt))
	}
	return units.FormatElapsed(j.EndedAt.Sub(j.StartedAt))
}

// runtimeCell is how long a started job ran, or has run by now, on the
// controller's clock (its end is its start + the run time its worker
// measured): "" for a job that never started.
func runtimeCell(j job.Job, now time.Time) string {
	if j.StartedAt.IsZero() {
		return ""
	}
	return age(j, now)
}

func jobName(j job.Job) string {
	cmd := strings.Join(j.Spec.Argv, " ")
	if len(cmd) > 60 {
		cmd = cmd[:57] + "..."
	}
	return printable(oneLine(j.Spec.Name + ": " + cmd))
}

// printable replaces control characters (escape sequences a job's command
// could carry to another user's terminal) with "?".
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// where prints a placement as host:indexes ("gpu01:0,1").
func where(p job.Placement) string {
	if p.Host == "" {
		return "-"
	}
	idx := make([]string, len(p.Indexes))
	for i, n := range p.Indexes {
		idx[i] = strconv.Itoa(n)
		if i < len(p.MIG) && p.MIG[i] >= 0 {
			idx[i] += "/mig" + strconv.Itoa(p.MIG[i]) // as gssh gpus names it
		}
	}
	return p.Host + ":" + strings.Join(idx, ",")
}

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
// job (line says it), errors on stderr; a *several of them if any job
// could not be done (exit 1 for a job in the wrong state or missing). A task of an array named whole (arrays) that is in no state for
// it is skipped, and counted in one line.
func (a *app) printHolds(res []service.HoldResult, arrays map[job.ID]bool, line func(job.Job) string) error {
	var errs []error
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
			continue
		}
		fmt.Fprintln(a.stdout, line(r.Job))
	}
	if len(errs) > 0 {
		return &several{errs: errs}
	}
	return nil
}
