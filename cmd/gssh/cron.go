package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

func newCronCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "Submit a job on a schedule (every night at 2, every 6 hours), from gssh serve",
		Long: `A scheduled job is a gssh submit that gssh serve makes each time its cron spec
comes round: five fields, minute hour day-of-month month day-of-week, in this
host's time zone, or @daily, @hourly, @every 6h. Each run is a new job of
yours; a time missed while no gssh serve ran is not made up.`,
		Example: `  gssh cron add '0 2 * * *' --gpus 4 --mem 20G -- python nightly.py
  gssh cron list
  gssh cron remove 0a1b2c3d`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newCronAddCmd(a), newCronListCmd(a), newCronRemoveCmd(a))
	return cmd
}

func newCronAddCmd(a *app) *cobra.Command {
	opts := &submitOptions{}
	cmd := &cobra.Command{
		Use:   "add SPEC [submit flags] -- CMD [ARGS...]",
		Short: "Schedule a job: gssh submit's flags and command, submitted each time SPEC comes round",
		Long: `Schedule a job: SPEC (quote it: '0 2 * * *') then gssh submit's flags and,
after --, the command. They are checked now as gssh submit checks them; gssh
serve submits the job, as you, each time SPEC comes round.`,
		Example: `  gssh cron add '0 2 * * *' --gpus 4 --mem 20G -- python nightly.py
  gssh cron add '@every 6h' --host gpu01 --mem 8G -- ./eval.sh`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 1 && c.ArgsLenAtDash() != -1 || len(args) < 2 {
				return errors.New("give the cron spec, quoted, then the flags, then -- and the command: gssh cron add '0 2 * * *' --mem 8G -- python nightly.py")
			}
			opts.argv = args[1:]
			if err := checkMemFlags(c, opts); err != nil {
				return err
			}
			opts.environ = a.environ
			req, err := opts.request(func(w string) { fmt.Fprintln(a.stderr, "gssh: warning:", w) }, a.now())
			if err != nil {
				return err
			}
			e, err := a.service().AddCron(c.Context(), service.CronRequest{Schedule: args[0], Submit: req})
			if err != nil {
				return interrupted(c.Context(), err)
			}
			fmt.Fprintf(a.stdout, "scheduled job %s: %s, next at %s (gssh serve submits it)\n", e.ID, e.Schedule, timeCell(e.Next))
			return nil
		},
	}
	fl := cmd.Flags()
	addJobFlags(fl, opts)
	addQueueFlags(fl, opts)
	return cmd
}

func newCronListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the scheduled jobs: ID, USER, SCHEDULE, NEXT, LAST (job or failure), NAME/CMD",
		Example: `  gssh cron list
  gssh cron list --json | jq '.crons[] | {id, next}'`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			doc, err := a.service().Crons(c.Context())
			if err != nil && !errors.Is(err, state.ErrBadRecord) {
				return interrupted(c.Context(), err)
			}
			if err != nil {
				fmt.Fprintln(a.stderr, "gssh: warning:", err)
			}
			if asJSON {
				return a.printJSON(doc)
			}
			rows := make([][]string, 0, len(doc.Crons))
			for _, e := range doc.Crons {
				last := "-"
				switch {
				case e.LastErr != "":
					last = "failed: " + e.LastErr
				case e.LastJob != 0:
					last = fmt.Sprintf("job %d at %s", e.LastJob, timeCell(e.LastRun))
				}
				name := strings.Join(e.Spec.Argv, " ")
				if e.Spec.Name != "" {
					name = e.Spec.Name + ": " + name
				}
				rows = append(rows, []string{e.ID, e.User, e.Schedule, timeCell(e.Next), printable(last), printable(name)})
			}
			return printTable(a.stdout, a.tty, []string{"ID", "USER", "SCHEDULE", "NEXT", "LAST", "NAME/CMD"}, rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema "+service.CronSchema+")")
	return cmd
}

func newCronRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID...",
		Short: "Remove scheduled jobs (the jobs they submitted stay)",
		Example: `  gssh cron remove 0a1b2c3d
  gssh cron remove $(gssh cron list --json | jq -r '.crons[].id')`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			gone, err := a.service().RemoveCrons(c.Context(), args)
			if err != nil {
				return interrupted(c.Context(), err)
			}
			for _, g := range gone {
				fmt.Fprintf(a.stdout, "scheduled job %s removed (%s)\n", g.ID, g.Schedule)
			}
			return nil
		},
	}
}
