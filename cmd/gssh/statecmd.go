package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

// newStateCmd is `gssh state`: backup, check and restore of the state file.
func newStateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Back up, check and restore the job state file",
		Long: `Back up the job state file while gssh runs, check a state file, and put a
backup back in place. More: docs/operating.md (Backups and restore).`,
		Example: `  gssh state backup ~/backups/gssh.db
  gssh state check`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newStateBackupCmd(a, nil), newStateCheckCmd(a, nil), newStateRestoreCmd(a, nil))
	return cmd
}

// quietFlag is the --quiet of gssh state's commands.
func quietFlag(c *cobra.Command, quiet *bool) {
	c.Flags().BoolVarP(quiet, "quiet", "q", false, "no progress on stderr")
}

type stateBackupOptions struct {
	file  string // the backup to write
	quiet bool
}

func newStateBackupCmd(a *app, runF func(*stateBackupOptions) error) *cobra.Command {
	opts := &stateBackupOptions{}
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the state file to FILE",
		Long: `Write a consistent copy of the job state file to FILE (mode 0600) while
other gssh commands go on: written beside FILE, then renamed over it, so a
backup is whole or not there. FILE's directory must exist.`,
		Example: `  gssh state backup ~/backups/gssh-$(date +%F).db
  # crontab: a backup every night at 3 (% must be \% in a crontab)
  0 3 * * * gssh state backup ~/backups/gssh-$(date +\%F).db`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        exactArgs(1, "give the file to write, such as gssh state backup ~/backups/gssh.db"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.file = args[0]
			if runF != nil {
				return runF(opts)
			}
			return stateBackupRun(c.Context(), a, opts)
		},
	}
	quietFlag(cmd, &opts.quiet)
	return cmd
}

// stateBackupRun is gssh state backup; see newStateBackupCmd.
func stateBackupRun(ctx context.Context, a *app, opts *stateBackupOptions) error {
	bar := a.newProgress("backing up the state file to "+opts.file, -1, opts.quiet)
	sum, err := a.service().StateBackup(ctx, opts.file)
	bar.Done()
	if err != nil {
		return interrupted(ctx, err)
	}
	fmt.Fprintf(a.stdout, "backed up to %s: %s, schema %d, %s\n", sum.Path, stateJobs(sum.Jobs, sum.Active, sum.JobSeq), sum.Schema, fileSize(sum.Bytes))
	return nil
}

type stateCheckOptions struct {
	file  string // the state file to check; "": the one in use
	quiet bool
}

func newStateCheckCmd(a *app, runF func(*stateCheckOptions) error) *cobra.Command {
	opts := &stateCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Check a state file (default: the state file in use)",
		Long: `Check a job state file without changing it (default: the one in use):
bbolt's consistency check and gssh's own (schema, job ids, indexes, the
fair-share ledger). Each problem is one line; any problem exits 3.`,
		Example: `  gssh state check
  gssh state check ~/backups/gssh-2024-05-01.db`,
		Annotations: exits(usageExit, exitLine{exitState, "problems found, or the file is not a readable gssh state file"}, signalExit, termExit),
		Args:        cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.file = ""
			if len(args) == 1 {
				opts.file = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return stateCheckRun(c.Context(), a, opts)
		},
	}
	quietFlag(cmd, &opts.quiet)
	return cmd
}

// stateCheckRun is gssh state check; see newStateCheckCmd.
func stateCheckRun(ctx context.Context, a *app, opts *stateCheckOptions) error {
	bar := a.newProgress("checking "+cmp.Or(opts.file, "the state file"), -1, opts.quiet)
	r, err := a.service().StateCheck(ctx, opts.file)
	bar.Done()
	if err != nil {
		return interrupted(ctx, err)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(a.stdout, "%s: problem: %s\n", r.Path, p)
	}
	if n := len(r.Problems); n > 0 {
		return &stateProblems{fmt.Errorf("%s: %d %s; restore a backup (gssh state restore), or move it aside to start an empty queue", r.Path, n, units.Plural(n, "problem", "problems"))}
	}
	fmt.Fprintf(a.stdout, "%s: ok: schema %d, cluster %s, %s\n", r.Path, r.Schema, r.ClusterID, stateJobs(r.Jobs, r.Active, r.JobSeq))
	return nil
}

type stateRestoreOptions struct {
	req   service.RestoreRequest // the backup, --force, --wait
	quiet bool
}

func newStateRestoreCmd(a *app, runF func(*stateRestoreOptions) error) *cobra.Command {
	opts := &stateRestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Put a backup in place of the state file, job ids continuing past the workers'",
		Long: `Put BACKUP in place of the job state file, after checking it. Every host is
asked for this queue's job directories, so new job ids continue past the
jobs that ran after the backup was taken. The file replaced is kept as
STATE.before-restore. A host that cannot be asked, problems in the
backup, or another queue's backup refuse it, unless --force.`,
		Example: `  gssh state restore ~/backups/gssh-2024-05-01.db
  gssh state restore --force ~/backups/gssh-2024-05-01.db`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        exactArgs(1, "give the backup to restore, such as gssh state restore ~/backups/gssh-2024-05-01.db"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkDuration("--wait", opts.req.Wait, 0, 24*time.Hour); err != nil {
				return err
			}
			opts.req.Backup = args[0]
			if runF != nil {
				return runF(opts)
			}
			return stateRestoreRun(c.Context(), a, opts.req, opts.quiet)
		},
	}
	cmd.Flags().BoolVar(&opts.req.Force, "force", false, "restore although hosts could not be listed, the backup has problems or is of another queue")
	cmd.Flags().DurationVar(&opts.req.Wait, "wait", 30*time.Second, "how long to wait for a running pass to end (the pass lock)")
	quietFlag(cmd, &opts.quiet)
	return cmd
}

func stateRestoreRun(ctx context.Context, a *app, r service.RestoreRequest, quiet bool) error {
	bar := a.newProgress("restoring "+r.Backup+" (asking the hosts for their job directories)", -1, quiet)
	res, err := a.service().StateRestore(ctx, r)
	bar.Done()
	for _, h := range slices.Sorted(maps.Keys(res.Unreached)) {
		a.warnf(fmt.Sprintf("%s: its job directories could not be listed: %v", h, res.Unreached[h]))
	}
	if err != nil {
		return interrupted(ctx, err) // service.ErrRestoreRefused: exit 3
	}
	for _, p := range res.Backup.Problems {
		a.warnf(fmt.Sprintf("%s: problem restored with it (--force): %s", r.Backup, p))
	}
	fmt.Fprintf(a.stdout, "restored %s as %s: %s\n", r.Backup, res.Path, stateJobs(res.Jobs, res.Active, 0))
	if res.Before != "" {
		fmt.Fprintf(a.stdout, "the state file it replaced is kept as %s\n", res.Before)
	}
	seen := "no job directory of this queue on the workers"
	if len(res.Seen) > 0 {
		var parts []string
		for _, h := range slices.Sorted(maps.Keys(res.Seen)) {
			parts = append(parts, fmt.Sprintf("%s %d", h, res.Seen[h]))
		}
		seen = "the highest job directories: " + strings.Join(parts, ", ")
	}
	fmt.Fprintf(a.stdout, "new job ids start at %d (%s; the backup's last id %d)\n", res.JobSeq+1, seen, res.Backup.JobSeq)
	for _, j := range res.Ran {
		a.warnf(fmt.Sprintf("job %s (%s, %s in the backup at attempt %d) launched after the backup was taken: the next pass fails it rather than run it twice; its later attempts' logs are in ~/.gssh/jobs/%s-%d.* on the workers",
			j.Ref(), j.Spec.Name, j.State, j.Attempt, res.ClusterID, j.ID))
	}
	return nil
}

// fileSize is n bytes in IEC units: "96.0 KiB".
func fileSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB", "TiB"}[i])
}

// stateJobs is "12 jobs (3 not ended), job ids handed out up to 14".
func stateJobs(jobs, active int, seq uint64) string {
	s := fmt.Sprintf("%d %s (%d not ended)", jobs, units.Plural(jobs, "job", "jobs"), active)
	if seq > 0 {
		s += ", job ids handed out up to " + strconv.FormatUint(seq, 10)
	}
	return s
}

// exactArgs is cobra.ExactArgs(n) saying what to give.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return errors.New(what)
		}
		return nil
	}
}
