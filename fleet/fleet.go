// Package fleet ties the inventory, the user's ssh_config and the runners
// together: it picks hosts, resolves how to reach each one, and probes many
// hosts in parallel. It is the seam later passes (scheduler, daemon) use to
// reach hosts.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
)

// Defaults from the contracts in ARCHITECTURE.md.
const (
	DefaultProbeTimeout = 15 * time.Second // nvidia-smi can stall for seconds
)

// Resolver resolves a host alias through ssh_config (*sshconfig.Config).
type Resolver interface {
	Resolve(alias string, ov sshconfig.Overrides) (sshconfig.Settings, error)
}

// SourceFunc builds the probe of one host from its runner.
type SourceFunc func(run probe.Runner, host string) probe.Source

// Fleet is the set of hosts of one inventory and the means to reach them.
type Fleet struct {
	Inv    *inventory.Inventory
	SSH    Resolver
	Remote *sshexec.Pool  // runner of SSH hosts
	Local  sshexec.Runner // runner of `local: true` hosts
	// Helper is the gssh-helper pushed to hosts (NVML); nil when gssh has
	// none, and every host is probed through nvidia-smi for NoHelperWhy.
	Helper      *probe.HelperBinary
	NoHelperWhy string
	Memo        probe.Memo // where hosts that cannot run the helper are remembered; may be nil
	Source      SourceFunc // replaces the helper/nvidia-smi choice (tests); nil = that choice
}

// source picks how host h is probed: the helper with nvidia-smi as the
// fallback, or nvidia-smi alone when gssh carries no helper.
//
// Each attempt gets the probe timeout d of its own, so nvidia-smi still has
// its full time after the helper could not answer. (Pushing the helper has
// its own budget, probe.PushTimeout.)
func (f *Fleet) source(h inventory.Host, d time.Duration) probe.Source {
	run := f.Runner(h)
	if f.Source != nil {
		return within{f.Source(run, h.Name), d}
	}
	smi := within{probe.SMI(run, h.Name), d}
	if f.Helper == nil {
		return because{smi, f.NoHelperWhy}
	}
	return probe.Fallback(within{probe.Helper(run, h.Name, f.Helper, f.Memo, h.Local), d}, smi)
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
// merged with the inventory's own values, which win.
func (f *Fleet) Settings(name string) (sshconfig.Settings, error) {
	h, ok := f.Inv.Lookup(name)
	if !ok {
		return sshconfig.Settings{}, f.unknown(name)
	}
	if h.Local {
		return sshconfig.Settings{}, fmt.Errorf("%s is the local host and is not reached over SSH", name)
	}
	s, err := f.SSH.Resolve(h.Name, h.Overrides())
	if err != nil {
		return s, fmt.Errorf("%s: %w: %v", name, sshexec.ErrConfig, err)
	}
	return s, nil
}

func (f *Fleet) unknown(name string) error {
	where := "the implicit local-only inventory (no hosts file found)"
	if f.Inv.File != "" {
		where = f.Inv.File
	}
	return fmt.Errorf("%w %q: it is not in %s, which lists: %s; add it to the inventory's `hosts:`",
		sshexec.ErrUnknownHost, name, where, strings.Join(f.Inv.Names(), ", "))
}

// Runner returns the runner of host h.
func (f *Fleet) Runner(h inventory.Host) sshexec.Runner {
	if h.Local {
		return f.Local
	}
	return f.Remote
}

// Select returns the inventory hosts named in names (all when empty) that
// carry every label in labels, in inventory order. An unknown name is an
// error listing the known ones; a label that matches no host is an error too.
func (f *Fleet) Select(names, labels []string) ([]inventory.Host, error) {
	want := map[string]bool{}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, errors.New("--host was given an empty name")
		}
		if _, ok := f.Inv.Lookup(n); !ok {
			return nil, f.unknown(n)
		}
		want[n] = true
	}
	var out []inventory.Host
	for _, h := range f.Inv.Hosts {
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
		return nil, fmt.Errorf("%s carries all of the labels %s; labels in use: %s", scope, strings.Join(labels, ", "), strings.Join(f.labels(), ", "))
	}
	return out, nil
}

func (f *Fleet) labels() []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range f.Inv.Hosts {
		for _, l := range h.Labels {
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
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
}

// Probe probes hosts in parallel, one goroutine per host, and returns one
// report per host in the order given. It never fails as a whole: each
// host's failure is in its report.
func (f *Fleet) Probe(ctx context.Context, hosts []inventory.Host, opt ProbeOptions) []Report {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultProbeTimeout
	}
	out := make([]Report, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f.probeOne(ctx, h, opt)
		}()
	}
	wg.Wait()
	return out
}

func (f *Fleet) probeOne(ctx context.Context, h inventory.Host, opt ProbeOptions) Report {
	start := time.Now()
	r := Report{Host: h, Address: f.Address(h)}
	defer func() { r.Took = time.Since(start) }()
	if !h.Local {
		d, err := f.Remote.Connect(ctx, h.Name)
		if err != nil {
			r.Err = err
			r.Snapshot = failed(h.Name, err)
			r.Took = time.Since(start)
			return r
		}
		r.Connect = d
		if opt.Ping {
			if rtt, err := f.Remote.Ping(ctx, h.Name); err == nil {
				r.RTT = rtt
			}
		}
	}
	snap, err := f.source(h, opt.Timeout).Snapshot(ctx)
	snap.Host = h.Name
	r.Snapshot, r.Err = snap, err
	var xe *sshexec.ExitError
	switch {
	case err != nil && snap.State == "":
		r.Snapshot = failed(h.Name, err)
	case err != nil && errors.Is(err, sshexec.ErrTimeout) && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		r.Snapshot.Error = fmt.Sprintf("the GPU probe did not finish within %s (nvidia-smi may hang on a stuck GPU; raise --probe-timeout if the host is only slow)", opt.Timeout)
	case err != nil && !errors.As(err, &xe) && snap.Error == err.Error():
		r.Snapshot.Error = detail(h.Name, snap.State, err)
	}
	r.Took = time.Since(start)
	return r
}

// failed is the snapshot of a host that could not be probed at all.
func failed(host string, err error) probe.Snapshot {
	state := probe.TransportState(err)
	return probe.Snapshot{Host: host, State: state, Error: detail(host, state, err), Warnings: []string{}, GPUs: []probe.GPU{}}
}

// detail is err's text without what the row already says: the host name
// and the state ("gpu01: timed out: connect..." under state "timeout" is
// "connect...").
func detail(host string, state probe.HostState, err error) string {
	msg := strings.TrimPrefix(err.Error(), host+": ")
	for _, s := range []error{sshexec.ErrUnreachable, sshexec.ErrTimeout, sshexec.ErrAuth, sshexec.ErrHostKey,
		sshexec.ErrUnknownHostKey, sshexec.ErrConfig, sshexec.ErrNoOutcome, sshexec.ErrUnknownHost} {
		if rest, ok := strings.CutPrefix(msg, s.Error()); ok && errors.Is(err, s) {
			msg = strings.TrimLeft(rest, ": ")
			break
		}
	}
	if msg == "" {
		return string(state)
	}
	return msg
}
