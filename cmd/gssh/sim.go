package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/fakelab"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sim"
	"github.com/gssh/gssh/sim/trace"
	"github.com/gssh/gssh/units"
)

type simOptions struct {
	trace       string
	lab         string
	policies    string
	load        float64
	fill        float64
	users       int
	usersFrom   string
	walltime    string
	fracOf      string
	priorityMap string
	reserve     float64
	reserveSet  bool
	json        bool
	plot        string
	quiet       bool // --quiet: no progress on stderr
}

func newSimCmd(a *app, runF func(*simOptions) error) *cobra.Command {
	opts := &simOptions{}
	cmd := &cobra.Command{
		Use:   "sim --trace FILE --lab SPEC",
		Short: "Replay a job trace through gssh's scheduler and compare policies",
		Long: `Replay a job trace (normalized CSV) through gssh's own scheduling pass on
a virtual clock, with simulated workers (no SSH, no sleeping), and compare
policies side by side: gssh, fifo, fifo-backfill, firstfit. The lab is
HOSTSxGPUSxMODEL-MEM groups, or a saved gssh gpus --json. --load scales
arrivals to a load; --fill runs the fragmentation experiment instead.
Progress goes to stderr on a terminal (not with --quiet). More:
docs/simulator.md.`,
		Example: `  gssh sim --trace itp-cluster05.norm.csv --lab 2x8xV100-32G --users 20 --load 1.3 --plot itp.svg
  gssh gpus --json > lab.json && gssh sim --trace itp-cluster05.norm.csv --lab lab.json --users 20
  gssh sim --trace philly.norm.csv --users-from philly.csv:cluster --lab 32x8xV100-32G --json
  gssh sim --trace alibaba-v2023.norm.csv --lab 128x8xG2-16G --fill 1.3`,
		Annotations: exits(usageExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.reserveSet = c.Flags().Changed("reserve")
			if os.Getenv("GOGC") == "" {
				// A replay makes short-lived garbage by the gigabyte over a
				// live heap of megabytes: collecting a quarter as often
				// takes a third off its time (GOGC=100 restores Go's rate).
				debug.SetGCPercent(400)
			}
			switch {
			case opts.trace == "":
				return errors.New("--trace: give the trace file (a normalized CSV)")
			case opts.lab == "":
				return errors.New("--lab: give the lab, such as 4x8xA100-80G")
			case c.Flags().Changed("load") && !(opts.load > 0 && opts.load <= 1000):
				return fmt.Errorf("--load %v: give a load above 0 and at most 1000 (1.0: the lab's GPUs are asked for, on average, as many as it has)", opts.load)
			case c.Flags().Changed("fill") && !(opts.fill > 0 && opts.fill <= 100):
				return fmt.Errorf("--fill %v: give a demand above 0 and at most 100, as a multiple of the lab's GPUs (such as 1.3)", opts.fill)
			case opts.plot != "" && opts.fill > 0:
				return errors.New("--plot draws a replay over time; --fill places jobs with no clock: give one")
			case opts.fill > 0 && fillIgnores(c) != "":
				return fmt.Errorf("%s: --fill places jobs with no clock, no users and no policy order (only the two placements): leave it out", fillIgnores(c))
			case a.inventoryPath != "" && !strings.HasSuffix(opts.lab, ".json"):
				return fmt.Errorf("--inventory is read only for a saved lab (--lab FILE.json); a lab spec (%s) keeps no reserve and the default policy", opts.lab)
			case opts.users != 0 && opts.usersFrom != "":
				return errors.New("--users and --users-from: give one")
			case opts.users < 0 || opts.users > trace.MaxMadeUpUsers:
				return fmt.Errorf("--users %d: give 1 to %d", opts.users, trace.MaxMadeUpUsers)
			}
			if runF != nil {
				return runF(opts)
			}
			return simRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.trace, "trace", "", "the trace: a normalized CSV")
	fl.StringVar(&opts.lab, "lab", "", "the lab: HOSTSxGPUSxMODEL-MEM groups, comma-separated; demo (gssh demo's); or a saved gssh gpus --json (FILE.json)")
	fl.StringVar(&opts.policies, "policy", "gssh,fifo,fifo-backfill,firstfit", "the policies to compare, comma-separated (also: fairshare-only, age-size, deep; docs/simulator.md)")
	fl.Float64Var(&opts.load, "load", 0, "scale arrivals to this load on the lab (default: as the trace is)")
	fl.Float64Var(&opts.fill, "fill", 0, "run the fragmentation experiment up to this demand (× the lab's GPUs)")
	fl.IntVar(&opts.users, "users", 0, "make up N users for a trace without any (job i: user i mod N)")
	fl.StringVar(&opts.usersFrom, "users-from", "", "read users from a raw file's column, RAW.csv:COLUMN")
	fl.StringVar(&opts.walltime, "walltime", "x2", "each job's walltime: x2, exact, xN, none, or a duration")
	fl.StringVar(&opts.fracOf, "frac-of", "", "the GPU memory a fractional job asks a fraction of (default: the lab's smallest GPU)")
	fl.StringVar(&opts.priorityMap, "priority-map", "", "map the trace's priority classes to priorities, such as LS=4,BE=6 (default: all 5)")
	fl.Float64Var(&opts.reserve, "reserve", 0, "GPU memory kept back on each simulated GPU, in percent")
	fl.BoolVar(&opts.json, "json", false, "print JSON")
	fl.BoolVarP(&opts.quiet, "quiet", "q", false, "no progress on stderr")
	fl.StringVar(&opts.plot, "plot", "", "also write an SVG plot to this file: jobs waiting and GPUs booked over time, a line per policy (drawn by gssh-plot: beside gssh, on PATH or $GSSH_PLOT)")
	return cmd
}

// fillIgnores names the flags given that --fill does nothing with.
func fillIgnores(c *cobra.Command) string {
	var given []string
	for _, f := range []string{"load", "policy", "walltime", "users", "users-from", "priority-map"} {
		if c.Flags().Changed(f) {
			given = append(given, "--"+f)
		}
	}
	return strings.Join(given, ", ")
}

func simRun(ctx context.Context, a *app, opts *simOptions) error {
	var plotter string
	if opts.plot != "" {
		if err := checkPlotPath(opts.plot); err != nil {
			return err
		}
		p, err := a.findPlotter()
		if err != nil {
			return err
		}
		plotter = p
	}
	hosts, own, err := a.simLab(opts)
	if err != nil {
		return err
	}
	t, err := readTrace(opts.trace)
	if err != nil {
		return err
	}
	switch {
	case opts.users > 0:
		err = t.AssignUsers(opts.users)
	case opts.usersFrom != "":
		file, column, ok := strings.Cut(opts.usersFrom, ":")
		if !ok || file == "" || column == "" {
			return fmt.Errorf("--users-from %q: give RAW.csv:COLUMN, such as philly.csv:cluster", opts.usersFrom)
		}
		f, ferr := os.Open(file)
		if ferr != nil {
			return fmt.Errorf("--users-from: %w", ferr)
		}
		err = t.UsersFrom(file, f, column)
		f.Close()
	}
	if err != nil {
		return err
	}
	conv := sim.Convert{FracOf: sim.SmallestGPU(hosts)}
	if opts.fracOf != "" {
		if conv.FracOf, err = units.ParseMem(opts.fracOf); err != nil {
			return fmt.Errorf("--frac-of: %w", err)
		}
	}
	if conv.Walltime, err = sim.ParseWalltime(opts.walltime); err != nil {
		return err
	}
	if opts.priorityMap != "" {
		if conv.Priorities, err = sim.ParsePriorityMap(opts.priorityMap); err != nil {
			return err
		}
	}
	if opts.fill > 0 {
		return simFill(a, opts, hosts, t, conv)
	}
	policies, err := sim.ParsePolicies(opts.policies)
	if err != nil {
		return err
	}
	if own != nil {
		for i := range policies {
			if policies[i].Name == "gssh" {
				policies[i].Policy, policies[i].About = own.Policy.Plan, "the policy: block of "+own.File
				if d := own.Policy.Plan.DefaultTimeout; d > 0 {
					policies[i].About += fmt.Sprintf(" (its default_timeout %s stops a job without --timeout; --walltime %s sets the others)", d, opts.walltime)
				}
			}
		}
	}
	bar := a.newProgress(fmt.Sprintf("replaying %d jobs, %d policies", len(t.Jobs), len(policies)), int64(len(t.Jobs)*len(policies)), opts.quiet)
	res, err := sim.Compare(ctx, sim.Setup{Lab: opts.lab, Hosts: hosts, Trace: t, Policies: policies, Load: opts.load, Convert: conv, Progress: bar.Add})
	bar.Done()
	if err != nil {
		return interrupted(ctx, err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(a.stderr, "gssh: warning:", w)
	}
	if opts.plot != "" {
		if err := writePlot(ctx, plotter, opts.plot, res); err != nil {
			return err
		}
	}
	if opts.json {
		return a.printJSON(res)
	}
	return a.printComparison(res)
}

// writePlot writes c's SVG plot, drawn by plotter (gssh-plot), to path,
// whole or not at all (a temporary file renamed into place).
func writePlot(ctx context.Context, plotter, path string, c *sim.Comparison) error {
	svg, err := drawPlot(ctx, plotter, c)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	target, mode, err := plotTarget(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("--plot %s: cannot write in %s: %w", path, filepath.Dir(target), errors.Unwrap(err))
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(svg)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return nil
}

// plotTarget is where --plot path writes (through a symlink, the file it
// names) and the mode to give it (an existing file's, else 0644). A path
// that is not a regular file (a directory, a device) is an error.
func plotTarget(path string) (string, os.FileMode, error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	fi, err := os.Stat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return target, 0o644, nil
	case err != nil:
		return "", 0, fmt.Errorf("--plot %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return "", 0, fmt.Errorf("--plot %s: not a regular file (%s): give the path of the SVG file to write", path, fi.Mode().Type())
	}
	return target, fi.Mode().Perm(), nil
}

// checkPlotPath finds a --plot that cannot be written before the replay
// runs: its directory must exist and take a new file.
func checkPlotPath(path string) error {
	target, _, err := plotTarget(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("--plot %s: cannot write in %s: %w", path, filepath.Dir(target), errors.Unwrap(err))
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// simLab is the lab of --lab: a spec, "demo" (gssh demo's default lab,
// idle), or a saved `gssh gpus --json`
// (a name ending in .json), which is the lab simulating itself: each
// host's memory reserve and the gssh policy are then its inventory's (the
// one gssh finds, as every command does; none: no reserve and the default
// policy), and --reserve, when given, replaces every reserve. own is that
// inventory, nil for a spec or when there is none.
func (a *app) simLab(opts *simOptions) (hosts []sched.Host, own *inventory.Inventory, err error) {
	if opts.lab == "demo" {
		// gssh demo's lab, idle, with the inventory's default reserve.
		reserve := float64(inventory.DefaultReservePct)
		if opts.reserveSet {
			reserve = opts.reserve
		}
		var snaps []gpuinfo.Snapshot
		for _, h := range fakelab.DefaultLab() {
			snaps = append(snaps, h.Snapshot())
		}
		hosts, _, err := sim.LabOf(snaps, func(string) float64 { return reserve })
		return hosts, nil, err
	}
	if !strings.HasSuffix(opts.lab, ".json") {
		hosts, err = sim.ParseLab(opts.lab, opts.reserve)
		return hosts, nil, err
	}
	b, err := os.ReadFile(opts.lab)
	if err != nil {
		return nil, nil, fmt.Errorf("--lab: %w", err)
	}
	var doc service.GPUsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("--lab %s: not a gssh gpus --json document: %w", opts.lab, err)
	}
	if doc.Schema != service.GPUsSchema && doc.Schema != service.GPUsSchemaV1 {
		return nil, nil, fmt.Errorf("--lab %s: schema %q, want %q (save one with: gssh gpus --json > lab.json)", opts.lab, doc.Schema, service.GPUsSchema)
	}
	path, err := inventory.Locate(a.inventoryPath, a.getenv("GSSH_INVENTORY"), a.home(), a.systemInventory)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
	case err != nil:
		return nil, nil, err
	default:
		if own, err = inventory.Load(path); err != nil {
			return nil, nil, err
		}
	}
	reserve := func(host string) float64 {
		if own != nil {
			if h, ok := own.Lookup(host); ok {
				return h.ReservePct
			}
		}
		return 0
	}
	if opts.reserveSet {
		reserve = func(string) float64 { return opts.reserve }
	}
	snaps := make([]gpuinfo.Snapshot, len(doc.Hosts))
	for i, h := range doc.Hosts {
		snaps[i] = h.Snapshot
	}
	hosts, warnings, err := sim.LabOf(snaps, reserve)
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "gssh: warning: --lab %s: %s\n", opts.lab, w)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--lab %s: %w", opts.lab, err)
	}
	if own != nil {
		for _, h := range hosts {
			if _, ok := own.Lookup(h.Name); !ok && !opts.reserveSet {
				fmt.Fprintf(a.stderr, "gssh: warning: --lab %s: host %s is not in %s: no memory reserve\n", opts.lab, h.Name, own.File)
			}
		}
	}
	return hosts, own, nil
}

func readTrace(path string) (*trace.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	return trace.Read(path, f)
}

func simFill(a *app, opts *simOptions, hosts []sched.Host, t *trace.Trace, conv sim.Convert) error {
	jobs, warnings, err := sim.Jobs(t, conv)
	if err != nil {
		return err
	}
	for _, w := range append(t.Warnings, warnings...) {
		fmt.Fprintln(a.stderr, "gssh: warning:", w)
	}
	res, err := sim.FillAll(hosts, jobs, opts.fill, []sched.Fit{sched.FitFirst, sched.FitBest}, 10)
	if err != nil {
		return err
	}
	gpus, _ := sim.Capacity(hosts)
	if opts.json {
		return a.printJSON(struct {
			Schema     string            `json:"schema"`
			Trace      string            `json:"trace"`
			Lab        string            `json:"lab"`
			GPUs       int               `json:"gpus"`
			Target     float64           `json:"target"`
			Placements []sim.FillSummary `json:"placements"`
		}{"gssh.sim.fill/v1", t.Name, opts.lab, gpus, opts.fill, res})
	}
	fmt.Fprintf(a.stdout, "fill of %s (%d GPUs) with jobs of %s, until their demand reaches %g × its GPUs; mean of %d seeds\n",
		opts.lab, gpus, t.Name, opts.fill, res[0].Seeds)
	rows := make([][]string, len(res))
	for i, r := range res {
		pct := func(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + "%" }
		rows[i] = []string{string(r.Fit), pct(r.Allocated), pct(r.Idle), pct(r.Holes), strconv.FormatFloat(r.Unplaced, 'f', 1, 64), strconv.FormatFloat(r.Demand, 'f', 1, 64)}
	}
	return printTable(a.stdout, a.tty, []string{"PLACEMENT", "ALLOCATED", "IDLE GPUS", "HOLES", "UNPLACED GPUS", "DEMAND GPUS"}, rows)
}

// printComparison prints the policies side by side: the summary, then
// the waits by job size and by user.
func (a *app) printComparison(c *sim.Comparison) error {
	users := fmt.Sprintf("%d users", c.Users)
	if c.Users == 1 {
		users = "1 user"
	}
	switch {
	case c.UsersMadeUp:
		users += " (made up: job i is user i mod N)"
	case c.Users == 0:
		users = "no users (the trace has none: give --users or --users-from)"
	}
	fmt.Fprintf(a.stdout, "%s: %d jobs, %s; lab %s (%d GPUs); load %.2f as the trace is, %.2f replayed (arrivals × %.3g); walltime: %s\n",
		c.Trace, c.Jobs, users, c.Lab, c.GPUs, c.NaturalLoad, c.Load, c.Scale, c.Walltime)
	for _, r := range c.Reports {
		fmt.Fprintf(a.stdout, "  %s: %s\n", r.Policy, r.About)
	}
	fmt.Fprintln(a.stdout)
	header := []string{"METRIC"}
	for _, r := range c.Reports {
		header = append(header, r.Policy)
	}
	row := func(name string, cell func(sim.Report) string) []string {
		out := []string{name}
		for _, r := range c.Reports {
			out = append(out, cell(r))
		}
		return out
	}
	rows := [][]string{
		row("jobs run", func(r sim.Report) string { return strconv.Itoa(r.Started) }),
		row("never placeable", func(r sim.Report) string {
			return fmt.Sprintf("%d (%s GPU-h)", r.Unplaceable, strconv.FormatFloat(r.UnplaceableGPUHours, 'f', 0, 64))
		}),
		row("never started", func(r sim.Report) string { return strconv.Itoa(r.NeverStarted) }),
		row("makespan", func(r sim.Report) string { return units.FormatElapsed(r.Makespan) }),
		row("wait mean", func(r sim.Report) string { return units.FormatElapsed(r.MeanWait) }),
		row("wait p50", func(r sim.Report) string { return units.FormatElapsed(r.P50Wait) }),
		row("wait p95", func(r sim.Report) string { return units.FormatElapsed(r.P95Wait) }),
		row("wait max", func(r sim.Report) string { return units.FormatElapsed(r.MaxWait) }),
		row("completion mean", func(r sim.Report) string { return units.FormatElapsed(r.MeanCompletion) }),
		row("waited > 1 day", func(r sim.Report) string { return strconv.Itoa(r.WaitedOverDay) }),
		row("utilization", func(r sim.Report) string { return pctText(r.Utilization) }),
		row("utilization, arrivals", func(r sim.Report) string { return pctText(r.UtilizationArrivals) }),
		row("busy while jobs wait", func(r sim.Report) string { return pctText(r.BusyWhileWaiting) }),
		row("fragmentation", func(r sim.Report) string { return pctText(r.Fragmentation) }),
		row("fairness, active users", func(r sim.Report) string { return strconv.FormatFloat(r.JainActive, 'f', 3, 64) }),
		row("fairness, waiting users", func(r sim.Report) string { return strconv.FormatFloat(r.JainWaiting, 'f', 3, 64) }),
	}
	if err := printTable(a.stdout, a.tty, header, rows); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\nwait by job size: mean / p95 / max (jobs that ran)")
	if err := a.printBreakdown(c, "GPUS", func(r sim.Report) [][2]string {
		out := make([][2]string, len(r.Sizes))
		for i, s := range r.Sizes {
			cell := fmt.Sprintf("%s / %s / %s (%d)", units.FormatElapsed(s.MeanWait), units.FormatElapsed(s.P95Wait), units.FormatElapsed(s.MaxWait), s.Started)
			if s.Started == 0 {
				cell = fmt.Sprintf("none ran (of %d)", s.Jobs)
			}
			out[i] = [2]string{s.GPUs, cell}
		}
		return out
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\nby user: mean wait, GPU-hours")
	return a.printBreakdown(c, "USER", func(r sim.Report) [][2]string {
		out := make([][2]string, len(r.Users))
		for i, u := range r.Users {
			out[i] = [2]string{printable(u.User), fmt.Sprintf("%s, %s", units.FormatElapsed(u.MeanWait), strconv.FormatFloat(u.GPUHours, 'f', 0, 64))}
		}
		return out
	})
}

// printBreakdown prints one row per key (the first report's order, then
// any the others add) and one column per policy.
func (a *app) printBreakdown(c *sim.Comparison, what string, cells func(sim.Report) [][2]string) error {
	var keys []string
	byPolicy := make([]map[string]string, len(c.Reports))
	for i, r := range c.Reports {
		byPolicy[i] = map[string]string{}
		for _, kv := range cells(r) {
			if _, ok := byPolicy[0][kv[0]]; !ok && !slices.Contains(keys, kv[0]) {
				keys = append(keys, kv[0])
			}
			byPolicy[i][kv[0]] = kv[1]
		}
	}
	header := []string{what}
	for _, r := range c.Reports {
		header = append(header, r.Policy)
	}
	rows := make([][]string, len(keys))
	for k, key := range keys {
		rows[k] = []string{key}
		for i := range c.Reports {
			rows[k] = append(rows[k], cmp.Or(byPolicy[i][key], "-"))
		}
	}
	return printTable(a.stdout, a.tty, header, rows)
}

func pctText(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }
