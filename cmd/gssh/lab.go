package main

import (
	"errors"
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
		Annotations: exits(exitLineUsage, exitLineState),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newLabInitCmd(a))
	return cmd
}

func newLabInitCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make the lab's group, state directory and files, as root",
		Long: `As root, make what the lab inventory's lab: block names: the group (when
missing), the state directory (the pass account's, in the lab group, mode
3770: setgid and sticky) and in it the state file, the pass lock, the event
log and its lock (the pass account's, 0660). What is right already is kept;
an entry that is not gssh's is replaced, and the event log says so. Safe to
run again. The lab inventory must be root's and writable by no one else,
and the host must have fs.protected_hardlinks=1 (else it refuses, exit 3).`,
		Example: `  sudo gssh lab init
  sudo gssh lab init --inventory /etc/gssh/hosts.yaml
  sudo GSSH_INVENTORY=/srv/lab/hosts.yaml gssh lab init`,
		Annotations: exits(exitLineUsage, exitLineState),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			file := a.inventoryPath // the lab inventory: --inventory, else $GSSH_INVENTORY's, else /etc/gssh/hosts.yaml
			if file == "" {
				file = service.DefaultLabInventory
				if env := a.getenv("GSSH_INVENTORY"); env != "" {
					if _, ok := inventory.LabLine(env); ok {
						file = env
					}
				}
			}
			lines, err := service.LabInit(file, a.now)
			for _, l := range lines {
				fmt.Fprintln(a.stdout, l)
			}
			if errors.Is(err, service.ErrNotRoot) {
				return &reported{err: err, code: exitUsage, print: true}
			}
			return err
		},
	}
	return cmd
}
