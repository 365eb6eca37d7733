package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/slurmconf"
	"github.com/gssh/gssh/units"
)

type slurmConfOptions struct {
	out        string
	hosts      []string
	labels     []string
	force      bool
	autodetect bool
}

func newSlurmConfCmd(a *app, runF func(*slurmConfOptions) error) *cobra.Command {
	opts := &slurmConfOptions{}
	cmd := &cobra.Command{
		Use:   "slurm-conf",
		Short: "Write slurm.conf, gres.conf and a sacctmgr script describing the probed hosts",
		Long: `Probe the hosts (all, or those --host and --label select) and write what Slurm needs
to describe them: slurm.conf's node lines (CPUs, RealMemory, Gres=gpu:TYPE:N, Feature= the
labels) with a minimal header and a default partition, gres.conf (File=/dev/nvidiaN; a MIG
host's AutoDetect=nvml), and sacctmgr.sh giving the policy users their weights as shares.
Without --out all three are printed. A host that cannot be probed is left out, with a
warning; lines to review by hand are marked REVIEW (docs/operating.md, "Moving to Slurm").`,
		Example: `  gssh slurm-conf
  gssh slurm-conf --out /tmp/slurm --label a100
  gssh slurm-conf --out /etc/slurm --force --autodetect`,
		Annotations: exits(usageExit, exitLine{exitPartial, "no host could be described (each one's warning says why)"}, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkHostFlag(c, opts.hosts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return slurmConfRun(c, a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.out, "out", "", "write DIR/slurm.conf, DIR/gres.conf and DIR/sacctmgr.sh instead of printing them")
	fl.StringSliceVar(&opts.hosts, "host", nil, "only these hosts (repeat or comma-separate)")
	fl.StringSliceVar(&opts.labels, "label", nil, "only hosts carrying every one of these labels")
	fl.BoolVar(&opts.force, "force", false, "with --out: overwrite files that exist")
	fl.BoolVar(&opts.autodetect, "autodetect", false, "gres.conf: AutoDetect=nvml for every node (slurmd built with NVML)")
	return cmd
}

// slurmConfNames are the files gssh slurm-conf writes, in order.
var slurmConfNames = []string{"slurm.conf", "gres.conf", "sacctmgr.sh"}

func slurmConfRun(c *cobra.Command, a *app, opts *slurmConfOptions) error {
	ctx := c.Context()
	if opts.out != "" && !opts.force {
		if err := refuseExisting(opts.out); err != nil {
			return err
		}
	}
	doc, err := a.service().GPUs(ctx, service.HostQuery{Hosts: opts.hosts, Labels: opts.labels})
	var pe *service.PartialError
	if err != nil && !errors.As(err, &pe) {
		return interrupted(ctx, err)
	}
	policy, err := a.slurmPolicy()
	if err != nil {
		return err
	}
	hosts := slurmHosts(doc.Hosts, a.warnf)
	hostname, _ := os.Hostname()
	short, _, _ := strings.Cut(hostname, ".")
	opt := slurmconf.Options{Controller: short, AutoDetect: opts.autodetect, HalfLife: policy.FairShare.HalfLife,
		Window: policy.FairShare.Window, FairShareWeight: policy.Weights.FairShare, AgeWeight: policy.Weights.Age,
		SizeWeight: policy.Weights.Size}
	for _, name := range slices.Sorted(maps.Keys(policy.Users)) {
		opt.Users = append(opt.Users, slurmconf.User{Name: name, Weight: policy.Weight(name)})
	}
	files := slurmconf.Generate(hosts, opt)
	for _, l := range files.Left {
		a.warnf("left out " + l)
	}
	if len(files.Nodes) == 0 {
		fmt.Fprintf(a.stderr, "gssh: no host could be described: of %d selected, none could be probed\n", len(doc.Hosts))
		return &service.PartialError{Failed: len(doc.Hosts), Total: len(doc.Hosts)}
	}
	texts := []string{files.SlurmConf, files.GresConf, files.Sacctmgr}
	if opts.out == "" {
		for i, name := range slurmConfNames {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			fmt.Fprintf(a.stdout, "# ==== %s ====\n%s", name, texts[i])
		}
		return nil
	}
	if err := os.MkdirAll(opts.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for i, name := range slurmConfNames {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		p := filepath.Join(opts.out, name)
		if err := writeFileMode(p, texts[i], mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "wrote %s: %d %s (%s)\n", strings.Join(joinAll(opts.out, slurmConfNames), ", "), len(files.Nodes),
		units.Plural(len(files.Nodes), "node", "nodes"), strings.Join(files.Nodes, ", "))
	return nil
}

// refuseExisting is the error of --out without --force where one of the
// files exists already.
func refuseExisting(dir string) error {
	var there []string
	for _, p := range joinAll(dir, slurmConfNames) {
		if _, err := os.Lstat(p); err == nil {
			there = append(there, p)
		}
	}
	if len(there) > 0 {
		return fmt.Errorf("%s exists already: give --force to overwrite, or another --out", strings.Join(there, ", "))
	}
	return nil
}

func joinAll(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

// writeFileMode writes text to p with mode, whatever the umask (a file
// there already takes the mode too).
func writeFileMode(p, text string, mode fs.FileMode) error {
	if err := os.WriteFile(p, []byte(text), mode); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// slurmPolicy is the inventory's policy, with its defaults (none: the
// default policy).
func (a *app) slurmPolicy() (sched.Policy, error) {
	path, err := inventory.Locate(a.inventoryPath, a.getenv("GSSH_INVENTORY"), a.home(), a.systemInventory)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return sched.DefaultPolicy().WithDefaults(), nil
	case err != nil:
		return sched.Policy{}, err
	}
	inv, err := inventory.Load(path)
	if err != nil {
		return sched.Policy{}, err
	}
	return inv.Policy.Plan.WithDefaults(), nil
}

// slurmHosts are the hosts of a probe that can be described: those whose
// GPUs were read (ok, degraded, or no GPUs at all). Each other one is
// warned of, with why.
func slurmHosts(probed []service.HostGPUs, warn func(string)) []slurmconf.Host {
	var out []slurmconf.Host
	for _, h := range probed {
		switch h.State {
		case gpuinfo.HostOK, gpuinfo.HostDegraded, gpuinfo.HostNoDevices:
		default:
			why := string(h.State)
			if h.Error != "" {
				why += ": " + oneLine(h.Error)
			}
			warn(fmt.Sprintf("left out %s: it could not be probed (%s)", h.Host, why))
			continue
		}
		sh := slurmconf.Host{Name: h.Host, Labels: h.Labels, GPUs: h.GPUs}
		sh.Addr, sh.Via = nodeAddr(h.Address)
		if hi := h.HostInfo; hi != nil {
			sh.CPUs, sh.MemTotal = hi.CPUs, hi.MemTotal
		}
		out = append(out, sh)
	}
	return out
}

// nodeAddr reads the host and jump hosts of an address as gssh hosts
// prints it ("alice@10.0.0.12:22 via bastion"): "" for a local host.
func nodeAddr(address string) (string, []string) {
	if address == "local" || address == "?" || address == "" {
		return "", nil
	}
	hostPort, via, _ := strings.Cut(address, " via ")
	if i := strings.LastIndex(hostPort, "@"); i >= 0 {
		hostPort = hostPort[i+1:]
	}
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	var jumps []string
	if via != "" {
		jumps = strings.Split(via, ",")
	}
	return host, jumps
}
