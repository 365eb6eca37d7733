package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const example = `
defaults:
  user: ml
  reserve: 15%
  labels: [lab]
hosts:
  - name: gpu01
  - name: gpu02
    address: 10.0.0.12
    port: 2222
    user: alice
    identity_file: ~/.ssh/lab_ed25519
    labels: [a100, nvlink]
    reserve: 20%
    drain: true
  - name: ctl
    local: true
`

func TestParse(t *testing.T) {
	inv, err := Parse("hosts.yaml", strings.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{
		{Name: "gpu01", User: "ml", ReservePct: 15, Labels: []string{"lab"}, Line: 7},
		{Name: "gpu02", Address: "10.0.0.12", Port: 2222, User: "alice", IdentityFile: "~/.ssh/lab_ed25519",
			Labels: []string{"a100", "nvlink"}, ReservePct: 20, Drain: true, Line: 8},
		{Name: "ctl", User: "ml", ReservePct: 15, Labels: []string{"lab"}, Local: true, Line: 16},
	}
	if !reflect.DeepEqual(inv.Hosts, want) {
		t.Errorf("hosts:\n got %+v\nwant %+v", inv.Hosts, want)
	}
	if h, ok := inv.Lookup("gpu02"); !ok || !h.HasLabel("nvlink") || h.HasLabel("lab") {
		t.Errorf("Lookup(gpu02) = %+v, %v", h, ok)
	}
	if o := want[1].Overrides(); o.HostName != "10.0.0.12" || o.Port != 2222 || o.User != "alice" {
		t.Errorf("overrides %+v", o)
	}
}

func TestParseDefaultReserve(t *testing.T) {
	inv, err := Parse("h.yaml", strings.NewReader("hosts:\n  - name: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Hosts[0].ReservePct != DefaultReservePct {
		t.Errorf("reserve = %v, want %v", inv.Hosts[0].ReservePct, DefaultReservePct)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "h.yaml: the file is empty"},
		{"malformed", "hosts:\n  - name: a\n   port: 2\n", "h.yaml:1: did not find"},
		{"tab", "hosts:\n\t- name: a\n", "h.yaml:2:"},
		{"unknown top", "hostz:\n  - name: a\n", "h.yaml:1: unknown key \"hostz\""},
		{"unknown host key", "hosts:\n  - name: a\n    adress: x\n", "h.yaml:3: unknown key \"adress\""},
		{"duplicate", "hosts:\n  - name: a\n  - name: b\n  - name: a\n", "h.yaml:4: duplicate host name \"a\" (first defined at line 2)"},
		{"no name", "hosts:\n  - port: 22\n", "h.yaml:2: host without `name:`"},
		{"bad port", "hosts:\n  - name: a\n    port: 70000\n", "h.yaml:3: port \"70000\""},
		{"port word", "hosts:\n  - name: a\n    port: ssh\n", "h.yaml:3: port \"ssh\""},
		{"bad reserve", "hosts:\n  - name: a\n    reserve: 120%\n", "h.yaml:3: reserve \"120%\""},
		{"bad bool", "hosts:\n  - name: a\n    drain: maybe\n", "h.yaml:3: `drain` must be true or false"},
		{"hostile name", "hosts:\n  - name: \"a;rm -rf /\"\n", "h.yaml:2: host name"},
		{"user@ address", "hosts:\n  - name: a\n    address: bob@x\n", "h.yaml:3: address"},
		{"hosts not list", "hosts: gpu01\n", "h.yaml:1: `hosts` must be a list"},
		{"hosts empty", "hosts: []\n", "`hosts` is empty"},
		{"no hosts", "defaults:\n  user: x\n", "no `hosts:` list"},
		{"name default", "defaults:\n  name: x\nhosts:\n  - name: a\n", "h.yaml:2: `name` cannot be a default"},
		{"labels scalar", "hosts:\n  - name: a\n    labels: a100\n", "h.yaml:3: `labels` must be a list"},
		{"not mapping", "- a\n- b\n", "h.yaml:1: expected a mapping"},
		{"two documents", "hosts:\n  - name: a\n---\nhosts:\n  - name: b\n", "h.yaml:3: a second YAML document"},
		{"ipv6 brackets", "hosts:\n  - name: a\n    address: \"[::1]\"\n", "h.yaml:3: address \"[::1]\""},
		{"two local", "hosts:\n  - name: a\n    local: true\n  - name: b\n    local: true\n", "h.yaml:4: host \"b\" is `local: true` but \"a\" already is"},
		{"local with an address", "hosts:\n  - name: a\n    local: true\n    address: 10.0.0.1\n", "h.yaml:4: host \"a\" is `local: true`: `address` has no meaning there"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("h.yaml", strings.NewReader(c.in))
			if err == nil {
				t.Fatalf("no error for %q", c.in)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	home := t.TempDir()
	if _, err := Locate("", "", home); err != ErrNotFound && !fileExists("/etc/gssh/hosts.yaml") {
		t.Errorf("Locate with nothing = %v, want ErrNotFound", err)
	}
	cfg := filepath.Join(home, ".config", "gssh", "hosts.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("hosts:\n  - name: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Locate("", "", home); err != nil || p != cfg {
		t.Errorf("Locate = %q, %v; want %q", p, err, cfg)
	}
	other := filepath.Join(home, "other.yaml")
	os.WriteFile(other, []byte("hosts:\n  - name: b\n"), 0o644)
	if p, _ := Locate("", other, home); p != other {
		t.Errorf("env path not preferred: %q", p)
	}
	if p, _ := Locate(other, "/nonexistent", home); p != other {
		t.Errorf("flag path not preferred: %q", p)
	}
	if _, err := Locate("/nonexistent/h.yaml", "", home); err == nil || !strings.Contains(err.Error(), "--inventory") {
		t.Errorf("missing flag file: %v", err)
	}
	if _, err := Locate("", "/nonexistent/h.yaml", home); err == nil || !strings.Contains(err.Error(), "$GSSH_INVENTORY") {
		t.Errorf("missing env file: %v", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"10%": 10, "10": 10, " 12.5 % ": 12.5, "0": 0} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", "-1%", "100%", "NaN"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q) accepted", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(example)
	f.Add("hosts:\n  - name: a\n")
	f.Add("hosts: [")
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := Parse("f.yaml", strings.NewReader(s))
		if err == nil && len(inv.Hosts) == 0 {
			t.Fatal("accepted an inventory without hosts")
		}
	})
}

// The example shipped in the repository must stay valid.
func TestExampleFile(t *testing.T) {
	inv, err := Load("../hosts.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Names(), ","); got != "gpu01,gpu02,ctl" {
		t.Errorf("hosts = %s", got)
	}
	if h, _ := inv.Lookup("ctl"); !h.Local {
		t.Error("ctl is not local")
	}
	// A copied example must not force a login name on every host: that
	// fails every host with "auth failed" until one finds the line.
	if h, _ := inv.Lookup("gpu01"); h.User != "" {
		t.Errorf("gpu01 gets user %q from the example's defaults", h.User)
	}
}
