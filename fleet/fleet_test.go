package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
)

func parseInv(t *testing.T, yaml string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.Parse("hosts.yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// barrierSource answers only once every host's probe has started: a fan-out
// that probed hosts one after another would never get there.
type barrierSource struct {
	wg   *sync.WaitGroup
	host string
}

func (b barrierSource) Snapshot(ctx context.Context) (probe.Snapshot, error) {
	b.wg.Done()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return probe.Snapshot{Host: b.host, State: probe.HostOK}, nil
	case <-ctx.Done():
		return probe.Snapshot{}, fmt.Errorf("%s: %w: %v", b.host, sshexec.ErrTimeout, ctx.Err())
	}
}

func TestProbeIsParallel(t *testing.T) {
	const n = 32
	inv := &inventory.Inventory{}
	for i := range n {
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: fmt.Sprintf("h%02d", i), Local: true})
	}
	var wg sync.WaitGroup
	wg.Add(n)
	f := newFleet(t, fleet.Options{Inventory: inv, Source: func(_ probe.Runner, host string) probe.Source {
		return barrierSource{wg: &wg, host: host}
	}})
	reports := f.Probe(context.Background(), inv.Hosts, fleet.ProbeOptions{Timeout: 20 * time.Second})
	for i, r := range reports {
		if r.Host.Name != inv.Hosts[i].Name || r.Snapshot.State != probe.HostOK || !r.Probed() {
			t.Fatalf("report %d: %+v %v", i, r.Snapshot, r.Err)
		}
	}
}

type fakeResolver map[string]sshconfig.Settings

func (f fakeResolver) Resolve(alias string, ov sshconfig.Overrides) (sshconfig.Settings, error) {
	s, ok := f[alias]
	if !ok {
		s = sshconfig.Settings{Alias: alias, HostName: alias, Port: 22, User: "me"}
	}
	if ov.HostName != "" {
		s.HostName = ov.HostName
	}
	if ov.Port != 0 {
		s.Port = ov.Port
	}
	if ov.User != "" {
		s.User = ov.User
	}
	return s, nil
}

func TestSelectAndAddress(t *testing.T) {
	inv := parseInv(t, `
hosts:
  - name: a
    labels: [a100, nvlink]
  - name: b
    address: 10.0.0.2
    port: 2222
    user: alice
    labels: [a100]
  - name: c
    local: true
`)
	f := newFleet(t, fleet.Options{Inventory: inv, SSH: fakeResolver{"a": {Alias: "a", HostName: "gpu-a", Port: 22, User: "ml",
		ProxyJump: []sshconfig.Settings{{Alias: "bastion"}, {Alias: "inner"}}}}})
	names := func(hs []inventory.Host) string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		hosts, labels []string
		want          string
	}{
		{nil, nil, "a,b,c"},
		{[]string{"c", "a"}, nil, "a,c"},
		{nil, []string{"a100"}, "a,b"},
		{nil, []string{"a100", "nvlink"}, "a"},
		{[]string{"b"}, []string{"nvlink"}, ""},
	} {
		got, err := f.Select(c.hosts, c.labels)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), "none of b carries all of the labels nvlink; labels in use: a100, nvlink") {
				t.Errorf("Select(%v,%v) = %v, %v; want an error", c.hosts, c.labels, names(got), err)
			}
			continue
		}
		if err != nil || names(got) != c.want {
			t.Errorf("Select(%v,%v) = %s, %v; want %s", c.hosts, c.labels, names(got), err, c.want)
		}
	}
	if _, err := f.Select([]string{"zz"}, nil); !errors.Is(err, sshexec.ErrUnknownHost) || !strings.Contains(err.Error(), "lists: a, b, c") {
		t.Errorf("unknown host: %v", err)
	}
	if got := f.Address(inv.Hosts[0]); got != "ml@gpu-a:22 via bastion,inner" {
		t.Errorf("address a = %q", got)
	}
	if got := f.Address(inv.Hosts[1]); got != "alice@10.0.0.2:2222" {
		t.Errorf("address b = %q", got)
	}
	if got := f.Address(inv.Hosts[2]); got != "local" {
		t.Errorf("address c = %q", got)
	}
}

// A host that cannot be reached is a report with its state and a message
// that does not repeat the host name or the state.
func TestProbeUnreachableReport(t *testing.T) {
	inv := parseInv(t, "hosts:\n  - name: gone\n    address: 127.0.0.1\n    port: 1\n")
	f := newFleet(t, fleet.Options{Inventory: inv, SSH: fakeResolver{}, ConnectTimeout: 2 * time.Second})
	r := f.Probe(context.Background(), inv.Hosts, fleet.ProbeOptions{})[0]
	if r.Probed() || r.Snapshot.State != probe.HostUnreachable || !errors.Is(r.Err, sshexec.ErrUnreachable) {
		t.Fatalf("report %+v, err %v", r.Snapshot, r.Err)
	}
	if strings.HasPrefix(r.Snapshot.Error, "gone") || strings.Contains(r.Snapshot.Error, "host unreachable") || !strings.HasPrefix(r.Snapshot.Error, "connect to 127.0.0.1:1") {
		t.Errorf("error text repeats the row: %q", r.Snapshot.Error)
	}
}

func newFleet(t *testing.T, opt fleet.Options) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Without an inventory file the fleet is the local host alone, named by
// its short host name; with one, Reload picks up its changes and keeps the
// fleet as it was when the new file is bad.
func TestNewAndReload(t *testing.T) {
	home := t.TempDir()
	f := newFleet(t, fleet.Options{Home: home, LocalHost: "ctl.lab.example", SSH: fakeResolver{}})
	if inv := f.Inventory(); len(inv.Hosts) != 1 || inv.Hosts[0].Name != "ctl" || !inv.Hosts[0].Local {
		t.Errorf("implicit inventory %+v", inv.Hosts)
	}
	path := filepath.Join(t.TempDir(), "hosts.yaml")
	os.WriteFile(path, []byte("hosts:\n  - name: a\n"), 0o600)
	f = newFleet(t, fleet.Options{InventoryPath: path, Home: home, SSH: fakeResolver{}})
	os.WriteFile(path, []byte("hosts:\n  - name: a\n  - name: b\n    labels: [x]\n"), 0o600)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := f.Inventory().Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after reload: %v", got)
	}
	if _, ok := f.Lookup("b"); !ok {
		t.Error("Lookup(b) after reload")
	}
	os.WriteFile(path, []byte("hosts:\n  - nme: a\n"), 0o600)
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), path+":2") {
		t.Errorf("bad file: %v", err)
	}
	if got := f.Inventory().Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after a failed reload: %v", got)
	}
	if _, err := fleet.New(fleet.Options{SSHConfig: t.TempDir(), Home: home}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("--ssh-config a directory: %v", err)
	}
	if _, err := fleet.New(fleet.Options{InventoryPath: filepath.Join(home, "nope.yaml"), Home: home}); err == nil || !strings.Contains(err.Error(), "--inventory") {
		t.Errorf("--inventory missing: %v", err)
	}
}

// The planner's view: every inventory host with its facts and the
// snapshot of its report; a host without one is not probed yet.
func TestSchedHosts(t *testing.T) {
	inv := parseInv(t, "hosts:\n  - name: a\n    labels: [x]\n    reserve: 20%\n    drain: true\n  - name: b\n")
	reports := []fleet.Report{{Host: inv.Hosts[0], Snapshot: probe.Snapshot{Host: "a", State: probe.HostOK}}}
	got := fleet.SchedHosts(inv, reports)
	if len(got) != 2 || got[0].Name != "a" || !got[0].Drain || got[0].ReservePct != 20 || !slices.Equal(got[0].Labels, []string{"x"}) ||
		got[0].Snapshot.State != probe.HostOK || got[1].Name != "b" || got[1].Snapshot.State != "" {
		t.Errorf("SchedHosts = %+v", got)
	}
}

// A gssh run inside a job does not lend the job's marks to what it runs on
// the local host.
func TestLocalWithoutJobVars(t *testing.T) {
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true}}}
	f := newFleet(t, fleet.Options{Inventory: inv, SSH: fakeResolver{}, Environ: []string{"PATH=/usr/bin:/bin", "GSSH_JOB_ID=7", "GSSH_CLUSTER_ID=c", "GSSH_ATTEMPT=1", "KEEP=1"}})
	res, err := f.Runner(inv.Hosts[0]).Run(context.Background(), "ctl", "env", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); strings.Contains(out, "GSSH_") || !strings.Contains(out, "KEEP=1") {
		t.Errorf("env:\n%s", out)
	}
}
