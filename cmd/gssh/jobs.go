package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// passWait is how long a submit-triggered pass waits for the pass lock
// before leaving the job queued (ARCHITECTURE: about 2 s).
const passWait = 2 * time.Second

// statePath is --state, else $GSSH_STATE, else ~/.local/state/gssh/state.db.
func (a *app) statePath() string {
	if a.stateFile != "" {
		return a.stateFile
	}
	if p := a.getenv("GSSH_STATE"); p != "" {
		return p
	}
	return state.DefaultPath(a.home(), a.getenv("XDG_STATE_HOME"))
}

func (a *app) openStore() (*state.Bolt, error) {
	return state.Open(a.statePath(), state.Options{Now: time.Now})
}

// fleetAndStore loads the fleet and opens the state store; the caller
// closes the fleet's pool.
func (a *app) fleetAndStore() (*fleet.Fleet, *state.Bolt, error) {
	f, err := a.loadFleet()
	if err != nil {
		return nil, nil, err
	}
	st, err := a.openStore()
	if err != nil {
		f.Remote.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func (a *app) controller(f *fleet.Fleet, st *state.Bolt) *control.Controller {
	return &control.Controller{Store: st, Fleet: f, Now: time.Now, ProbeTimeout: a.probeTimeout}
}

// runPass runs one pass under the pass lock, waiting up to wait for it.
func (a *app) runPass(ctx context.Context, f *fleet.Fleet, st *state.Bolt, reports []fleet.Report, wait time.Duration) (control.Result, error) {
	unlock, err := control.LockPass(ctx, a.statePath()+".pass.lock", wait)
	if err != nil {
		return control.Result{}, err
	}
	defer unlock()
	return a.controller(f, st).Pass(ctx, reports)
}

type submitOptions struct {
	host     string
	labels   []string
	gpus     int
	mem      string
	name     string
	workdir  string
	env      []string
	timeout  string
	priority int
	dryRun   bool
	json     bool
	argv     []string
}

func (a *app) newSubmitCmd() *cobra.Command {
	opts := &submitOptions{}
	cmd := &cobra.Command{
		Use:   "submit [flags] -- CMD [ARGS...]",
		Short: "Queue a job and start it at once on a GPU with room for it",
		Long: `Queue a job, then run one scheduling pass: the job starts on a GPU that has
room for it, or stays queued with the reason.

After --, several words are a command whose every word reaches the job
literally; a single string is your own shell command, run by sh -c on the
worker (as ssh HOST 'cmd' would).

--mem is GPU memory per GPU (not host RAM, unlike Slurm's --mem): a bare
number is MiB; K, M, G, T (optionally followed by B or iB) are binary
multiples; fractions are allowed (0.5G = 512 MiB). Without --mem the job
gets its GPUs exclusively. --timeout is the walltime: 90m, 2h30m, or
Slurm's [D-]HH:MM:SS.

The job runs as your SSH login user on the worker, in --workdir (default:
the current directory, which must exist there too; '~' is the worker's
home), with CUDA_VISIBLE_DEVICES set to its GPUs' UUIDs, GSSH_JOB_ID, and
only the --env values of your environment. stdout and stderr go to one log
(gssh logs). CUDA_VISIBLE_DEVICES is a convention, not enforcement.

` + exitCodesHelp,
		Example: `  gssh submit --mem 8G -- python train.py --lr 3e-4
  gssh submit --host gpu01 --gpus 2 --timeout 12:00:00 -- ./run.sh
  gssh submit -- 'cd ~/proj && make train 2>&1 | tee out.txt'`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.argv = args
			return a.submitRun(c.Context(), c, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.host, "host", "auto", "host to run on, or auto")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.IntVar(&opts.gpus, "gpus", 1, "number of GPUs, all on one host")
	fl.StringVar(&opts.mem, "mem", "", "GPU memory per GPU, e.g. 8G, 8000M, 0.5G (default: whole GPUs, exclusively)")
	fl.StringVar(&opts.mem, "gpu-mem", "", "alias of --mem")
	fl.StringVar(&opts.name, "name", "", "job name (default: the command's first word)")
	fl.StringVar(&opts.workdir, "workdir", "", "directory the job runs in on the worker (default: the current directory; '~' = the worker's home)")
	fl.StringArrayVar(&opts.env, "env", nil, "K=V to set in the job's environment (repeatable)")
	fl.StringVar(&opts.timeout, "timeout", "", "walltime: 90m, 2h, or [D-]HH:MM:SS (default: none)")
	fl.IntVar(&opts.priority, "priority", 5, "0 (first) to 10 (last)")
	fl.BoolVar(&opts.dryRun, "dry-run", false, "check and say where the job would go, without queueing it")
	fl.BoolVar(&opts.json, "json", false, "print the result as JSON")
	return cmd
}

// spec turns the flags into a job spec, or says what is wrong with them.
func (a *app) spec(opts *submitOptions) (job.Spec, error) {
	s := job.Spec{Argv: opts.argv, Shell: len(opts.argv) == 1, Host: opts.host, Labels: opts.labels, GPUs: opts.gpus,
		Priority: opts.priority, Name: opts.name, Workdir: opts.workdir}
	if len(opts.argv) == 0 {
		return s, errors.New("empty command: give it after --, e.g. gssh submit --mem 8G -- python train.py")
	}
	if s.Host == "" {
		s.Host = "auto"
	}
	if s.GPUs < 1 {
		return s, fmt.Errorf("--gpus %d: a job needs at least 1 GPU", s.GPUs)
	}
	if s.Priority < 0 || s.Priority > 10 {
		return s, fmt.Errorf("--priority %d: give 0 (first) to 10 (last)", s.Priority)
	}
	if opts.mem != "" {
		m, err := sched.ParseMem(opts.mem)
		if err != nil {
			return s, fmt.Errorf("--mem: %w", err)
		}
		if m < 256*sched.MiB && strings.IndexFunc(opts.mem, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			fmt.Fprintf(a.stderr, "gssh: warning: --mem %s means %s (a bare number is MiB, as in Slurm); did you mean %sG?\n", opts.mem, sched.FormatMem(m), opts.mem)
		}
		s.MemPerGPU = m
	}
	if opts.timeout != "" {
		d, err := sched.ParseWalltime(opts.timeout)
		if err != nil {
			return s, fmt.Errorf("--timeout: %w", err)
		}
		s.Timeout = d
	}
	for _, kv := range opts.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return s, fmt.Errorf("--env %q: give KEY=VALUE", kv)
		}
		s.Env = append(s.Env, job.EnvVar{Key: k, Value: v})
	}
	if s.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return s, fmt.Errorf("--workdir: the current directory: %w", err)
		}
		s.Workdir = wd
	}
	if s.Name == "" {
		s.Name = filepath.Base(strings.Fields(opts.argv[0] + " x")[0])
	}
	return s, nil
}

func (a *app) submitRun(ctx context.Context, c *cobra.Command, opts *submitOptions) error {
	if c.Flags().Changed("mem") && c.Flags().Changed("gpu-mem") {
		return errors.New("--mem and --gpu-mem are the same flag: give one")
	}
	s, err := a.spec(opts)
	if err != nil {
		return err
	}
	if err := launch.CheckSpec(s); err != nil {
		return err
	}
	f, st, err := a.fleetAndStore()
	if err != nil {
		return err
	}
	defer f.Remote.Close()
	active, err := st.Active()
	if err != nil {
		return err
	}
	reports := f.Probe(ctx, f.Inv.Hosts, fleet.ProbeOptions{Timeout: a.probeTimeout})
	if ctx.Err() != nil {
		return errInterrupted
	}
	nodes := control.Nodes(f.Inv, reports, active)
	if err := sched.Validate(nodes, control.Request(s)); err != nil {
		return err
	}
	if opts.dryRun {
		d := sched.Place(nodes, control.Request(s))
		if opts.json {
			return a.printJSON(map[string]any{"dry_run": true, "would_run": d.OK, "host": d.Placement.Host,
				"gpus": orEmpty(d.Placement.GPUs), "gpu_indexes": orEmptyInts(d.Placement.Indexes), "reason": d.Reason})
		}
		if d.OK {
			fmt.Fprintf(a.stdout, "would run on %s\n", where(d.Placement))
		} else {
			fmt.Fprintf(a.stdout, "would be queued: %s\n", d.Reason)
		}
		return nil
	}
	j, err := st.Submit(job.Job{User: a.localUser(), Spec: s, Reason: "waiting for the first scheduling pass"})
	if err != nil {
		return err
	}
	res, perr := a.runPass(ctx, f, st, reports, passWait)
	if got, err := st.Get(j.ID); err == nil {
		j = got
	}
	if ctx.Err() != nil {
		fmt.Fprintf(a.stderr, "gssh: interrupted; job %d is %s (%s); gssh schedule picks it up\n", j.ID, j.State, j.Reason)
		return errInterrupted
	}
	if perr != nil && !errors.Is(perr, control.ErrPassBusy) {
		return fmt.Errorf("job %d is queued, but the scheduling pass failed: %w", j.ID, perr)
	}
	if errors.Is(perr, control.ErrPassBusy) {
		j.Reason = "another scheduling pass is running; the next pass (gssh schedule) will place it"
	}
	for _, e := range res.Errors {
		fmt.Fprintln(a.stderr, "gssh: warning:", e)
	}
	if opts.json {
		return a.printJSON(submitDoc(j))
	}
	if j.State == job.Running {
		fmt.Fprintf(a.stdout, "job %d running on %s\n", j.ID, where(j.Placement))
	} else {
		fmt.Fprintf(a.stdout, "job %d %s: %s\n", j.ID, j.State, j.Reason)
	}
	return nil
}

func submitDoc(j job.Job) map[string]any {
	return map[string]any{"id": j.ID, "state": j.State, "host": j.Placement.Host, "gpus": orEmpty(j.Placement.GPUs),
		"gpu_indexes": orEmptyInts(j.Placement.Indexes), "reason": j.Reason}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
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

func (a *app) newScheduleCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run one scheduling pass (for cron or a systemd timer)",
		Long: `Run one pass: notice jobs that ended (exit code, signal, lost), stop jobs past
their walltime, then start queued jobs in priority and submit order where
they fit. Passes are serialised by a lock next to the state file.

` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			f, st, err := a.fleetAndStore()
			if err != nil {
				return err
			}
			defer f.Remote.Close()
			res, err := a.runPass(c.Context(), f, st, nil, wait)
			if err != nil {
				return err
			}
			for _, j := range res.Finished {
				fmt.Fprintf(a.stdout, "job %d %s: %s\n", j.ID, j.State, j.Reason)
			}
			for _, j := range res.Started {
				fmt.Fprintf(a.stdout, "job %d running on %s\n", j.ID, where(j.Placement))
			}
			for _, j := range res.Pending {
				fmt.Fprintf(a.stdout, "job %d queued: %s\n", j.ID, j.Reason)
			}
			for _, e := range res.Errors {
				fmt.Fprintln(a.stderr, "gssh: warning:", e)
			}
			if len(res.Errors) > 0 {
				return partialError{failed: len(res.Errors), total: len(res.Errors)}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for another pass to finish")
	return cmd
}
