package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/jobform"
	"github.com/gssh/gssh/service"
)

type updateOptions struct {
	names []string // the jobs as given: ids, array ids, ARRAY_TASK
	// req is the change the flags ask for (nil fields: left as they
	// are); its IDs are set once names are resolved.
	req service.UpdateRequest
	// The flags as given.
	priority      int
	timeout, mem  string
	cpus, hostMem string
	name          string
	logLimit      string
}

func newUpdateCmd(a *app, runF func(*updateOptions) error) *cobra.Command {
	opts := &updateOptions{}
	cmd := &cobra.Command{
		Use:   "update ID... [flags]",
		Short: "Change queued jobs: priority, walltime, memory, CPUs, name (scontrol update)",
		Long: `Change queued jobs, as scontrol update does, then run one scheduling pass
(a job may start at once). An array's id changes every task. Running and
ended jobs cannot be changed; a --mem, --cpus or --host-mem no host could
ever give is refused, as at submit.`,
		Example: `  gssh update 7 --priority 3
  gssh update 12 --timeout 4:00:00 --mem 16G`,
		Annotations: exits(usageExit, stateExit, signalExit, termExit),
		Args:        needIDs("update"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := opts.request(c, a.warnf); err != nil {
				return err
			}
			if _, err := service.ParseRefs(args); err != nil {
				return err // before anything is updated
			}
			opts.names = args
			if runF != nil {
				return runF(opts)
			}
			return updateRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.priority, "priority", 0, "the new priority: 0 (first) to 10 (last); 0-3 are admin bands (see gssh submit --help)")
	fl.StringVar(&opts.timeout, "timeout", "", "walltime: 90m, 2h, or [D-]HH:MM:SS")
	fl.StringVar(&opts.mem, "mem", "", "GPU memory per GPU, such as 8G")
	fl.StringVar(&opts.name, "name", "", "job name")
	fl.StringVar(&opts.cpus, "cpus", "", "host CPUs to book (Slurm's --cpus-per-task)")
	fl.StringVar(&opts.hostMem, "host-mem", "", "host memory to book, such as 64G (Slurm's --mem)")
	fl.StringVar(&opts.logLimit, "log-limit", "", "cap the job's log at this size, such as 1G")
	return cmd
}

// request reads the flags c was given into o.req, refusing bad values
// and a command line that changes nothing; warn is told of a size that
// may mean GiB (see jobform.Mem).
func (o *updateOptions) request(c *cobra.Command, warn func(string)) error {
	fl := c.Flags()
	var u jobform.Update
	for _, f := range []struct {
		flag string
		to   **string
		v    *string
	}{{"timeout", &u.Timeout, &o.timeout}, {"mem", &u.Mem, &o.mem}, {"name", &u.Name, &o.name}, {"cpus", &u.CPUs, &o.cpus},
		{"host-mem", &u.HostMem, &o.hostMem}, {"log-limit", &u.LogLimit, &o.logLimit}} {
		if fl.Changed(f.flag) {
			*f.to = f.v
		}
	}
	if fl.Changed("priority") {
		u.Priority = &o.priority
	}
	req, err := u.Request(warn)
	o.req = req
	return err
}

// updateRun is gssh update; see newUpdateCmd.
func updateRun(ctx context.Context, a *app, opts *updateOptions) error {
	ids, arrays, err := a.resolve(ctx, opts.names)
	if err != nil {
		return err
	}
	r := opts.req
	r.IDs = ids
	res, err := a.service().Update(ctx, r)
	if err != nil {
		return interrupted(ctx, err)
	}
	return a.printHolds(res, arrays, func(j job.Job) string {
		if j.State == job.Running {
			return fmt.Sprintf("job %s updated, running on %s", j.Ref(), where(j.Placement))
		}
		return fmt.Sprintf("job %s updated: %s: %s", j.Ref(), stateWord(j), j.Reason)
	})
}
