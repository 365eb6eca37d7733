package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

type drainOptions struct {
	hosts    []string
	reason   string
	at       string
	from     time.Time // --at, parsed; zero: now
	wait     bool
	quiet    bool // --quiet: with --wait, nothing on stderr but errors
	keep     bool // --wait alone: a drain recorded already stays as it is
	timeout  time.Duration
	interval time.Duration
}

func newDrainCmd(a *app, runF func(*drainOptions) error) *cobra.Command {
	opts := &drainOptions{}
	cmd := &cobra.Command{
		Use:   "drain HOST... [--reason TEXT] [--at TIME] [--wait [--timeout D] [--interval 5s]]",
		Short: "Take hosts out of the queue for maintenance; running jobs finish",
		Long: `Drain hosts for maintenance, as scontrol update state=drain does: they take
no new jobs, and the running ones go on to their end. The drain is kept
with who, when and why (--reason); gssh hosts and gpus show it, gssh
resume lifts it. --at TIME drains from a time to come: until then only jobs
that end by then start there. --wait returns once no gssh job is left (on
a terminal, a progress line on stderr); --timeout gives up with exit 124.`,
		Example: `  gssh drain gpu01 --reason "driver upgrade"
  gssh drain gpu01 gpu02 --at "tomorrow 08:00" --reason "PSU swap"
  gssh drain gpu01 --wait --timeout 2h && ssh gpu01 sudo reboot`,
		Annotations: exits(usageExit, stateExit,
			exitLine{exitTimedOut, "--wait --timeout ran out with gssh jobs still on the hosts"}, signalExit, termExit),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("give the hosts to drain (gssh hosts lists them)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.hosts = args
			opts.keep = opts.wait && !c.Flags().Changed("reason") && !c.Flags().Changed("at")
			if c.Flags().Changed("timeout") && !opts.wait {
				return errors.New("--timeout goes with --wait: it bounds how long gssh drain --wait waits for the hosts' jobs")
			}
			if err := checkDuration("--timeout", opts.timeout, 0, 30*24*time.Hour); err != nil {
				return err
			}
			if err := checkDuration("--interval", opts.interval, time.Second, time.Hour); err != nil {
				return err
			}
			if c.Flags().Changed("at") {
				from, err := drainAt(opts.at, a.now(), time.Local)
				if err != nil {
					return err
				}
				opts.from = from
			}
			if runF != nil {
				return runF(opts)
			}
			return drainRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.reason, "reason", "", "why the hosts are drained (shown in gssh hosts, gssh gpus and pending jobs' reasons)")
	fl.StringVar(&opts.at, "at", "", "drain from this time on (a maintenance window); until then only jobs that end by it start there")
	fl.BoolVar(&opts.wait, "wait", false, "return once no gssh job is left on the hosts")
	fl.DurationVar(&opts.timeout, "timeout", 0, "with --wait: give up after this long (exit 124); 0: wait as long as it takes")
	fl.DurationVar(&opts.interval, "interval", 5*time.Second, "with --wait: time between scheduling passes")
	fl.BoolVarP(&opts.quiet, "quiet", "q", false, "with --wait: print nothing on stderr but errors (no progress)")
	return cmd
}

// drainAt reads --at: a time to come (see ParseTime), "now" being at
// once (the zero time).
func drainAt(s string, now time.Time, loc *time.Location) (time.Time, error) {
	if strings.EqualFold(strings.TrimSpace(s), "now") {
		return time.Time{}, nil
	}
	t, err := sched.ParseTime("--at", s, now, loc)
	if err != nil {
		return time.Time{}, err
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("--at %q is %s, in the past (it is %s now): give a time to come, or leave --at out to drain at once",
			s, t.Format("2006-01-02 15:04:05 MST"), now.In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	return t, nil
}

func drainRun(ctx context.Context, a *app, opts *drainOptions) error {
	res, err := a.service().Drain(ctx, service.DrainRequest{Hosts: opts.hosts, Reason: opts.reason, From: opts.from, Keep: opts.keep})
	if err != nil {
		return interrupted(ctx, err)
	}
	now := a.now()
	for _, h := range res.Hosts {
		fmt.Fprintln(a.stdout, drainedLine(h, now))
	}
	if !opts.wait {
		return nil
	}
	return drainWait(ctx, a, opts.hosts, opts.interval, opts.timeout, opts.quiet)
}

// drainedLine says what gssh drain did to one host.
func drainedLine(h service.HostDrain, now time.Time) string {
	var s string
	if d := h.Drain; d.InForce(now) {
		s = h.Host + " drained: it takes no new jobs"
	} else {
		s = fmt.Sprintf("%s draining at %s: until then it takes only jobs whose walltime ends by then, and none from then on", h.Host, localMinute(d.From))
	}
	if h.Kept {
		s = fmt.Sprintf("%s stays %s", h.Host, drainWords(h.Drain, now))
	}
	if r := h.Replaced; r != nil {
		s += " (it was " + drainWords(*r, now) + ")"
	}
	if h.Inventory != "" {
		s += " (the inventory drains it too: " + h.Inventory + ")"
	}
	switch n := len(h.Jobs); {
	case n == 1:
		s += "; 1 gssh job on it runs to its end: " + jobList(h.Jobs)
	case n > 1:
		s += fmt.Sprintf("; %d gssh jobs on it run to their end: %s", n, jobList(h.Jobs))
	}
	return s
}

// drainWait waits until no gssh job holds GPUs on hosts, running a pass
// every interval; after timeout (0: none) it gives up, naming the jobs
// left, as a *timedOut (exit 124). On a terminal a bar on stderr counts the jobs
// gone; quiet: nothing on stderr but errors.
func drainWait(ctx context.Context, a *app, hosts []string, interval, timeout time.Duration, quiet bool) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = a.now().Add(timeout)
	}
	said := ""
	var bar *progress
	left := 0 // jobs still there at the last look
	defer func() {
		if bar != nil {
			bar.Done()
		}
	}()
	for first := true; ; first = false {
		if !first {
			a.tryPass(ctx)
		}
		jobs, err := a.service().DrainJobs(ctx, hosts)
		switch {
		case ctx.Err() != nil:
			return errInterrupted
		case errors.Is(err, state.ErrBadRecord):
			a.warnf(err.Error()) // the jobs that could be read are waited for
		case err != nil:
			return err
		}
		where := strings.Join(hosts, ", ")
		if bar != nil {
			bar.Add(max(0, left-len(jobs)))
		}
		left = len(jobs)
		if len(jobs) == 0 {
			if bar != nil {
				bar.Done()
				bar = nil // done once: the deferred Done is for the other ends
			}
			fmt.Fprintf(a.stdout, "no gssh jobs left on %s\n", where)
			return nil
		}
		if list := jobList(jobs); list != said && !quiet {
			if bar != nil {
				bar.Clear()
			}
			fmt.Fprintf(a.stderr, "gssh: waiting for %s on %s: %s\n", jobCount(len(jobs)), where, list)
			said = list
		}
		if bar == nil {
			bar = a.newProgress("jobs gone from "+where, int64(len(jobs)), quiet)
		}
		wait := interval
		if !deadline.IsZero() {
			remaining := deadline.Sub(a.now())
			if remaining <= 0 {
				return &timedOut{fmt.Errorf("--timeout %s ran out: %s still on %s: %s", timeout, jobCount(len(jobs)), where, jobList(jobs))}
			}
			wait = min(wait, remaining)
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(wait):
		}
	}
}

// jobCount is "1 gssh job", "3 gssh jobs".
func jobCount(n int) string {
	if n == 1 {
		return "1 gssh job"
	}
	return fmt.Sprintf("%d gssh jobs", n)
}

// jobList names jobs: "3 (alice, running on a100), 4 (bob, unknown on a100)".
func jobList(jobs []job.Job) string {
	parts := make([]string, len(jobs))
	for i, j := range jobs {
		parts[i] = fmt.Sprintf("%s (%s, %s on %s)", j.Ref(), printable(j.User), j.State, j.Placement.Host)
	}
	return strings.Join(parts, ", ")
}

type resumeOptions struct {
	hosts []string
}

func newResumeCmd(a *app, runF func(*resumeOptions) error) *cobra.Command {
	opts := &resumeOptions{}
	return &cobra.Command{
		Use:   "resume HOST...",
		Short: "Lift gssh drain's drain of hosts: they take new jobs again",
		Long: `Lift the drains gssh drain recorded, as scontrol update state=resume does:
the hosts take jobs from the next pass. A host gssh drain did not drain
(unknown, not drained, or drained by the inventory's drain: true, whose
file and line the error names) is an error, and no host is resumed.`,
		Example: `  gssh resume gpu01
  gssh resume gpu01 gpu02`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("give the hosts to resume (gssh hosts shows the drained ones)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.hosts = args
			if runF != nil {
				return runF(opts)
			}
			return resumeRun(c.Context(), a, opts)
		},
	}
}

// resumeRun is gssh resume; see newResumeCmd.
func resumeRun(ctx context.Context, a *app, opts *resumeOptions) error {
	res, err := a.service().Resume(ctx, opts.hosts)
	if err != nil {
		return interrupted(ctx, err)
	}
	now := a.now()
	for _, h := range res.Hosts {
		s := fmt.Sprintf("%s resumed (it was %s): it takes new jobs from the next pass", h.Host, drainWords(h.Drain, now))
		if h.Inventory != "" {
			s = fmt.Sprintf("%s resumed from gssh drain (it was %s), but the inventory still drains it (%s: drain: true): set drain: false there for it to take jobs", h.Host, drainWords(h.Drain, now), h.Inventory)
		}
		fmt.Fprintln(a.stdout, s)
	}
	return nil
}

// drainWords says who drained a host, since or from when, and why, in
// local time: "drained by bob since 2026-12-02 08:00: driver upgrade",
// "draining at 2026-12-02 08:00, drained by bob on 2026-12-01 18:02: PSU
// swap".
func drainWords(d sched.Drain, now time.Time) string {
	by := "drained by " + printable(d.By)
	if d.By == "" {
		by = "drained"
	}
	var s string
	switch {
	case !d.InForce(now):
		s = fmt.Sprintf("draining at %s, %s on %s", localMinute(d.From), by, localMinute(d.At))
	case d.From.Sub(d.At) >= time.Minute:
		s = fmt.Sprintf("%s since %s (asked on %s)", by, localMinute(d.From), localMinute(d.At))
	default:
		s = fmt.Sprintf("%s since %s", by, localMinute(d.From))
	}
	if d.Reason != "" {
		s += ": " + printable(d.Reason)
	}
	return s
}

// drainCell is what a host's drain adds to its STATE cell: " (drained)",
// " (draining at 08:00)" (the day too when it is not today), or "".
func drainCell(d service.DrainDoc, now time.Time) string {
	switch {
	case d.Drain:
		return " (drained)"
	case d.Drained != nil:
		at := d.Drained.From.Local()
		if y, m, dd := at.Date(); y == now.Local().Year() && m == now.Local().Month() && dd == now.Local().Day() {
			return " (draining at " + at.Format("15:04") + ")"
		}
		return " (draining at " + localMinute(at) + ")"
	}
	return ""
}

// drainNote is the line under a table about host's drain: who, when,
// why; where the inventory drains it. "" when it is not drained.
func drainNote(host string, d service.DrainDoc, now time.Time) string {
	var parts []string
	if d.Drained != nil {
		parts = append(parts, drainWords(*d.Drained, now))
	}
	if d.InventoryDrain != "" {
		parts = append(parts, "drained in the inventory ("+d.InventoryDrain+": drain: true)")
	}
	if len(parts) == 0 {
		return ""
	}
	return host + ": " + strings.Join(parts, "; ")
}

// localMinute prints t in local time to the minute, with its zone (the
// planner's pending reasons say UTC: the zone tells them apart).
func localMinute(t time.Time) string { return t.Local().Format("2006-01-02 15:04 MST") }

// tryPass runs one scheduling pass between looks at the state (gssh wait,
// gssh drain --wait), so that jobs start and their ends are recorded
// without a cron pass: a pass already running (the lock held) does that
// too, and a member of a lab's shared queue waits for its pass user's.
// Other failures are warnings.
func (a *app) tryPass(ctx context.Context) {
	if _, err := a.service().Schedule(ctx, service.ScheduleRequest{}); err != nil && !errors.Is(err, service.ErrPassBusy) && !errors.Is(err, service.ErrNotPassUser) && ctx.Err() == nil {
		fmt.Fprintf(a.stderr, "gssh: warning: a scheduling pass could not run: %v\n", err)
	}
}
