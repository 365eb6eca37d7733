package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"al.essio.dev/pkg/shellescape"
	"github.com/spf13/cobra"

	"mvdan.cc/sh/v3/shell"

	"github.com/gssh/gssh/fakelab"
	"github.com/gssh/gssh/units"
)

type demoOptions struct {
	hosts, gpus int
	run         bool
}

func newDemoCmd(a *app, runF func(*demoOptions) error) *cobra.Command {
	opts := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [--hosts N] [--gpus-per-host M] [--run]",
		Short: "Start a simulated GPU lab on this machine and gssh serve on it, to try gssh",
		Long: `Start a simulated lab inside this process, with no GPU and no network: SSH
servers on loopback with their own host keys, whose GPUs (8 A100s twice, one
lost, 4 RTX 4090s, two H100s, one split into MIG devices) answer as
nvidia-smi and the helper do, and whose jobs really run here, their --mem
shown as used GPU memory. gssh serve runs its queue. It prints what to try;
Ctrl-C removes it all. --run plays a short tour instead (several users'
jobs, fair-share, a job that does not fit and why, a cancel) and removes it.`,
		Example: `  gssh demo --run
  gssh demo                           # then, in another terminal, the commands it prints
  gssh demo --hosts 8 --gpus-per-host 4   # a bigger lab to try commands on`,
		Annotations: exits(exitLine{exitOK, "the tour ended, or Ctrl-C stopped the lab (everything removed)"}, exitLine{exitUsage, "usage error, or the lab could not start (what failed is said)"}),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return demoRun(c.Context(), a, c, opts)
		},
	}
	cmd.Flags().IntVar(&opts.hosts, "hosts", 0, "a sized lab of N hosts (1-64; default 4), the default models in turn")
	cmd.Flags().IntVar(&opts.gpus, "gpus-per-host", 0, "GPUs per host of a sized lab: the default models in turn (1-16; default 8)")
	cmd.Flags().BoolVar(&opts.run, "run", false, "play the tour, then remove everything and exit")
	return cmd
}

// demoRun is gssh demo; see newDemoCmd.
func demoRun(ctx context.Context, a *app, c *cobra.Command, opts *demoOptions) error {
	hosts := fakelab.DefaultLab()
	if c.Flags().Changed("hosts") || c.Flags().Changed("gpus-per-host") {
		if !c.Flags().Changed("hosts") {
			opts.hosts = 4
		}
		if opts.hosts < 1 || opts.hosts > 64 {
			return fmt.Errorf("--hosts %d: give 1 to 64", opts.hosts)
		}
		if !c.Flags().Changed("gpus-per-host") {
			opts.gpus = 8
		}
		if opts.gpus < 1 || opts.gpus > 16 {
			return fmt.Errorf("--gpus-per-host %d: give 1 to 16", opts.gpus)
		}
		if opts.run {
			return fmt.Errorf("--run plays the tour of the default lab: leave --hosts and --gpus-per-host out")
		}
		hosts = fakelab.SizedLab(opts.hosts, opts.gpus)
	}
	// A closed terminal (SIGHUP) or a reader gone (SIGPIPE: gssh demo
	// --run | head) stop the lab as Ctrl-C does, so it is removed.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()
	d, err := startDemo(ctx, a, hosts)
	if errors.Is(err, errInterrupted) {
		return nil // Ctrl-C while it started: what was started is gone
	}
	if err != nil {
		return err
	}
	defer d.close()
	if opts.run {
		err := d.tour(ctx)
		if ctx.Err() != nil {
			fmt.Fprintln(a.stderr, "gssh demo: stopping the lab and removing", d.dir)
		}
		return err
	}
	if err := d.printTry(); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Fprintln(a.stderr, "gssh demo: stopping the lab and removing", d.dir)
	return nil
}

// demo is a running simulated lab with gssh serve on its queue.
type demo struct {
	a      *app
	dir    string
	lab    *fakelab.Lab
	self   string   // this gssh
	env    []string // what a gssh command of the lab's owner gets
	api    string   // the HTTP API's URL
	serve  *exec.Cmd
	tokens map[string]string // user → token
	jobs   map[string]string // a tour step's key → the job id it submitted
}

// demoUsers are the users the tour's jobs belong to, beside the queue's
// owner (fair-share weights 1).
var demoUsers = []string{"alice", "bob", "carol"}

// startDemo starts the lab, then gssh serve on its state with the HTTP
// API on a free loopback port, and makes a token for each demo user.
func startDemo(ctx context.Context, a *app, hosts []fakelab.HostSpec) (*demo, error) {
	self, err := selfPath()
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	dir, err := os.MkdirTemp("", "gssh-demo-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the lab in %s ($TMPDIR): %w", os.TempDir(), err)
	}
	d := &demo{a: a, dir: dir, self: self, tokens: map[string]string{}, jobs: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	users := map[string]any{}
	for _, u := range demoUsers {
		users[u] = map[string]any{"weight": 1}
	}
	d.lab, err = fakelab.Start(fakelab.Options{Dir: filepath.Join(dir, "lab"), Hosts: hosts, Shim: self,
		Policy: map[string]any{"users": users, "fairshare": map[string]any{"half_life": "1h"}}})
	if err != nil {
		return nil, fmt.Errorf("the simulated lab: %w", err)
	}
	state := filepath.Join(dir, "state", "state.db")
	if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	d.env = append(demoEnviron(a.environ), "GSSH_INVENTORY="+d.lab.Inventory, "GSSH_STATE="+state, "GSSH_HELPER="+self)
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("a port for the HTTP API: %w", err)
	}
	d.api = "http://127.0.0.1:" + strconv.Itoa(port)
	var serveErr bytes.Buffer
	d.serve = exec.Command(self, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--interval", "1s", "--gpu-interval", "1s")
	d.serve.Env, d.serve.Stdout, d.serve.Stderr = d.env, io.Discard, &serveErr
	// Ctrl-C at the terminal is ours to pass on; and gssh serve stops
	// when this process dies, however it dies.
	d.serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := d.serve.Start(); err != nil {
		return nil, fmt.Errorf("gssh serve: %w", err)
	}
	if err := d.waitReady(ctx, &serveErr); err != nil {
		return nil, err
	}
	for _, u := range append([]string{""}, demoUsers...) {
		args := []string{"token", "create", "--name", "demo"}
		if u != "" {
			args = append(args, "--user", u)
		}
		out, err := d.output(ctx, "", args...)
		if err != nil {
			return nil, fmt.Errorf("a token for %s: %w", cmp.Or(u, "you"), err)
		}
		d.tokens[u] = strings.TrimSpace(out) // "": the queue's owner's, for the dashboard
	}
	ok = true
	return d, nil
}

// demoEnviron is the environment of the demo's gssh commands: the
// caller's, less what would point them at another queue.
func demoEnviron(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GSSH_INVENTORY", "GSSH_STATE", "GSSH_HELPER", "GSSH_SERVER", "GSSH_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// selfPath is this gssh's executable: argv[0] as it was found (a link
// named gssh included), else the running binary.
func selfPath() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return filepath.Abs(p)
	}
	return os.Executable()
}

// freePort is a TCP port free on loopback now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits for gssh serve's API to answer /healthz, up to 30 s.
func (d *demo) waitReady(ctx context.Context, serveErr *bytes.Buffer) error {
	exited := make(chan error, 1)
	go func() { exited <- d.serve.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.api+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				go func() { <-exited }()
				return nil
			}
		}
		select {
		case err := <-exited:
			d.serve = nil
			return fmt.Errorf("gssh serve stopped (%v): %s", err, strings.TrimSpace(serveErr.String()))
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gssh serve did not answer on %s within 30s: %s", d.api, strings.TrimSpace(serveErr.String()))
		}
	}
}

// command is a gssh command of user ("" the queue's owner, through the
// socket; a demo user through the HTTP API with their token).
func (d *demo) command(ctx context.Context, user string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.self, args...)
	cmd.Env, cmd.Dir = d.env, d.dir // the jobs' workdir: one that exists on every lab host
	if user != "" {
		cmd.Env = append(append([]string{}, d.env...), "GSSH_SERVER="+d.api, "GSSH_TOKEN="+d.tokens[user])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// output runs a gssh command and returns its stdout; its stderr is in
// the error.
func (d *demo) output(ctx context.Context, user string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := d.command(ctx, user, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("gssh %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// close stops gssh serve (SIGTERM: the pass in flight ends), then the
// lab (every process it started), and removes the demo's directory.
func (d *demo) close() {
	if d.serve != nil && d.serve.Process != nil {
		d.serve.Process.Signal(syscall.SIGTERM)
		for i := 0; i < 100 && d.serve.Process.Signal(syscall.Signal(0)) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		d.serve.Process.Kill()
	}
	if d.lab != nil {
		d.lab.Close()
	}
	os.RemoveAll(d.dir)
}

// printTry writes the lab's env file (what points gssh at it), then says
// what the lab is and the commands to try on it.
func (d *demo) printTry() error {
	env := filepath.Join(d.dir, "env")
	exports := fmt.Sprintf("export GSSH_INVENTORY=%s GSSH_STATE=%s GSSH_HELPER=%s PATH=%s:\"$PATH\"\n",
		shellescape.Quote(d.lab.Inventory), shellescape.Quote(envValue(d.env, "GSSH_STATE")), shellescape.Quote(d.self), shellescape.Quote(filepath.Dir(d.self)))
	api := "GSSH_DEMO_API=" + d.api + " # gssh serve's HTTP API, for GSSH_SERVER\n"
	if err := os.WriteFile(env, []byte(exports+api), 0o600); err != nil {
		return fmt.Errorf("%w", err)
	}
	w := d.a.stdout
	fmt.Fprintf(w, "A simulated lab is up: %s, gssh serve on its queue.\n", d.summary())
	fmt.Fprintf(w, "In another terminal, point gssh at it:\n\n")
	fmt.Fprintf(w, "  . %s        # or: %s\n", shellescape.Quote(env), exports)
	fmt.Fprintf(w, "then try:\n\n")
	for _, l := range []string{
		"gssh gpus",
		"gssh hosts",
		"gssh submit --mem 8G --name hello -- sh -c 'echo on $CUDA_VISIBLE_DEVICES; nvidia-smi; sleep 60'",
		"gssh submit --gpus 8 -- sleep 60          # waits: gssh ps says why",
		"gssh ps",
		"gssh logs -f 1",
		"gssh usage",
		"gssh cancel 2",
	} {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "\nThe dashboard (you, logged in by the link):\n\n  %s/login?token=%s\n", d.api, d.tokens[""])
	fmt.Fprintf(w, "\nAs another user, through the HTTP API (%s):\n\n", d.api)
	for _, u := range demoUsers {
		fmt.Fprintf(w, "  GSSH_SERVER=%s GSSH_TOKEN=%s gssh submit --mem 4G -- sleep 30   # %s\n", d.api, d.tokens[u], u)
	}
	fmt.Fprintf(w, "\nCtrl-C here stops the lab and removes it (%s).\n", d.dir)
	return nil
}

// summary is "4 hosts, 22 GPUs (1 lost)".
func (d *demo) summary() string {
	gpus, lost := 0, 0
	for _, h := range d.lab.Hosts {
		for _, g := range h.Spec.GPUs {
			gpus++
			if g.Lost {
				lost++
			}
		}
	}
	s := fmt.Sprintf("%d %s, %d GPUs", len(d.lab.Hosts), units.Plural(len(d.lab.Hosts), "host", "hosts"), gpus)
	if lost > 0 {
		s += fmt.Sprintf(" (%d lost)", lost)
	}
	return s
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// tourStep is one step of the tour: words to say, or a command of user
// to run and show (its job id kept under key when it submits one).
type tourStep struct {
	say  string
	user string
	cmd  string // gssh's arguments, shell words; {key} is the job id kept under key
	key  string
	// wait, before the command, for the job kept under this key to run,
	// and for its command to have started (its log is not empty).
	waitRunning string
}

// theTour is the tour --run plays.
var theTour = []tourStep{
	{say: "The lab's hosts, each reached over SSH (the helper pushed to each, as to real hosts):"},
	{cmd: "hosts"},
	{say: "Every GPU of every host in one table: a notebook holds 6 GiB on a100-1's GPU 3, a\npython3 run by hand 20 GiB on rtx-1's GPU 0, a100-2's GPU 5 is lost, h100-1's GPU 0 is\nsplit into MIG devices:"},
	{cmd: "gpus"},
	{say: "alice fine-tunes on 4 A100s with 20 GiB each; bob evaluates on 8 GiB, which fits a\n1g.10gb MIG device; carol wants 8 whole GPUs on one host, which no host has free:"},
	{user: "alice", cmd: "submit --name finetune --label a100 --gpus 4 --mem 20G -- sh -c 'for e in 1 2 3 4 5 6; do echo epoch $e loss 0.$((70-e*9)); sleep 1; done'", key: "finetune"},
	{user: "bob", cmd: "submit --name eval --label mig --mem 8G -- sh -c 'echo evaluating on $CUDA_VISIBLE_DEVICES; sleep 30'", key: "eval"},
	{user: "carol", cmd: "submit --name sweep --gpus 8 -- sleep 60", key: "sweep"},
	{say: "The queue, and what the GPUs hold now (the jobs' --mem shows as used memory):", waitRunning: "eval"},
	{cmd: "ps"},
	{cmd: "gpus --fresh --host a100-1,h100-1"},
	{user: "bob", cmd: "logs {eval}"},
	{say: "alice fills rtx-1's three free GPUs and queues a fourth job; bob queues one after hers.\nWhen a GPU frees, bob's goes first: alice has used more GPU time (fair-share):"},
	{user: "alice", cmd: "submit --name prep --host rtx-1 --mem 16G -- sleep 9"},
	{user: "alice", cmd: "submit --name sweep --host rtx-1 --mem 16G --array 1-2 -- sleep 20"},
	{user: "alice", cmd: "submit --name sweep-3 --host rtx-1 --mem 16G -- sleep 5"},
	{user: "bob", cmd: "submit --name sweep-b --host rtx-1 --mem 16G -- sh -c 'echo sweep-b; sleep 5'", key: "bob2"},
	{cmd: "ps"},
	{cmd: "usage"},
	{say: "alice follows her fine-tuning's log to its end:"},
	{user: "alice", cmd: "logs -f {finetune}"},
	{say: "bob's job started before alice's last task, as fair-share ranked it:", waitRunning: "bob2"},
	{cmd: "ps"},
	{say: "carol gives up on her 8-GPU job:"},
	{user: "carol", cmd: "cancel {sweep}"},
	{cmd: "show {sweep}"},
}

// tour plays theTour, printing each command and its output.
func (d *demo) tour(ctx context.Context) error {
	w := d.a.stdout
	fmt.Fprintf(w, "gssh demo: a simulated lab (%s) in %s, gssh serve on its queue.\n", d.summary(), d.dir)
	fmt.Fprintf(w, "Users alice, bob and carol reach it through its HTTP API; you own the queue.\n")
	for _, s := range theTour {
		if ctx.Err() != nil {
			return nil
		}
		if s.waitRunning != "" {
			d.waitRunning(ctx, d.jobs[s.waitRunning])
		}
		if s.say != "" {
			fmt.Fprintf(w, "\n%s\n", s.say)
			continue
		}
		line := s.cmd
		for k, id := range d.jobs {
			line = strings.ReplaceAll(line, "{"+k+"}", id)
		}
		args, err := shell.Fields(line, nil)
		if err != nil {
			return fmt.Errorf("tour step %q: %w", line, err)
		}
		prompt := "$"
		if s.user != "" {
			prompt = s.user + "$"
		}
		fmt.Fprintf(w, "\n%s gssh %s\n", prompt, line)
		cmd := d.command(ctx, s.user, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = w, w // a terminal stays one: tables fit it
		if s.key != "" {
			cmd.Stdout = io.MultiWriter(w, &out)
		}
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nil // stopped: demoRun says so
			}
			var xe *exec.ExitError
			if !errors.As(err, &xe) {
				return fmt.Errorf("gssh %s: %w", line, err)
			}
			fmt.Fprintf(w, "(exit status %d)\n", xe.ExitCode())
		}
		if s.key != "" {
			d.jobs[s.key] = submittedID(out.String())
		}
	}
	fmt.Fprintf(w, "\nThat was the tour. `gssh demo` keeps a lab up for you to try, with a web dashboard; `gssh --help` lists the commands.\n")
	return nil
}

// submittedID is the job id gssh submit printed ("job 4 running on ...",
// "job 5 queued: ...", "job 6_[1-4] ..."), "" when none.
func submittedID(out string) string {
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "job" {
		return ""
	}
	id, _, _ := strings.Cut(f[1], "_")
	return strings.TrimSuffix(id, ":")
}

// waitRunning waits up to 20 s for job id to be running (or over): not
// queued, nor launching, and its log not empty (its command started).
func (d *demo) waitRunning(ctx context.Context, id string) {
	if id == "" {
		return
	}
	for range 200 {
		out, err := d.output(ctx, "", "show", "--json", id)
		if err != nil {
			return
		}
		if !strings.Contains(out, `"state": "queued"`) && !strings.Contains(out, `"state": "launching"`) {
			if log, err := d.output(ctx, "", "logs", id); err != nil || log != "" {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
