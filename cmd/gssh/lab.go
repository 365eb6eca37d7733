package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/service"
)

// newLabCmd is `gssh lab`: setting up a lab's shared queue.
func newLabCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Set up a lab's shared queue (as root)",
		Long: `Set up the shared queue that the lab inventory's lab: block describes
(state, pass_user, group). docs/lab.md says how to set one up.`,
		Example: `  sudo gssh lab init
  sudo gssh lab init --inventory /etc/gssh/hosts.yaml`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newLabInitCmd(a, nil))
	return cmd
}

type labInitOptions struct {
	// inventory is the lab inventory: --inventory, else $GSSH_INVENTORY
	// when it has a lab: block, else service.DefaultLabInventory.
	inventory string
	serve     bool // --serve: the block must say serve: true
}

func newLabInitCmd(a *app, runF func(*labInitOptions) error) *cobra.Command {
	opts := &labInitOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make the lab's group, state directory and files, as root",
		Long: `As root, make what the lab inventory's lab: block names: the group (when
missing), the state directory (the pass account's, in the lab group, 3770:
setgid and sticky; 0750 with serve: true) and in it the state file, the pass
lock, the event log and its lock (the pass account's, 0660; 0600 with serve:
true). What is right is kept; an entry that is not gssh's is replaced. Safe
to run again. The lab inventory must be root's and writable by no one else,
and the host needs fs.protected_hardlinks=1 (else exit 3). docs/lab.md.`,
		Example: `  sudo gssh lab init
  sudo gssh lab init --serve           # a lab: block with serve: true
  sudo gssh lab init --inventory /etc/gssh/hosts.yaml
  sudo GSSH_INVENTORY=/srv/lab/hosts.yaml gssh lab init`,
		Annotations: exits(usageExit, stateExit),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			opts.inventory = a.inventoryPath
			if opts.inventory == "" {
				opts.inventory = a.systemInventory
				if env := a.getenv("GSSH_INVENTORY"); env != "" {
					if _, ok := inventory.LabLine(env); ok {
						opts.inventory = env
					}
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return labInitRun(a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.serve, "serve", false, "set the lab up for gssh serve alone (the lab: block must say serve: true)")
	return cmd
}

// labInitRun is gssh lab init; see newLabInitCmd. Run as a user it fails
// with service.ErrNotRoot (exit 1).
func labInitRun(a *app, opts *labInitOptions) error {
	lines, err := service.LabInit(opts.inventory, opts.serve, a.now)
	for _, l := range lines {
		fmt.Fprintln(a.stdout, l)
	}
	return err
}
