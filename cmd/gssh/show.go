package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

type showOptions struct {
	id   job.ID
	json bool
}

func newShowCmd(a *app, runF func(*showOptions) error) *cobra.Command {
	opts := &showOptions{}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show everything known about a job, including why it is pending",
		Long: `Show everything known about a job: what was asked, where it runs or ran,
and how it ended. For a queued job it also plans the queue as a pass would
now (probing the hosts, changing nothing): its place in the queue and why,
what it waits for host by host, its reservation, and when it should start.`,
		Example: `  gssh show 7
  gssh show 12_3
  gssh show 7 --json | jq .queue`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        oneJobID,
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.oneJob(c.Context(), args[0], runF != nil)
			if err != nil {
				return err
			}
			opts.id = id
			if runF != nil {
				return runF(opts)
			}
			return showRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the job record as JSON")
	return cmd
}

// refOf names job id as gssh names jobs (job.Job.Ref: "16_2" for an
// array task), its id alone when its record cannot be read.
func (a *app) refOf(ctx context.Context, id job.ID) string {
	if j, err := a.service().Job(ctx, id); err == nil {
		return j.Ref()
	}
	return strconv.FormatUint(uint64(id), 10)
}

// showID is gssh show's id line: the job's id, or for an array task its
// name and then its id ("4_2 (job 6)").
func showID(j job.Job) string {
	if j.Spec.Array == nil {
		return j.Ref()
	}
	return fmt.Sprintf("%s (job %d)", j.Ref(), j.ID)
}

func showRun(ctx context.Context, a *app, opts *showOptions) error {
	j, err := a.service().Job(ctx, opts.id)
	if err != nil {
		return err
	}
	var ex *service.Explanation
	if j.State == job.Queued {
		e, err := a.service().Explain(ctx, j.ID)
		switch {
		case err != nil && ctx.Err() != nil:
			return interrupted(ctx, err)
		case err != nil:
			fmt.Fprintf(a.stderr, "gssh: warning: cannot plan the queue now (%v); the reason shown is the last pass's\n", err)
		default:
			ex = &e
		}
	}
	if opts.json {
		return a.printJSON(service.ShowDoc{Job: j, Queue: ex})
	}
	s := j.Spec
	lines := [][2]string{
		{"id", showID(j)}, {"user", j.User}, {"state", stateWord(j)}, {"reason", j.Reason},
	}
	if h := j.Hold; h != nil {
		lines = append(lines, [2]string{"held", fmt.Sprintf("by %s since %s (gssh release %s)", h.By, timeCell(h.At), j.Ref())})
	}
	if t := s.Array; t != nil {
		limit := ""
		if t.Limit > 0 {
			limit = fmt.Sprintf(", at most %d at once", t.Limit)
		}
		lines = append(lines, [2]string{"array", fmt.Sprintf("%s (task %d of the %d of array %d%s)", j.Ref(), t.Task, t.Tasks, t.Job, limit)})
	}
	for _, d := range s.After {
		what := "job " + a.refOf(ctx, d.Job)
		if d.Tasks > 0 {
			what = fmt.Sprintf("array %d (its %d tasks)", d.Job, d.Tasks)
		}
		lines = append(lines, [2]string{"after", fmt.Sprintf("%s, to %s (%s)", what, sched.DependencyNeed(d.Kind), sched.DependencyFlag(d.Kind))})
	}
	if !s.Begin.IsZero() {
		lines = append(lines, [2]string{"begin", timeCell(s.Begin)})
	}
	if in := s.Interactive; in != nil {
		how := "gssh run: in the foreground of its gssh run, ended with it"
		if in.PTY {
			how = "gssh run --pty: on a terminal, in the foreground of its gssh run, ended with it"
		}
		lines = append(lines, [2]string{"interactive", how})
	}
	lines = append(lines, queueLines(ex, j.Reason)...)
	lines = append(lines, [][2]string{
		{"name", s.Name}, {"command", fmt.Sprintf("%q", s.Argv)}, {"shell", strconv.FormatBool(s.Shell)},
		{"host", s.Host}, {"labels", strings.Join(s.Labels, ",")}, {"gpus", strconv.Itoa(s.GPUs)}, {"mem per gpu", memCell(s) + memAutoNote(s)},
		{"workdir", s.Workdir}, {"timeout", timeoutCell(s.Timeout)}, {"priority", strconv.Itoa(s.Priority)},
		{"placed on", where(j.Placement)}, {"gpu uuids", strings.Join(j.Placement.GPUs, ",")},
		{"attempt", pidCell(j.Attempt)}, {"job dir", j.Remote.Dir}, {"pid", pidCell(j.Remote.PID)},
		{"submitted", timeCell(j.SubmittedAt)}, {"started", timeCell(j.StartedAt)}, {"ended", timeCell(j.EndedAt)},
		{"runtime", runtimeCell(j, a.now())},
	}...)
	if s.CPUs > 0 {
		cpus := strconv.Itoa(s.CPUs)
		if len(j.Placement.CPUs) > 0 {
			cpus += " (pinned to CPUs " + units.Ranges(j.Placement.CPUs, 2) + ")"
		}
		lines = append(lines, [2]string{"cpus", cpus})
	}
	if s.HostMem > 0 {
		lines = append(lines, [2]string{"host mem", units.FormatMem(s.HostMem)})
	}
	if s.LogLimit > 0 {
		lines = append(lines, [2]string{"log limit", units.FormatBytes(s.LogLimit) + " (--log-limit)"})
	}
	if h := j.Housekept; h != nil {
		lines = append(lines, [2]string{"housekept", housekeptText(*h)})
	}
	if s.Preemptible {
		lines = append(lines, [2]string{"preemptible", fmt.Sprintf("yes (SIGTERM, then SIGKILL after %s; requeued)", s.Grace())})
	}
	if s.Requeue {
		lines = append(lines, [2]string{"requeue", "yes (back in the queue if its host fails under it)"})
	}
	if j.Restarts > 0 {
		lines = append(lines, [2]string{"restarts", strconv.Itoa(j.Restarts)})
	}
	if p := j.Preempt; p != nil {
		lines = append(lines, [2]string{"preempting", fmt.Sprintf("since %s, for job %s: SIGKILL at %s if still there", timeCell(p.At), a.refOf(ctx, p.For), timeCell(p.At.Add(s.Grace())))})
	}
	for _, e := range s.Env {
		lines = append(lines, [2]string{"env", e.Key + "=" + e.Value})
	}
	if len(j.Attempts) == 0 { // a record of a gssh before attempts were kept
		for _, u := range j.Runs {
			lines = append(lines, [2]string{"earlier run", fmt.Sprintf("%s to %s (requeued)", timeCell(u.Started), timeCell(u.Ended))})
		}
	}
	lines = append(lines, attemptLines(j)...)
	if j.ExitCode != nil {
		lines = append(lines, [2]string{"exit code", strconv.Itoa(*j.ExitCode)})
	}
	if j.Signal != "" {
		lines = append(lines, [2]string{"signal", j.Signal})
	}
	if u := j.GPUUse; u != nil {
		lines = append(lines, [2]string{"gpu use", useText(j.Spec, *u, j.State.Terminal())})
	}
	if p := j.Placement; p.PortBase > 0 {
		lines = append(lines, [2]string{"ports", fmt.Sprintf("%d-%d (GSSH_PORT_BASE, GSSH_PORT_COUNT)", p.PortBase, p.PortBase+p.PortCount-1)})
	}
	var b strings.Builder
	for _, l := range lines {
		if l[1] != "" {
			fmt.Fprintf(&b, "%-12s %s\n", l[0]+":", printable(l[1]))
		}
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
}

// memAutoNote says, for a --mem auto job, where its memory came from.
func memAutoNote(s job.Spec) string {
	if s.MemAuto == nil {
		return ""
	}
	if len(s.MemAuto.From) == 0 {
		return " (--mem auto: no past peak of this command)"
	}
	ids := make([]string, len(s.MemAuto.From))
	for i, id := range s.MemAuto.From {
		ids[i] = strconv.FormatUint(uint64(id), 10)
	}
	return fmt.Sprintf(" (--mem auto: the highest peak of %s, %s, and %.0f %%)", units.Plural(len(ids), "job", "jobs")+" "+strings.Join(ids, ", "),
		units.FormatMem(s.MemAuto.Peak), job.MemAutoMargin*100)
}

// useText says what a job used of its GPUs as gssh serve sampled it,
// and, for an ended job whose peak stayed far below its --mem (under
// half), the --mem that would have done: the peak and a quarter, in
// whole GiB.
func useText(s job.Spec, u job.GPUUse, ended bool) string {
	asked := "the whole GPU (exclusive)"
	if s.MemPerGPU > 0 {
		asked = units.FormatMem(s.MemPerGPU) + " asked"
	}
	out := fmt.Sprintf("peak %s of %s", units.FormatMem(u.PeakBytes), asked)
	if u.UtilSamples > 0 {
		out += fmt.Sprintf(", utilization %.0f %% on average", u.UtilPct)
	}
	out += fmt.Sprintf(" (%d %s)", u.Samples, units.Plural(u.Samples, "sample", "samples"))
	if u.Idle && !ended {
		out += "; idle: its GPUs at 0 % since " + timeCell(u.IdleSince)
	}
	if ended && u.PeakBytes > 0 && (s.MemPerGPU == 0 || 2*u.PeakBytes < s.MemPerGPU) {
		out += "; --mem " + suggestMem(u.PeakBytes) + " would do"
	}
	return out
}

// suggestMem is a --mem for a job whose peak was peak bytes: a quarter
// more, rounded up to whole GiB ("7G").
func suggestMem(peak uint64) string {
	const gib = 1 << 30
	return strconv.FormatUint((peak+peak/4+gib-1)/gib, 10) + "G"
}

// housekeptText says what housekeeping did with a job's directories.
func housekeptText(h job.Housekept) string {
	var out string
	switch {
	case h.Removed > 0:
		out = fmt.Sprintf("%s: its job directories were removed (%d, %s), its log with them", timeCell(h.At), h.Removed, bytesText(h.Bytes))
	case h.Kept == "":
		out = fmt.Sprintf("%s: its job directories were gone already", timeCell(h.At))
	default:
		out = timeCell(h.At) + ": nothing removed"
	}
	if h.Kept != "" {
		out += "; left: " + h.Kept
	}
	return out
}

// bytesText prints a size on disk in IEC units, KiB for the small ones.
func bytesText(b uint64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%d KiB", (b+1023)>>10)
	}
	return units.FormatMem(b)
}

// queueLines say what the planner makes of a queued job now: where it
// stands, what it waits for (unless that is said already), its
// reservation, when it should start.
func queueLines(ex *service.Explanation, said string) [][2]string {
	if ex == nil {
		return nil
	}
	if ex.WouldStart {
		return [][2]string{{"queue", "it fits now: the next pass starts it on " + where(*ex.Placement)}}
	}
	out := [][2]string{{"queue", ex.Rank}}
	if ex.Reason != nil && ex.Reason.Text != said {
		out = append(out, [2]string{"waits for", ex.Reason.Text})
	}
	if ex.Reservation != nil {
		out = append(out, [2]string{"reservation", ex.Reservation.String()})
	}
	if f := ex.Forecast; f != nil {
		out = append(out, [2]string{"expected", forecastText(*f)})
	}
	return out
}

// forecastText says when a job is expected to start.
func forecastText(f sched.Forecast) string {
	if f.Start.IsZero() {
		return "unknown: " + f.Why
	}
	text := fmt.Sprintf("by %s on %s (if the running jobs end at their walltimes", f.Start.UTC().Format("2006-01-02 15:04 UTC"), where(f.Placement))
	if f.Estimated {
		text += "; some have none, and are assumed to run the policy's backfill_estimate"
	}
	return text + ")"
}

// timeoutCell is a job's --timeout; without one, the inventory's
// default_timeout (if any) is its walltime.
func timeoutCell(d time.Duration) string {
	if d == 0 {
		return "none given (the policy's default_timeout applies, if set)"
	}
	return d.String()
}

func pidCell(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}
