package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
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
func parseID(s string) (job.ID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a job id (a number, as gssh ps shows)", s)
	}
	return job.ID(n), nil
}

func (a *app) newPsCmd() *cobra.Command {
	var all, asJSON bool
	var userName string
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List jobs: queued, launching and running (-a: all)",
		Long: `List jobs, oldest first: ID, USER, STATE, HOST:GPUS, MEM (per GPU, or
"excl" for whole GPUs), AGE (queued) or RUNTIME, NAME and command.
This reads the state file only; run gssh schedule (or submit) to refresh it.

` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			f := state.Filter{User: userName}
			var jobs []job.Job
			if all {
				jobs, err = st.List(f)
			} else {
				f.States = []job.State{job.Queued, job.Launching, job.Running}
				jobs, err = st.List(f)
			}
			if err != nil {
				return err
			}
			if asJSON {
				if jobs == nil {
					jobs = []job.Job{}
				}
				return a.printJSON(map[string]any{"schema": "gssh.jobs/v1", "jobs": jobs})
			}
			now := time.Now()
			rows := make([][]string, len(jobs))
			for i, j := range jobs {
				rows[i] = []string{strconv.FormatUint(uint64(j.ID), 10), j.User, string(j.State), where(j.Placement), memCell(j.Spec),
					age(j, now), jobName(j)}
			}
			printTable(a.stdout, a.tty, []string{"ID", "USER", "STATE", "HOST:GPUS", "MEM", "AGE/RUNTIME", "NAME/CMD"}, rows)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include ended jobs")
	cmd.Flags().StringVar(&userName, "user", "", "only this user's jobs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
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

func (a *app) loadJob(arg string) (*state.Bolt, job.Job, error) {
	id, err := parseID(arg)
	if err != nil {
		return nil, job.Job{}, err
	}
	st, err := a.openStore()
	if err != nil {
		return nil, job.Job{}, err
	}
	j, err := st.Get(id)
	if err != nil {
		return nil, job.Job{}, fmt.Errorf("%w (see gssh ps -a)", err)
	}
	return st, j, nil
}

func (a *app) newShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show everything known about a job, including why it is pending",
		Long: `Show everything known about a job: what was asked, where it runs, the
pending reason while queued, and how it ended (exit code, signal).

` + exitCodesHelp,
		Args: oneJobID,
		RunE: func(_ *cobra.Command, args []string) error {
			_, j, err := a.loadJob(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(j)
			}
			s := j.Spec
			lines := [][2]string{
				{"id", strconv.FormatUint(uint64(j.ID), 10)}, {"user", j.User}, {"state", string(j.State)}, {"reason", j.Reason},
				{"name", s.Name}, {"command", fmt.Sprintf("%q", s.Argv)}, {"shell", strconv.FormatBool(s.Shell)},
				{"host", s.Host}, {"labels", strings.Join(s.Labels, ",")}, {"gpus", strconv.Itoa(s.GPUs)}, {"mem per gpu", memCell(s)},
				{"workdir", s.Workdir}, {"timeout", durOrNone(s.Timeout)}, {"priority", strconv.Itoa(s.Priority)},
				{"placed on", where(j.Placement)}, {"gpu uuids", strings.Join(j.Placement.GPUs, ",")},
				{"job dir", j.Remote.Dir}, {"pid", pidCell(j.Remote.PID)},
				{"submitted", timeCell(j.SubmittedAt)}, {"started", timeCell(j.StartedAt)}, {"ended", timeCell(j.EndedAt)},
			}
			for _, e := range s.Env {
				lines = append(lines, [2]string{"env", e.Key + "=" + e.Value})
			}
			if j.ExitCode != nil {
				lines = append(lines, [2]string{"exit code", strconv.Itoa(*j.ExitCode)})
			}
			if j.Signal != "" {
				lines = append(lines, [2]string{"signal", j.Signal})
			}
			for _, l := range lines {
				if l[1] != "" {
					fmt.Fprintf(a.stdout, "%-12s %s\n", l[0]+":", printable(l[1]))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job record as JSON")
	return cmd
}

func durOrNone(d time.Duration) string {
	if d == 0 {
		return "none"
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

func (a *app) newLogsCmd() *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output (stdout and stderr); -f follows it until the job ends",
		Long: `Print a job's log (stdout and stderr together, as sbatch does) from its
worker. With -f, keep printing until the job ends, then say on stderr how it
ended.

` + exitCodesHelp,
		Args: oneJobID,
		RunE: func(c *cobra.Command, args []string) error {
			_, j, err := a.loadJob(args[0])
			if err != nil {
				return err
			}
			if j.Placement.Host == "" || (j.Remote.Dir == "" && j.State != job.Launching) {
				return fmt.Errorf("job %d has no log: it has not started (%s: %s)", j.ID, j.State, j.Reason)
			}
			f, err := a.loadFleet()
			if err != nil {
				return err
			}
			defer f.Remote.Close()
			h, ok := f.Inv.Lookup(j.Placement.Host)
			if !ok {
				return fmt.Errorf("job %d ran on %s, which is no longer in the inventory", j.ID, j.Placement.Host)
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			cluster, err := st.ClusterID()
			if err != nil {
				return err
			}
			streamer, ok := f.Runner(h).(launch.Streamer)
			if !ok {
				return fmt.Errorf("host %s cannot stream output", h.Name)
			}
			follow = follow && !j.State.Terminal()
			err = launch.Logs(c.Context(), streamer, h.Name, cluster, j, tail, follow, a.stdout)
			if c.Context().Err() != nil {
				return errInterrupted
			}
			if err == nil && follow {
				// Say how it ended, as the log itself does not.
				if m, perr := launch.Poll(c.Context(), f.Runner(h), h.Name, cluster, []job.Job{j}); perr == nil {
					if st, ok := m[j.ID]; ok && st.State != job.Running {
						fmt.Fprintf(a.stderr, "gssh: job %d %s: %s\n", j.ID, st.State, st.Reason)
					}
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the job ends")
	cmd.Flags().IntVar(&tail, "tail", -1, "print only the last N lines first (-1: all)")
	return cmd
}

func (a *app) newCancelCmd() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel jobs: queued ones are dropped, running ones get SIGTERM, then SIGKILL after --grace",
		Long: `Cancel jobs. A running job's whole process tree gets SIGTERM (its session,
and processes carrying its GSSH_JOB_ID that started sessions of their own),
then SIGKILL after the grace period; gssh cancel returns when they are gone
or the grace has run out.

` + exitCodesHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("give the ids of the jobs to cancel (gssh ps lists them)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var errs []error
			var fl *fleet.Fleet // loaded when a job needs stopping on a worker
			defer func() {
				if fl != nil {
					fl.Remote.Close()
				}
			}()
			for _, arg := range args {
				st, j, err := a.loadJob(arg)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if j.State.Terminal() {
					errs = append(errs, fmt.Errorf("job %d has already ended (%s)", j.ID, j.State))
					continue
				}
				if j.State.Active() {
					if fl == nil {
						if fl, err = a.loadFleet(); err != nil {
							return err
						}
					}
					h, ok := fl.Inv.Lookup(j.Placement.Host)
					if !ok {
						errs = append(errs, fmt.Errorf("job %d: host %s is no longer in the inventory", j.ID, j.Placement.Host))
						continue
					}
					cluster, err := st.ClusterID()
					if err != nil {
						return err
					}
					if _, err := launch.Cancel(c.Context(), fl.Runner(h), h.Name, cluster, j, grace); err != nil {
						errs = append(errs, fmt.Errorf("job %d: %w", j.ID, err))
						continue
					}
				}
				now := time.Now()
				if _, err := st.Update(j.ID, func(x *job.Job) error {
					if x.State.Terminal() {
						return nil
					}
					x.State, x.EndedAt, x.Reason = job.Cancelled, now, "cancelled by "+a.localUser()
					return nil
				}); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(a.stdout, "job %d cancelled\n", j.ID)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL")
	return cmd
}
