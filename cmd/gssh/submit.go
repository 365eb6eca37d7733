package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/jobform"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

type submitOptions struct {
	host     string
	labels   []string
	gpus     int
	mem      string
	gpuMem   string
	name     string
	workdir  string
	env      []string
	timeout  string
	priority int
	dryRun   bool
	json     bool
	argv     []string
	// Dependencies, hold, begin, wait.
	after, afterAny, afterNotOK []string
	hold                        bool
	array                       string
	export                      string
	login                       bool
	environ                     []string // the submitting environment, for --export
	begin                       string
	wait                        bool
	interval                    time.Duration
	// Host CPUs and memory (--cpus, --host-mem).
	cpus, hostMem string
	// Preemption (--preemptible, --signal-grace).
	preemptible bool
	signalGrace time.Duration
	// signalGraceSet: --signal-grace was given (0 is refused, not the default).
	signalGraceSet bool
	requeue        bool   // --requeue
	logLimit       string // --log-limit
	template       string // --template: a saved template's flags and command first
}

func newSubmitCmd(a *app, runF func(*submitOptions) error) *cobra.Command {
	opts := &submitOptions{}
	cmd := &cobra.Command{
		Use:   "submit [flags] -- CMD [ARGS...]",
		Short: "Queue a job and start it at once on a GPU with room for it",
		Long: `Queue a job, then run one scheduling pass: the job starts on a GPU with room for it
("job 7 running on gpu01:3") or stays queued with the reason. gssh's flags end at the
command's first word (or at --): several words are an argv, one string a shell command
(sh -c on the worker). --mem is GPU memory per GPU (Slurm's --mem is --host-mem).`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit,
			passedJobExit("with --wait"), passedGsshExit("with --wait")),
		Example: `  gssh submit --mem 8G -- python train.py --lr 3e-4
  gssh submit --gpus 2 --timeout 12:00:00 --after 12 -- ./run.sh
  gssh submit -- 'cd ~/proj && make train 2>&1 | tee out.txt'
  gssh submit --array 0-31%8 -- 'python train.py --seed $GSSH_ARRAY_TASK_ID'`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.argv = args
			if opts.template != "" {
				if err := applyTemplate(a, c, opts); err != nil {
					return err
				}
			}
			if err := checkMemFlags(c, opts); err != nil {
				return err
			}
			opts.signalGraceSet = c.Flags().Changed("signal-grace")
			if runF != nil {
				return runF(opts)
			}
			return submitRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	// gssh's flags end where the command begins, as with ssh and sbatch:
	// `gssh submit python train.py --gpus 8` gives --gpus to train.py.
	fl.SetInterspersed(false)
	addJobFlags(fl, opts)
	addQueueFlags(fl, opts)
	fl.BoolVar(&opts.wait, "wait", false, "wait for the job to end; exit with its status (as gssh wait)")
	fl.DurationVar(&opts.interval, "interval", 5*time.Second, "with --wait: time between scheduling passes")
	fl.BoolVar(&opts.dryRun, "dry-run", false, "say where the job would start, or why it waits; store nothing")
	fl.BoolVar(&opts.json, "json", false, "print the result as JSON")
	fl.StringVar(&opts.template, "template", "", "start from a saved template (gssh template), these flags over it")
	return cmd
}

// addQueueFlags adds the flags of a queued job (gssh submit's, and a
// template's) beyond addJobFlags'.
func addQueueFlags(fl *pflag.FlagSet, opts *submitOptions) {
	fl.StringVar(&opts.array, "array", "", "one task per index: 0-31, 1,4,9, 0-99:2; %N: N at once at most")
	fl.BoolVar(&opts.hold, "hold", false, "queue the job held: it starts only after gssh release")
	fl.BoolVar(&opts.preemptible, "preemptible", false, "a rebalancing pass may stop it for a job ranked ahead, and requeue it")
	fl.DurationVar(&opts.signalGrace, "signal-grace", 0, "with --preemptible: SIGTERM to SIGKILL, to checkpoint (default 60s)")
	fl.StringVar(&opts.logLimit, "log-limit", "", "keep at most SIZE of the job's output in its log: 1G, 500M")
	fl.BoolVar(&opts.requeue, "requeue", false, "queue the job again if its host fails under it (else: lost)")
}

// addJobFlags adds the flags of a job that gssh submit and gssh run
// share.
func addJobFlags(fl *pflag.FlagSet, opts *submitOptions) {
	fl.StringVar(&opts.host, "host", "auto", "host to run on, or auto")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.IntVar(&opts.gpus, "gpus", 1, "number of GPUs, all on one host")
	fl.StringVar(&opts.mem, "mem", "", "GPU memory per GPU: 8G, 0.5G, or auto (default: whole GPUs)")
	fl.StringVar(&opts.gpuMem, "gpu-mem", "", "alias of --mem")
	fl.MarkHidden("gpu-mem") // an alias: --mem is the one shown
	fl.StringVar(&opts.cpus, "cpus", "", "host CPUs to book and pin the job to (Slurm's --cpus-per-task)")
	fl.StringVar(&opts.hostMem, "host-mem", "", "host RAM to book, e.g. 64G (Slurm's --mem) (default: none)")
	fl.StringVar(&opts.name, "name", "", "job name (default: the command's first word)")
	fl.StringVar(&opts.workdir, "workdir", "", "directory to run in on the worker (default: the current one)")
	fl.StringArrayVar(&opts.env, "env", nil, "K=V to set in the job's environment (repeatable)")
	fl.StringVar(&opts.timeout, "timeout", "", "walltime: 90m, 2h, [D-]HH:MM:SS, or minutes (default: none)")
	fl.IntVar(&opts.priority, "priority", 5, "0 (first) to 10 (last); 0-3 for admins only")
	fl.StringSliceVar(&opts.after, "after", nil, "start after these jobs succeeded: ID,... (Slurm's afterok)")
	fl.StringSliceVar(&opts.afterAny, "after-any", nil, "start after these jobs ended, however (afterany)")
	fl.StringSliceVar(&opts.afterNotOK, "after-notok", nil, "start after these jobs failed, timed out or were lost")
	fl.StringVar(&opts.export, "export", "NONE", "variables the job gets from here: NONE, ALL, or VAR,VAR=value")
	fl.BoolVar(&opts.login, "login", false, "run under bash -lc on the worker, so ~/.profile applies (conda)")
	fl.StringVar(&opts.begin, "begin", "", "start no earlier than now+2h, 14:00, 2026-12-24T09:00 (local)")
}

// checkMemFlags refuses --mem with --gpu-mem and makes --gpu-mem --mem;
// it refuses the flags given empty that would otherwise read as not
// given (an empty --after, --label or --workdir: a script's variable
// was empty).
func checkMemFlags(c *cobra.Command, opts *submitOptions) error {
	if c.Flags().Changed("mem") && c.Flags().Changed("gpu-mem") {
		return errors.New("--mem and --gpu-mem are the same flag: give one")
	}
	if opts.gpuMem != "" {
		opts.mem = opts.gpuMem
	}
	for f, ids := range map[string][]string{"after": opts.after, "after-any": opts.afterAny, "after-notok": opts.afterNotOK} {
		if c.Flags().Changed(f) && len(ids) == 0 {
			return fmt.Errorf("--%s: no job id given (was a script's $id empty?); nothing was submitted", f)
		}
	}
	if c.Flags().Changed("label") && (len(opts.labels) == 0 || slices.Contains(opts.labels, "")) {
		return fmt.Errorf("--label %q: an empty label: give label names, such as --label a100,nvlink (leave --label out for any host); nothing was submitted", strings.Join(opts.labels, ","))
	}
	if c.Flags().Changed("workdir") && strings.TrimSpace(opts.workdir) == "" {
		return fmt.Errorf("--workdir %q: no directory given: give one, such as --workdir ~/project or --workdir . (leave --workdir out for the current directory); nothing was submitted", opts.workdir)
	}
	return emptyFlags(c)
}

// leftOut says what leaving each of submit's and run's string flags out
// means: a flag given empty (a script's unset $T in --timeout "$T") is
// refused, saying that, rather than taken as left out.
var leftOut = map[string]string{
	"timeout": "no walltime", "name": "the command's first word", "host": "any host (auto)",
	"mem": "whole GPUs", "gpu-mem": "whole GPUs", "cpus": "no CPUs booked", "host-mem": "no host memory booked",
	"log-limit": "the policy's log_limit", "array": "one job, not an array", "begin": "start when it fits",
	"export": "NONE: only --env and gssh's own variables",
}

// emptyFlags refuses a string flag of leftOut given as "" (or blanks).
func emptyFlags(c *cobra.Command) error {
	for _, name := range slices.Sorted(maps.Keys(leftOut)) {
		f := c.Flags().Lookup(name)
		if f != nil && f.Changed && strings.TrimSpace(f.Value.String()) == "" {
			return fmt.Errorf("--%s %q: no value given (was a script's variable empty?): give one, or leave --%s out for %s; nothing was submitted", name, f.Value.String(), name, leftOut[name])
		}
	}
	return nil
}

// form is the job the flags give.
func (o *submitOptions) form() jobform.Form {
	f := jobform.Form{Command: jobform.Words(o.argv), Host: o.host, Labels: o.labels, GPUs: &o.gpus, Mem: o.mem, CPUs: o.cpus, HostMem: o.hostMem,
		Name: o.name, Workdir: o.workdir, Env: o.env, Export: o.export, Timeout: o.timeout, Priority: &o.priority,
		After: o.after, AfterAny: o.afterAny, AfterNotOK: o.afterNotOK, Hold: o.hold, Array: o.array, Login: o.login, Begin: o.begin,
		Preemptible: o.preemptible, Requeue: o.requeue, LogLimit: o.logLimit, DryRun: o.dryRun}
	if o.signalGraceSet {
		f.SignalGrace = o.signalGrace.String()
	}
	return f
}

// spec turns the flags into a job spec, or says what is wrong with them.
// A relative --workdir (and the default, the current directory) is made
// absolute here, where it was given.
func (o *submitOptions) spec(warn func(string)) (job.Spec, error) {
	r, err := o.request(warn, time.Now())
	return r.Spec, err
}

// request is the whole submit request of the flags at now (gssh's
// clock, which --begin now+1h counts from): the spec, the dependencies
// by name, the array (see jobform.Form.Request).
func (o *submitOptions) request(warn func(string), now time.Time) (service.SubmitRequest, error) {
	wd, err := os.Getwd()
	if err != nil && !filepath.IsAbs(o.workdir) && !strings.HasPrefix(o.workdir, "~") {
		return service.SubmitRequest{}, fmt.Errorf("--workdir: the current directory: %w", err)
	}
	return o.form().Request(warn, now, time.Local, o.environ, wd)
}

func submitRun(ctx context.Context, a *app, opts *submitOptions) error {
	if opts.environ == nil {
		opts.environ = a.environ
	}
	req, err := opts.request(func(w string) { fmt.Fprintln(a.stderr, "gssh: warning:", w) }, a.now())
	if err != nil {
		return err
	}
	if opts.wait && opts.dryRun {
		return errors.New("--wait and --dry-run: a dry run queues nothing to wait for; give one")
	}
	if opts.wait {
		if err := checkDuration("--interval", opts.interval, time.Second, time.Hour); err != nil {
			return err
		}
		if opts.hold {
			return errors.New("--wait and --hold: a held job waits for gssh release, which this command would never give; leave one out")
		}
	}
	res, err := a.service().Submit(ctx, req)
	if err != nil && ctx.Err() != nil {
		if j := res.Job; j.ID != 0 {
			fmt.Fprintf(a.stderr, "gssh: interrupted; job %s is %s (%s); gssh schedule picks it up\n", j.Ref(), j.State, j.Reason)
		} else {
			fmt.Fprintln(a.stderr, "gssh: interrupted before the job was stored: nothing was submitted")
		}
		return errInterrupted
	}
	if err != nil {
		return interrupted(ctx, err)
	}
	if res.PassError != nil && !errors.Is(res.PassError, service.ErrPassBusy) {
		fmt.Fprintf(a.stderr, "gssh: warning: job %s is stored, but its scheduling pass could not run: %v\n", res.Job.Ref(), res.PassError)
	}
	a.warn(res.Problems)
	if res.MemAuto != nil && !opts.json {
		fmt.Fprintln(a.stderr, "gssh: "+memAutoText(res.MemAuto, res.MemPerGPU))
	}
	if opts.json {
		return a.printJSON(res.Doc())
	}
	switch {
	case res.DryRun && res.WouldRun:
		fmt.Fprintf(a.stdout, "would run on %s%s\n", where(res.Placement), firstTask(req))
		if ex := res.Explanation; ex != nil {
			for _, r := range ex.Rejected {
				fmt.Fprintf(a.stdout, "  not %s: %s\n", r.Host, printable(r.Reason.Text))
			}
		}
	case res.DryRun:
		fmt.Fprintf(a.stdout, "would be queued%s: %s\n", firstTask(req), res.Reason)
		if ex := res.Explanation; ex != nil {
			for _, l := range queueLines(ex, res.Reason) {
				fmt.Fprintf(a.stdout, "  %-12s %s\n", l[0]+":", printable(l[1]))
			}
		}
	case len(res.Tasks) > 0:
		fmt.Fprintln(a.stdout, arraySummary(res.Tasks))
	case res.Job.State == job.Running:
		fmt.Fprintf(a.stdout, "job %s running on %s\n", res.Job.Ref(), where(res.Job.Placement))
	default:
		fmt.Fprintf(a.stdout, "job %s %s: %s\n", res.Job.Ref(), stateWord(res.Job), res.Job.Reason)
	}
	if !opts.wait {
		return nil
	}
	ids := []job.ID{res.Job.ID}
	if len(res.Tasks) > 0 {
		ids = nil
		for _, t := range res.Tasks {
			ids = append(ids, t.ID)
		}
	}
	jobs, err := waitFor(ctx, a, ids, opts.interval, func(j job.Job) {
		fmt.Fprintf(a.stderr, "gssh: job %s %s: %s\n", j.Ref(), j.State, j.Reason)
	})
	if err != nil {
		return err
	}
	return jobsStatus(jobs)
}

// firstTask is what a dry run of an array says it planned: its first task.
func firstTask(r service.SubmitRequest) string {
	if len(r.Array) == 0 {
		return ""
	}
	return fmt.Sprintf(" (task %d, the first of %d: a dry run plans one)", r.Array[0], len(r.Array))
}

// arraySummary says what became of an array's tasks: "array 12 (tasks
// 0-7, job ids 12-19): 2 running, 6 queued (no_free_gpu)".
func arraySummary(tasks []job.Job) string {
	a := tasks[0].Spec.Array
	idx := make([]int, len(tasks))
	count := map[string]int{}
	var words []string
	for i, t := range tasks {
		idx[i] = t.Spec.Array.Task
		w := stateWord(t)
		if count[w] == 0 {
			words = append(words, w)
		}
		count[w]++
	}
	var parts []string
	for _, w := range words {
		parts = append(parts, fmt.Sprintf("%d %s", count[w], w))
	}
	limit := ""
	if a.Limit > 0 {
		limit = fmt.Sprintf(", at most %d at once", a.Limit)
	}
	ids := fmt.Sprintf("job ids %d-%d", tasks[0].ID, tasks[len(tasks)-1].ID)
	if len(tasks) == 1 {
		ids = fmt.Sprintf("job id %d", tasks[0].ID)
	}
	slices.Sort(idx)
	return fmt.Sprintf("array %d (tasks %s, %s%s): %s", a.Job, units.Ranges(idx, 2), ids, limit, strings.Join(parts, ", "))
}

// stateWord is a job's state as gssh ps shows it: "held" for a held
// queued job.
func stateWord(j job.Job) string {
	if j.State == job.Queued && j.Hold != nil {
		return "held"
	}
	return string(j.State)
}

// memAutoText says what --mem auto chose, and from which jobs.
func memAutoText(m *job.MemAuto, mem uint64) string {
	if len(m.From) == 0 {
		return "--mem auto: no run of this command of yours in the last 30 days has a sampled peak (gssh serve samples them): the GPUs are taken whole"
	}
	ids := make([]string, len(m.From))
	for i, id := range m.From {
		ids[i] = strconv.FormatUint(uint64(id), 10)
	}
	return fmt.Sprintf("--mem auto: %s per GPU: the highest peak of your last runs of this command (%s, %s) and %.0f %%",
		units.FormatMem(mem), units.Plural(len(ids), "job", "jobs")+" "+strings.Join(ids, ", "), units.FormatMem(m.Peak), job.MemAutoMargin*100)
}
