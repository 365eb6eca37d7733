package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

// oneJobID accepts exactly one argument, a job id, and says so otherwise.
func oneJobID(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("give one job id, e.g. gssh %s 12 (gssh ps lists them)", c.Name())
	}
	return nil
}

// parseID reads a job id argument.
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

func parseID(s string) (job.ID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a job id (a number, as gssh ps shows)", s)
	}
	return job.ID(n), nil
}

type psOptions struct {
	all, json bool
	user      string
	since     string // --since: an age or a date
}

func newPsCmd(a *app, runF func(*psOptions) error) *cobra.Command {
	opts := &psOptions{}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List jobs: queued, launching and running (-a: all)",
		Long: `List jobs, oldest first: ID, USER, STATE, PRIORITY, HOST:GPUS, MEM ("excl":
whole GPUs), AGE (queued) or RUNTIME, REASON (why a queued job waits, as a
code: gssh show ID says it in words), NAME and command. It reads the state
file only (a pass changes what it shows) and never creates it. -a adds the
jobs that ended; --since 30d the jobs active since then.`,
		Example: `  gssh ps
  gssh ps --user ann
  gssh ps --since 7d --json | jq '.jobs[] | {id, state}'`,
		Annotations: exits(exitLineUsage, exitLineState),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("since") {
				if _, err := sinceFlag(opts.since, time.Now()); err != nil { // before anything is read
					return err
				}
				opts.all = true
			}
			if runF != nil {
				return runF(opts)
			}
			return psRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.all, "all", "a", false, "include ended jobs")
	cmd.Flags().StringVar(&opts.since, "since", "", "only jobs active since then (ended since, or not ended; implies -a): 30d, 2w, 12h, 2026-12-24")
	cmd.Flags().StringVar(&opts.user, "user", "", "only this user's jobs")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

// sinceFlag reads gssh ps --since as gssh events reads its own (a time
// ago, a date, a local or RFC 3339 time; not empty, not one to come).
func sinceFlag(s string, now time.Time) (time.Time, error) {
	t, err := eventlog.ParseSince(s, now)
	if err != nil {
		return t, fmt.Errorf("--since %w", err)
	}
	return t, nil
}

func psRun(ctx context.Context, a *app, opts *psOptions) error {
	q := service.JobQuery{All: opts.all, User: opts.user}
	if opts.since != "" {
		since, err := sinceFlag(opts.since, a.now())
		if err != nil {
			return err
		}
		q.Since = since
	}
	doc, err := a.service().Jobs(ctx, q)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return err
	}
	if err != nil {
		fmt.Fprintln(a.stderr, "gssh: warning:", err) // the others are listed
	}
	if opts.json {
		return a.printJSON(doc)
	}
	now := a.now()
	var rows [][]string
	for i := 0; i < len(doc.Jobs); i++ {
		j := doc.Jobs[i]
		id := strconv.FormatUint(uint64(j.ID), 10)
		if t := j.Spec.Array; t != nil {
			id = fmt.Sprintf("%d_%d", t.Job, t.Task)
			// The queued tasks of an array that wait alike are one line,
			// as squeue folds them: 12[3-31].
			k := i
			for k+1 < len(doc.Jobs) && foldsWith(doc.Jobs[k+1], j) {
				k++
			}
			if k > i {
				idx := make([]int, 0, k-i+1)
				for _, f := range doc.Jobs[i : k+1] {
					idx = append(idx, f.Spec.Array.Task)
				}
				id = fmt.Sprintf("%d[%s]", t.Job, ranges(idx))
				i = k
			}
		}
		rows = append(rows, []string{id, j.User, stateWord(j), strconv.Itoa(j.Spec.Priority), where(j.Placement), memCell(j.Spec),
			age(j, now), reasonCell(j), jobName(j)})
	}
	return printTable(a.stdout, a.tty, []string{"ID", "USER", "STATE", "PRIORITY", "HOST:GPUS", "MEM", "AGE/RUNTIME", "REASON", "NAME/CMD"}, rows)
}

// foldsWith reports whether queued task next folds into the line of
// task j: the same array, both queued, alike held, for the same reason.
func foldsWith(next, j job.Job) bool {
	a, b := next.Spec.Array, j.Spec.Array
	return a != nil && b != nil && a.Job == b.Job && j.State == job.Queued && next.State == job.Queued &&
		(next.Hold == nil) == (j.Hold == nil) && next.ReasonCode == j.ReasonCode
}

// reasonCell is a queued job's pending reason code ("no_free_gpu",
// "reserved", "mem"; see gssh show for the words), "-" otherwise.
func reasonCell(j job.Job) string {
	if (j.State == job.Queued || j.State == job.Unknown || j.ReasonCode == "not_in_inventory" || j.ReasonCode == "gpu_failed") && j.ReasonCode != "" {
		return printable(j.ReasonCode)
	}
	return "-"
}

func memCell(s job.Spec) string {
	if s.MemPerGPU == 0 {
		return "excl"
	}
	return sched.FormatMem(s.MemPerGPU)
}

// age is how long a queued job waits, or how long a job ran / has run.
func age(j job.Job, now time.Time) string {
	switch {
	case j.StartedAt.IsZero():
		return short(now.Sub(j.SubmittedAt))
	case j.EndedAt.IsZero():
		return short(now.Sub(j.StartedAt))
	}
	return short(j.EndedAt.Sub(j.StartedAt))
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

// short prints a duration as people read it: 42s, 1m27s, 2h05m, 3d04h.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours()/24), int(d.Hours())%24)
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
		Annotations: exits(exitLineUsage, exitLineState),
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

// showDoc is what gssh show --json prints: the job record, and for a
// queued job what the planner makes of it now.
type showDoc struct {
	job.Job
	Queue *service.Explanation `json:"queue,omitempty"`
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
		return a.printJSON(showDoc{Job: j, Queue: ex})
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
		lines = append(lines, [2]string{"array", fmt.Sprintf("%d_%d (task %d of the %d of array %d%s)", t.Job, t.Task, t.Task, t.Tasks, t.Job, limit)})
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
		{"host", s.Host}, {"labels", strings.Join(s.Labels, ",")}, {"gpus", strconv.Itoa(s.GPUs)}, {"mem per gpu", memCell(s)},
		{"workdir", s.Workdir}, {"timeout", timeoutCell(s.Timeout)}, {"priority", strconv.Itoa(s.Priority)},
		{"placed on", where(j.Placement)}, {"gpu uuids", strings.Join(j.Placement.GPUs, ",")},
		{"attempt", pidCell(j.Attempt)}, {"job dir", j.Remote.Dir}, {"pid", pidCell(j.Remote.PID)},
		{"submitted", timeCell(j.SubmittedAt)}, {"started", timeCell(j.StartedAt)}, {"ended", timeCell(j.EndedAt)},
		{"runtime", runtimeCell(j, a.now())},
	}...)
	if s.CPUs > 0 {
		cpus := strconv.Itoa(s.CPUs)
		if len(j.Placement.CPUs) > 0 {
			cpus += " (pinned to CPUs " + gpuinfo.FormatCPUList(j.Placement.CPUs) + ")"
		}
		lines = append(lines, [2]string{"cpus", cpus})
	}
	if s.HostMem > 0 {
		lines = append(lines, [2]string{"host mem", sched.FormatMem(s.HostMem)})
	}
	if s.LogLimit > 0 {
		lines = append(lines, [2]string{"log limit", sched.FormatBytes(s.LogLimit) + " (--log-limit)"})
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
	var b strings.Builder
	for _, l := range lines {
		if l[1] != "" {
			fmt.Fprintf(&b, "%-12s %s\n", l[0]+":", printable(l[1]))
		}
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
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
	return sched.FormatMem(b)
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
		Annotations: exitsOr("with -f", exitLineUsage, exitLineJobHost, exitLineState),
		Args:        oneJobID,
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
		if s := res.Ended; s != nil {
			fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", res.Job.Ref(), s.State, s.Reason)
			end.State, end.ExitCode, end.Signal = s.State, s.ExitCode, s.Signal
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
		Annotations: exits(exitLineUsage, exitLineJobHost, exitLineState),
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
	code := exitOK
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
			code = max(code, exitCode(err))
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
		fmt.Fprintf(a.stdout, "%d %s of the arrays given had ended already\n", skipped, plural(skipped, "task", "tasks"))
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
	return &reported{err: errors.Join(errs...), code: code}
}

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
		Annotations: exits(exitLineUsage,
			"2    a host with jobs to poll or launch, or a job, had a problem",
			exitLineState+";\n       or another pass held the pass lock past --wait"),
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
	for _, h := range res.Hosts {
		switch h.Change {
		case "up":
			fmt.Fprintf(&b, "host %s answers again\n", h.Host)
		default: // down, still down
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
	if _, err := io.WriteString(a.stdout, b.String()); err != nil {
		return err
	}
	a.warn(res.Problems)
	return problems(res.Problems)
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
		parts = append(parts, fmt.Sprintf("%d job %s older than %s moved to history", hk.Moved, plural(hk.Moved, "record", "records"), sched.FormatAge(hk.KeepJobs)))
	}
	for _, d := range hk.Dirs {
		parts = append(parts, fmt.Sprintf("%d job %s older than %s removed on %s (%s)", d.Removed, plural(d.Removed, "dir", "dirs"), sched.FormatAge(hk.KeepJobDirs), d.Host, bytesText(d.Bytes)))
	}
	if hk.Pruned > 0 {
		parts = append(parts, fmt.Sprintf("%d fair-share usage %s older than the policy counts pruned", hk.Pruned, plural(hk.Pruned, "entry", "entries")))
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

// problems is the exit of a pass that ran with problems, printed already
// as warnings: 3 when the state file failed (a write during the pass), 2
// for hosts and jobs.
func problems(ps []error) error {
	if len(ps) == 0 {
		return nil
	}
	code := exitPartial
	for _, p := range ps {
		var fe *state.FileError
		if errors.As(p, &fe) || errors.Is(p, state.ErrBusy) {
			code = exitState
		}
	}
	return &reported{err: errors.Join(ps...), code: code}
}

// where prints a placement as host:indexes ("gpu01:0,1").
func where(p job.Placement) string {
	if p.Host == "" {
		return "-"
	}
	idx := make([]string, len(p.Indexes))
	for i, n := range p.Indexes {
		idx[i] = strconv.Itoa(n)
	}
	return p.Host + ":" + strings.Join(idx, ",")
}
