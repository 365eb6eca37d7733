// Package fleet is the set of hosts of one inventory and the means to reach
// them: it reads the inventory and the user's ssh_config, keeps one SSH
// pool for the fleet's lifetime, picks hosts, resolves how to reach each
// one, probes many hosts in parallel, and turns probe reports into the
// planner's view of the hosts. A CLI command, a pass and (later) the
// daemon all reach hosts through it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
)

// Defaults from the contracts in ARCHITECTURE.md.
const (
	DefaultProbeTimeout = 15 * time.Second // nvidia-smi can stall for seconds
)

// SystemSSHConfig is OpenSSH's system-wide client config, read after the
// user's.
const SystemSSHConfig = "/etc/ssh/ssh_config"

// Resolver resolves a host alias through ssh_config (*sshconfig.Config).
type Resolver interface {
	Resolve(alias string, ov sshconfig.Overrides) (sshconfig.Settings, error)
}

// Shell runs commands on a host, can stream their output and can run
// one interactively (*sshexec.Pool and sshexec.Local are all three).
type Shell interface {
	Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error)
	Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error
	// Interact runs a command a person is at (gssh run), on a
	// pseudo-terminal with tty: see sshexec.Pool.Interact.
	Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *sshexec.Terminal) error
}

// SourceFunc builds the probe of one host from its runner.
type SourceFunc func(run probe.Runner, host string) probe.Source

// Options are what New needs. The zero value is a local-only fleet (no
// inventory found) reached with the user's ssh_config.
type Options struct {
	// Inventory, when set, is the inventory (tests, a simulated lab);
	// otherwise it is found by inventory.Locate from InventoryPath
	// (--inventory), InventoryEnv ($GSSH_INVENTORY), Home and
	// SystemInventory (gssh: inventory.SystemPath; "": no machine-wide
	// file), and without one the fleet is the local host alone, named
	// LocalHost.
	Inventory       *inventory.Inventory
	InventoryPath   string
	InventoryEnv    string
	SystemInventory string

	// Home is $HOME (or the passwd entry's): ~/.ssh/config, known_hosts,
	// keys. LocalUser is %u and the login user when nothing names one;
	// LocalHost the controller's host name (%L, %l).
	Home, LocalUser, LocalHost string
	// SSH, when set, resolves hosts (tests); otherwise ssh_config is read
	// from SSHConfig (--ssh-config; "" = ~/.ssh/config) then SystemSSHConfig.
	SSH       Resolver
	SSHConfig string
	// AgentSock is $SSH_AUTH_SOCK; ConnectTimeout applies where ssh_config
	// sets no ConnectTimeout (0 = sshexec.DefaultConnectTimeout).
	AgentSock      string
	ConnectTimeout time.Duration

	// Local runs the commands of `local: true` hosts (nil =
	// sshexec.Local{Env: Environ}).
	Local   Shell
	Environ []string

	// HelperPath is gssh-helper ($GSSH_HELPER); "" = the one beside the
	// running gssh (see FindHelper). It is read when the fleet is made;
	// without one every host is probed through nvidia-smi, and the reason
	// is shown.
	HelperPath string
	// CacheDir holds helper-fallback.json, where hosts that cannot run the
	// helper are remembered, and smi-fields.json, where hosts whose
	// nvidia-smi rejects query fields are ("" = not remembered).
	CacheDir string
	// Source replaces the helper/nvidia-smi choice (tests); nil = that choice.
	Source SourceFunc

	// Warn receives notices once (ssh_config lines gssh cannot use, a host
	// key added under accept-new). Nil: dropped.
	Warn func(string)
	// Probed, when set, is told of each probe made (not of an answer from
	// a stream's frame, nor from a hung probe remembered): gssh serve's
	// metrics count probe failures and time probes with it.
	Probed func(Report)
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Fleet is the set of hosts of one inventory and the means to reach them.
// It is safe for concurrent use; Close ends it.
type Fleet struct {
	opt         Options
	helper      *probe.HelperBinary
	noHelperWhy string
	mu          sync.RWMutex
	inv         *inventory.Inventory
	ssh         Resolver
	remote      *sshexec.Pool
	local       Shell
	// jobs runs the jobs of local hosts (Shell): with the environment an
	// SSH login would give them, not gssh's own.
	jobs   Shell
	memo   probe.FallbackMemo
	fields probe.FieldMemo
	// streams, once Watch ran, are the hosts' GPU streams.
	streams *streams
}

// New reads the inventory and ssh_config and returns the fleet, with an
// SSH pool that connects on first use. Errors name the file and line:
// an inventory or ssh_config that cannot be read or parsed, a
// --ssh-config that is missing or a directory.
func New(opt Options) (*Fleet, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Warn == nil {
		opt.Warn = func(string) {}
	}
	f := &Fleet{opt: opt, local: opt.Local, jobs: opt.Local}
	if f.local == nil {
		f.local = sshexec.Local{Env: withoutJobVars(opt.Environ)}
		f.jobs = sshexec.Local{Env: loginEnv(opt.Environ)}
	}
	if opt.CacheDir != "" {
		f.memo = NewFallbackFile(filepath.Join(opt.CacheDir, "helper-fallback.json"), opt.Now)
		f.fields = NewFieldsFile(filepath.Join(opt.CacheDir, "smi-fields.json"), opt.Now)
	}
	inv, ssh, err := f.load()
	if err != nil {
		return nil, err
	}
	f.inv, f.ssh = inv, ssh
	if opt.Source == nil {
		f.helper, f.noHelperWhy = FindHelper(opt.HelperPath)
	}
	f.remote = sshexec.NewPool(sshexec.PoolOptions{
		Resolve:        f.Settings,
		AgentSock:      opt.AgentSock,
		ConnectTimeout: opt.ConnectTimeout,
		Warn:           opt.Warn,
		Now:            opt.Now,
	})
	return f, nil
}

// withoutJobVars is environ less the variables that mark a gssh job's
// processes (GSSH_JOB_ID, GSSH_CLUSTER_ID, GSSH_ATTEMPT): a gssh run from
// inside a job must not lend that job's marks to what it runs on the local
// host (its polls, its launches), or reaping that job would kill them.
// nil stays nil (the process's own environment, which then has none).
// loginEnv is what of environ an SSH login would give a command too (the
// account's HOME, USER, LOGNAME, SHELL and PATH, the locale, the time
// zone, TMPDIR): a job on a local host gets what a job over SSH gets,
// never the variables of whichever gssh process ran the pass. nil stays
// nil (the caller's environment).
func loginEnv(environ []string) []string {
	if environ == nil {
		return nil
	}
	out := []string{}
	for _, kv := range environ {
		switch k, _, _ := strings.Cut(kv, "="); {
		case k == "HOME", k == "USER", k == "LOGNAME", k == "SHELL", k == "PATH", k == "LANG", k == "LANGUAGE", k == "TZ", k == "TMPDIR",
			strings.HasPrefix(k, "LC_"), k == "GSSH_CLAIMS_DIR": // where the host's GPU claims are kept (launch.ClaimsDir)
			out = append(out, kv)
		}
	}
	return out
}

func withoutJobVars(environ []string) []string {
	if environ == nil {
		return nil
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k != "GSSH_JOB_ID" && k != "GSSH_CLUSTER_ID" && k != "GSSH_ATTEMPT" {
			out = append(out, kv)
		}
	}
	return out
}

// load reads the inventory and ssh_config as the options say.
func (f *Fleet) load() (*inventory.Inventory, Resolver, error) {
	opt := f.opt
	inv := opt.Inventory
	if inv == nil {
		path, err := inventory.Locate(opt.InventoryPath, opt.InventoryEnv, opt.Home, opt.SystemInventory)
		switch {
		case errors.Is(err, inventory.ErrNotFound):
			host, _, _ := strings.Cut(opt.LocalHost, ".")
			if host == "" {
				host = "localhost"
			}
			inv = inventory.LocalOnly(host)
		case err != nil:
			return nil, nil, err
		default:
			if inv, err = inventory.Load(path); err != nil {
				return nil, nil, err
			}
		}
	}
	if opt.SSH != nil {
		return inv, opt.SSH, nil
	}
	userCfg := opt.SSHConfig
	if userCfg == "" {
		userCfg = filepath.Join(opt.Home, ".ssh", "config")
	} else if fi, err := os.Stat(userCfg); err != nil {
		return nil, nil, fmt.Errorf("--ssh-config: %w", err)
	} else if fi.IsDir() {
		return nil, nil, fmt.Errorf("--ssh-config %s is a directory; give the config file", userCfg)
	}
	cfg, err := sshconfig.Load(sshconfig.Env{Home: opt.Home, LocalUser: opt.LocalUser, LocalHost: opt.LocalHost}, userCfg, SystemSSHConfig)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range cfg.Warnings() {
		opt.Warn(fmt.Sprint("warning: ", w))
	}
	return inv, cfg, nil
}

// Reload reads the inventory and ssh_config again (where they came from
// files) and forgets the host key and configuration errors the pool
// keeps, so a long-running process picks up a fixed known_hosts or
// inventory without a restart. On an error the fleet stays as it was.
func (f *Fleet) Reload() error {
	inv, ssh, err := f.load()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.inv, f.ssh = inv, ssh
	f.mu.Unlock()
	f.remote.Forget()
	return nil
}

// Close stops the GPU streams (Watch) and closes every SSH connection;
// commands in flight fail.
func (f *Fleet) Close() error {
	f.mu.RLock()
	s := f.streams
	f.mu.RUnlock()
	if s != nil {
		s.stop()
	}
	return f.remote.Close()
}

// Inventory returns the inventory in use (a new one after Reload).
func (f *Fleet) Inventory() *inventory.Inventory {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.inv
}

// Lookup returns the inventory host named name.
func (f *Fleet) Lookup(name string) (inventory.Host, bool) { return f.Inventory().Lookup(name) }

// source picks how host h is probed: the helper with nvidia-smi as the
// fallback, or nvidia-smi alone when gssh carries no helper.
//
// Each attempt gets the probe timeout d of its own, so nvidia-smi still has
// its full time after the helper could not answer. (Pushing the helper has
// its own budget, probe.PushTimeout.)
func (f *Fleet) source(h inventory.Host, d time.Duration) probe.Source {
	run := f.Runner(h)
	if f.opt.Source != nil {
		return within{f.opt.Source(run, h.Name), d}
	}
	smi := within{probe.SMIMemo(run, h.Name, f.fields), d}
	if f.helper == nil {
		return because{smi, f.noHelperWhy}
	}
	return probe.Fallback(within{probe.Helper(run, h.Name, f.helper, f.memo, h.Local), d}, smi)
}

// within runs src under a timeout of its own.
type within struct {
	src probe.Source
	d   time.Duration
}

func (w within) Snapshot(ctx context.Context) (probe.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, w.d)
	defer cancel()
	return w.src.Snapshot(ctx)
}

// because sets SourceWhy on what src answers.
type because struct {
	src probe.Source
	why string
}

func (b because) Snapshot(ctx context.Context) (probe.Snapshot, error) {
	s, err := b.src.Snapshot(ctx)
	if s.Source != "" && s.SourceWhy == "" {
		s.SourceWhy = b.why
	}
	return s, err
}

// Settings resolves how to reach the inventory host name: ssh_config
// merged with the inventory's own values, which win. Errors wrap
// sshexec.ErrUnknownHost or sshexec.ErrConfig.
func (f *Fleet) Settings(name string) (sshconfig.Settings, error) {
	f.mu.RLock()
	inv, ssh := f.inv, f.ssh
	f.mu.RUnlock()
	h, ok := inv.Lookup(name)
	if !ok {
		return sshconfig.Settings{}, unknown(inv, name)
	}
	if h.Local {
		return sshconfig.Settings{}, &sshexec.Error{Host: name, Kind: sshexec.ErrConfig, Detail: "the local host is not reached over SSH"}
	}
	s, err := ssh.Resolve(h.Name, h.Overrides())
	if err != nil {
		return s, &sshexec.Error{Host: name, Kind: sshexec.ErrConfig, Detail: err.Error(), Err: err}
	}
	return s, nil
}

func unknown(inv *inventory.Inventory, name string) error {
	where := "the implicit local-only inventory (no hosts file found)"
	if inv.File != "" {
		where = inv.File
	}
	return fmt.Errorf("%w %q: it is not in %s, which lists: %s; add it to the inventory's `hosts:`",
		sshexec.ErrUnknownHost, name, where, strings.Join(inv.Names(), ", "))
}

// Runner returns the runner of host h.
func (f *Fleet) Runner(h inventory.Host) Shell {
	if h.Local {
		return f.local
	}
	return f.remote
}

// Shell returns the runner of the inventory host name, or an error
// wrapping sshexec.ErrUnknownHost when the inventory does not list it (a
// job placed on a host since removed).
func (f *Fleet) Shell(name string) (Shell, error) {
	inv := f.Inventory()
	h, ok := inv.Lookup(name)
	if !ok {
		return nil, unknown(inv, name)
	}
	if h.Local {
		return f.jobs, nil
	}
	return f.Runner(h), nil
}

// Select returns the inventory hosts named in names (all when empty) that
// carry every label in labels, in inventory order. An unknown name is an
// error listing the known ones; a label that matches no host is an error too.
func (f *Fleet) Select(names, labels []string) ([]inventory.Host, error) {
	inv := f.Inventory()
	want := map[string]bool{}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, errors.New("--host was given an empty name")
		}
		if _, ok := inv.Lookup(n); !ok {
			return nil, unknown(inv, n)
		}
		want[n] = true
	}
	var out []inventory.Host
	for _, h := range inv.Hosts {
		if len(want) > 0 && !want[h.Name] {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && h.HasLabel(l)
		}
		if ok {
			out = append(out, h)
		}
	}
	if len(out) == 0 && len(labels) > 0 {
		scope := "no host"
		if len(names) > 0 {
			scope = "none of " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%s carries all of the labels %s; labels in use: %s", scope, strings.Join(labels, ", "), strings.Join(labelsOf(inv), ", "))
	}
	return out, nil
}

func labelsOf(inv *inventory.Inventory) []string {
	var out []string
	for _, h := range inv.Hosts {
		for _, l := range h.Labels {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

// Address describes where h is reached: "local", or user@host:port with the
// jump hosts crossed ("alice@10.0.0.12:22 via bastion").
func (f *Fleet) Address(h inventory.Host) string {
	if h.Local {
		return "local"
	}
	s, err := f.Settings(h.Name)
	if err != nil {
		return "?"
	}
	a := s.User + "@" + net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
	if len(s.ProxyJump) > 0 {
		var hops []string
		for _, j := range s.ProxyJump {
			hops = append(hops, j.Alias)
		}
		a += " via " + strings.Join(hops, ",")
	}
	return a
}

// Report is the outcome of probing one host.
type Report struct {
	Host     inventory.Host
	Address  string
	Snapshot probe.Snapshot
	Err      error         // transport or probe error; Snapshot.State says which kind
	Connect  time.Duration // dial + handshake (0 when local or reused)
	RTT      time.Duration // one SSH request round trip after connecting (0 when local)
	Took     time.Duration // the whole probe of this host
	// At is when the snapshot was taken: the probe's end, or when its
	// stream frame came (Streamed).
	At       time.Time
	Streamed bool
	// Reached: the host answered SSH (its connection was made, or is the
	// local host), whatever the probe then found: a probe that timed out
	// after connecting (a hung nvidia-smi) still reached it.
	Reached bool
}

// Probed reports whether the host's GPUs could be read. A host without
// GPUs, or with some GPU broken, was probed; one whose driver is not loaded
// or that could not be reached was not.
func (r Report) Probed() bool {
	switch r.Snapshot.State {
	case probe.HostOK, probe.HostDegraded, probe.HostNoDevices:
		return true
	}
	return false
}

// ProbeOptions bound a fan-out.
type ProbeOptions struct {
	Timeout time.Duration // per host, after connecting (0 = DefaultProbeTimeout)
	Ping    bool          // measure RTT with one keepalive round trip
	// MaxAge lets a host whose GPU stream (Watch) printed a frame at most
	// this long ago be answered from it, with no command run (0: probe).
	// With it, a watched host whose last probe hung (it answered SSH,
	// the GPU probe did not finish) and whose stream has printed nothing
	// since is answered with that probe's report for up to a minute
	// (hungFor), so that a stuck GPU does not cost every pass and every
	// gssh gpus the whole probe timeout.
	MaxAge time.Duration
}

// Probe probes hosts in parallel, one goroutine per host, and returns one
// report per host in the order given. It never fails as a whole: each
// host's failure is in its report.
func (f *Fleet) Probe(ctx context.Context, hosts []inventory.Host, opt ProbeOptions) []Report {
	out := make([]Report, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { out[i] = f.probeOne(ctx, h, opt) })
	}
	wg.Wait()
	return out
}

// probeOne is Probe of host h alone.
func (f *Fleet) probeOne(ctx context.Context, h inventory.Host, opt ProbeOptions) Report {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultProbeTimeout
	}
	r := Report{Host: h, Address: f.Address(h)}
	if fr, ok := f.streamed(h.Name, opt.MaxAge); ok && !opt.Ping {
		r.Snapshot, r.At, r.Streamed, r.Reached = fr.snap, fr.at, true, true
		return r
	}
	if hr, ok := f.hungProbe(h.Name); ok && opt.MaxAge > 0 && !opt.Ping {
		return hr
	}
	r = f.probeNow(ctx, h, opt, r)
	if f.opt.Probed != nil {
		f.opt.Probed(r)
	}
	return r
}

// probeNow is probeOne's probe of h, made now.
func (f *Fleet) probeNow(ctx context.Context, h inventory.Host, opt ProbeOptions, r Report) Report {
	start := f.opt.Now()
	if !h.Local {
		d, err := f.remote.Connect(ctx, h.Name)
		if err != nil {
			r.Err = err
			r.Snapshot = failed(h.Name, err)
			r.At = f.opt.Now()
			r.Took = r.At.Sub(start)
			return r
		}
		r.Connect = d
		if opt.Ping {
			if rtt, err := f.remote.Ping(ctx, h.Name); err == nil {
				r.RTT = rtt
			}
		}
	}
	r.Reached = true
	snap, err := f.source(h, opt.Timeout).Snapshot(ctx)
	snap.Host = h.Name
	r.Snapshot, r.Err = snap, err
	var te *sshexec.Error
	switch {
	case err != nil && snap.State == "":
		r.Snapshot = failed(h.Name, err)
	case err != nil && errors.Is(err, sshexec.ErrTimeout) && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		r.Snapshot.Error = fmt.Sprintf("the GPU probe did not finish within %s (nvidia-smi may hang on a stuck GPU; raise --probe-timeout if the host is only slow)", opt.Timeout)
		defer func() { f.probeHung(r) }()
	case errors.As(err, &te):
		// A transport failure: the row says the host and the state already.
		r.Snapshot.Error = detail(snap.State, err)
	}
	r.At = f.opt.Now()
	r.Took = r.At.Sub(start)
	return r
}

// failed is the snapshot of a host that could not be probed at all.
func failed(host string, err error) probe.Snapshot {
	state := probe.TransportState(err)
	return probe.Snapshot{Host: host, State: state, Error: detail(state, err), Warnings: []string{}, GPUs: []probe.GPU{}}
}

// detail is err's text without what the row already says: the host name
// and the state ("gpu01: timed out: connect..." under state "timeout" is
// "connect...").
func detail(state probe.HostState, err error) string {
	if msg := sshexec.Detail(err); msg != "" {
		return msg
	}
	return string(state)
}

// SchedHosts is the planner's view of the inventory's hosts: each with its
// labels, reserve and drain flag, and the snapshot of its report (a host
// without one is "not probed yet").
func SchedHosts(inv *inventory.Inventory, reports []Report) []sched.Host {
	byName := map[string]Report{}
	for _, r := range reports {
		byName[r.Host.Name] = r
	}
	out := make([]sched.Host, 0, len(inv.Hosts))
	for _, h := range inv.Hosts {
		r := byName[h.Name]
		out = append(out, sched.Host{Name: h.Name, Labels: h.Labels, ReservePct: h.ReservePct, Drain: h.Drain, ReapForeign: h.ReapForeign, Snapshot: r.Snapshot, ProbedAt: r.At})
	}
	return out
}

// Snapshots is the fleet as control.Snapshots: every host probed now, or,
// when Reports is set, the reports taken already (a submit probes before
// it validates, and its pass reuses them).
type Snapshots struct {
	Fleet   *Fleet
	Timeout time.Duration // per host (0 = DefaultProbeTimeout)
	Reports []Report
	// MaxAge lets hosts be answered from their GPU stream's frames of at
	// most this age (ProbeOptions.MaxAge; 0: probed now).
	MaxAge time.Duration
}

// Hosts implements control.Snapshots. It never fails: a host that cannot
// be probed is there with its state.
func (s Snapshots) Hosts(ctx context.Context) ([]sched.Host, error) {
	inv := s.Fleet.Inventory()
	reports := s.Reports
	if reports == nil {
		reports = s.Fleet.Probe(ctx, inv.Hosts, ProbeOptions{Timeout: s.Timeout, MaxAge: s.MaxAge})
	}
	return SchedHosts(inv, reports), nil
}

// FindHelper locates and loads gssh-helper: path (e.g. $GSSH_HELPER) when
// set, else the file beside the running gssh (where `make` puts it).
// Without one it returns nil and why, for `gssh hosts` to show: hosts are
// then probed through nvidia-smi.
func FindHelper(path string) (*probe.HelperBinary, string) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, "gssh-helper not found: " + err.Error()
		}
		path = filepath.Join(filepath.Dir(exe), "gssh-helper")
		if _, err := os.Stat(path); err != nil {
			return nil, "no gssh-helper beside " + exe + " (a `go install` build?): build it with `make`, or set $GSSH_HELPER"
		}
	}
	bin, err := probe.LoadHelperBinary(path)
	if err != nil {
		return nil, err.Error()
	}
	return bin, ""
}

// HostsOf implements control.HostsOf: the hosts named (in the
// inventory's order; names it does not have are left out), probed now,
// or taken from Reports when set.
func (s Snapshots) HostsOf(ctx context.Context, names []string) ([]sched.Host, error) {
	inv := s.Fleet.Inventory()
	var hosts []inventory.Host
	for _, h := range inv.Hosts {
		if slices.Contains(names, h.Name) {
			hosts = append(hosts, h)
		}
	}
	reports := s.Reports
	if reports == nil {
		reports = s.Fleet.Probe(ctx, hosts, ProbeOptions{Timeout: s.Timeout, MaxAge: s.MaxAge})
	}
	out := SchedHosts(inv, reports)
	return slices.DeleteFunc(out, func(h sched.Host) bool { return !slices.Contains(names, h.Name) }), nil
}
