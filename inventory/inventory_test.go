package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
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
			Labels: []string{"a100", "nvlink"}, ReservePct: 20, Drain: true, DrainLine: 15, Line: 8},
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

// reap_foreign: report (the default) or kill, per host or in defaults.
func TestParseReapForeign(t *testing.T) {
	inv, err := Parse("h.yaml", strings.NewReader("defaults:\n  reap_foreign: kill\nhosts:\n  - name: a\n  - name: b\n    reap_foreign: report\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Hosts[0].ReapForeign || inv.Hosts[1].ReapForeign {
		t.Errorf("hosts %+v: want a to kill, b to report", inv.Hosts)
	}
	inv, err = Parse("h.yaml", strings.NewReader("hosts:\n  - name: a\n"))
	if err != nil || inv.Hosts[0].ReapForeign {
		t.Errorf("default: %+v, %v; want report", inv.Hosts, err)
	}
}

// run_as: login (the default) or sudo, per host or in defaults.
func TestParseRunAs(t *testing.T) {
	inv, err := Parse("h.yaml", strings.NewReader("defaults:\n  run_as: sudo\nhosts:\n  - name: a\n  - name: b\n    run_as: login\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Hosts[0].RunAsSudo || inv.Hosts[1].RunAsSudo {
		t.Errorf("hosts %+v: want a through sudo, b as the login", inv.Hosts)
	}
	_, err = Parse("h.yaml", strings.NewReader("hosts:\n  - name: a\n    run_as: root\n"))
	if err == nil || err.Error() != `h.yaml:3: run_as "root": give one of login, sudo` {
		t.Errorf("run_as: root: %v", err)
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
		{"policy unknown key", "hosts:\n  - name: a\npolicy:\n  ordr: fifo\n", "h.yaml:4: unknown key \"ordr\" in `policy`; it takes order, placement, backfill"},
		{"policy not mapping", "hosts:\n  - name: a\npolicy: fair\n", "h.yaml:3: `policy` must be a mapping"},
		{"policy order", "hosts:\n  - name: a\npolicy:\n  order: lottery\n", "h.yaml:4: policy order \"lottery\": give one of fifo, priority, fairshare"},
		{"policy placement", "hosts:\n  - name: a\npolicy:\n  placement: worst\n", "h.yaml:4: policy placement \"worst\": give one of firstfit, bestfit"},
		{"policy backfill", "hosts:\n  - name: a\npolicy:\n  backfill: [easy]\n", "h.yaml:4: policy backfill a list: give one of none, skip, easy"},
		{"fairshare unknown key", "hosts:\n  - name: a\npolicy:\n  fairshare:\n    halflife: 24h\n", "h.yaml:5: unknown key \"halflife\" in `policy fairshare`; it takes half_life or window"},
		{"fairshare both", "hosts:\n  - name: a\npolicy:\n  fairshare:\n    half_life: 24h\n    window: 7-00:00:00\n", "h.yaml:6: `policy fairshare` has both a half_life and a window; give one"},
		{"zero half-life", "hosts:\n  - name: a\npolicy:\n  fairshare:\n    half_life: 0\n", "h.yaml:5: policy fairshare half_life \"0\": give a duration more than 0"},
		{"zero window", "hosts:\n  - name: a\npolicy:\n  fairshare: {window: 0s}\n", "h.yaml:4: policy fairshare window \"0s\": give a duration more than 0"},
		{"negative estimate", "hosts:\n  - name: a\npolicy:\n  backfill_estimate: -1h\n", "h.yaml:4: policy backfill_estimate \"-1h\": give a duration more than 0"},
		{"default timeout word", "hosts:\n  - name: a\npolicy:\n  default_timeout: forever\n", "h.yaml:4: policy default_timeout \"forever\""},
		{"zero weight", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {weight: 0}\n", "h.yaml:5: user \"alice\": weight \"0\": give a number from 0.001 to 1000000"},
		{"tiny weight", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {weight: 1e-320}\n", "h.yaml:5: user \"alice\": weight \"1e-320\": give a number from 0.001"},
		{"quoted weight", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {weight: \"2\"}\n", "h.yaml:5: user \"alice\": weight \"2\": give a number"},
		{"hostile user", "hosts:\n  - name: a\npolicy:\n  users:\n    \"ann;rm -rf /\": {weight: 2}\n", "h.yaml:5: user name \"ann;rm -rf /\": give a login name"},
		{"misplaced half-life", "hosts:\n  - name: a\npolicy:\n  half_life: 24h\n", "h.yaml:4: `half_life` belongs in the fairshare block: `fairshare: {half_life: 24h}`"},
		{"days suffix", "hosts:\n  - name: a\npolicy:\n  fairshare: {window: 7d}\n", "h.yaml:4: policy fairshare window \"7d\" is not a duration: give a Go duration (24h, 90m) or Slurm's [D-]HH:MM:SS"},
		{"half-life too short", "hosts:\n  - name: a\npolicy:\n  fairshare: {half_life: 1ns}\n", "h.yaml:4: policy fairshare half_life \"1ns\": give at least 1m0s"},
		{"rebalance word", "hosts:\n  - name: a\npolicy:\n  rebalance: sometimes\n", "h.yaml:4: `policy rebalance` must be true or false, found \"sometimes\""},
		{"negative weight", "hosts:\n  - name: a\npolicy:\n  weights: {fairshare: 1, age: -1}\n", "h.yaml:4: policy weights age \"-1\": give a number from 0 to 1000000"},
		{"weights all zero", "hosts:\n  - name: a\npolicy:\n  weights:\n    fairshare: 0\n    age: 0\n", "h.yaml:5: `policy weights` are all 0: give at least one factor a weight more than 0"},
		{"unknown weight", "hosts:\n  - name: a\npolicy:\n  weights:\n    fairshare: 1\n    qos: 2\n", "h.yaml:6: unknown key \"qos\" in `policy weights`; it takes fairshare, age, size"},
		{"weights a list", "hosts:\n  - name: a\npolicy:\n  weights: [1, 2]\n", "h.yaml:4: `policy weights` must be a mapping"},
		{"weight a word", "hosts:\n  - name: a\npolicy:\n  weights: {age: lots}\n", "h.yaml:4: policy weights age \"lots\": give a number"},
		{"max_age zero", "hosts:\n  - name: a\npolicy:\n  max_age: 0\n", "h.yaml:4: policy max_age \"0\": give a duration more than 0"},
		{"max_age negative", "hosts:\n  - name: a\npolicy:\n  max_age: -1d\n", "h.yaml:4: policy max_age \"-1d\": give a duration more than 0"},
		{"reserve_depth zero", "hosts:\n  - name: a\npolicy:\n  reserve_depth: 0\n", "h.yaml:4: policy reserve_depth \"0\": give a whole number from 1 to 1000"},
		{"reserve_depth big", "hosts:\n  - name: a\npolicy:\n  reserve_depth: 1001\n", "h.yaml:4: policy reserve_depth \"1001\": give a whole number from 1 to 1000"},
		{"reserve_depth fraction", "hosts:\n  - name: a\npolicy:\n  reserve_depth: 2.5\n", "h.yaml:4: policy reserve_depth \"2.5\": give a whole number"},
		{"favor_small word", "hosts:\n  - name: a\npolicy:\n  favor_small: maybe\n", "h.yaml:4: `policy favor_small` must be true or false"},
		{"min_runtime zero", "hosts:\n  - name: a\npolicy:\n  min_runtime: 0s\n", "h.yaml:4: policy min_runtime \"0s\": give a duration more than 0"},
		{"down_after tiny", "hosts:\n  - name: a\npolicy:\n  down_after: 1ns\n", "h.yaml:4: policy down_after \"1ns\": give at least 1s"},
		{"lost_after zero", "hosts:\n  - name: a\npolicy:\n  lost_after: 0\n", "h.yaml:4: policy lost_after \"0\": give a duration more than 0"},
		{"keep_events short", "hosts:\n  - name: a\npolicy:\n  keep_events: 12h\n", "h.yaml:4: policy keep_events \"12h\": give at least a day, such as 30d or 720h"},
		{"keep_events word", "hosts:\n  - name: a\npolicy:\n  keep_events: soon\n", "h.yaml:4: policy keep_events \"soon\" is not a duration"},
		{"keep_jobs negative", "hosts:\n  - name: a\npolicy:\n  keep_jobs: -3d\n", "h.yaml:4: policy keep_jobs \"-3d\": give a duration more than 0, such as 90d"},
		{"keep_jobs zero", "hosts:\n  - name: a\npolicy:\n  keep_jobs: 0d\n", "h.yaml:4: policy keep_jobs \"0d\": give a duration more than 0"},
		{"keep_job_dirs word", "hosts:\n  - name: a\npolicy:\n  keep_job_dirs: fortnight\n", "h.yaml:4: policy keep_job_dirs \"fortnight\" is not a duration: give days or weeks (90d, 2w"},
		{"keep_job_dirs tiny", "hosts:\n  - name: a\npolicy:\n  keep_job_dirs: 10ms\n", "h.yaml:4: policy keep_job_dirs \"10ms\": give at least 1s"},
		{"keep_jobs list", "hosts:\n  - name: a\npolicy:\n  keep_jobs: [90d]\n", "h.yaml:4: policy keep_jobs a list: give days or weeks"},
		{"log_limit zero", "hosts:\n  - name: a\npolicy:\n  log_limit: 0\n", "h.yaml:4: policy log_limit: invalid memory size \"0\": must be more than 0"},
		{"log_limit unit", "hosts:\n  - name: a\npolicy:\n  log_limit: 1 GB\n", "h.yaml:4: policy log_limit: invalid memory size \"1 GB\": remove the spaces"},
		{"preempt_after word", "hosts:\n  - name: a\npolicy:\n  preempt_after: soon\n", "h.yaml:4: policy preempt_after \"soon\" is not a duration"},
		{"duration overflow", "hosts:\n  - name: a\npolicy:\n  default_timeout: 999999999h\n", "h.yaml:4: policy default_timeout \"999999999h\" is not a duration"},
		{"negative weight", "hosts:\n  - name: a\npolicy:\n  users:\n    alice:\n      weight: -2\n", "h.yaml:6: user \"alice\": weight \"-2\""},
		{"weight word", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {weight: lots}\n", "h.yaml:5: user \"alice\": weight \"lots\""},
		{"user shorthand", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: 2\n", "h.yaml:5: user \"alice\": give a mapping such as `{weight: 2}`"},
		{"user unknown key", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {wieght: 2}\n", "h.yaml:5: unknown key \"wieght\" for user \"alice\"; a user takes weight"},
		{"users list", "hosts:\n  - name: a\npolicy:\n  users: [alice]\n", "h.yaml:4: `policy users` must map user names"},
		{"duplicate user", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {weight: 1}\n    alice: {weight: 2}\n", "h.yaml:6: \"alice\" is given twice in `policy users` (first at line 5); keep one"},
		{"zero max_gpus", "hosts:\n  - name: a\npolicy:\n  users:\n    bob: {max_gpus: 0}\n", "h.yaml:5: user \"bob\": max_gpus \"0\": give a whole number more than 0, the most GPUs the user's running jobs may hold at once"},
		{"negative max_jobs", "hosts:\n  - name: a\npolicy:\n  users:\n    bob:\n      max_jobs: -1\n", "h.yaml:6: user \"bob\": max_jobs \"-1\": give a whole number more than 0, the most jobs the user may run at once"},
		{"fractional cap", "hosts:\n  - name: a\npolicy:\n  users:\n    bob: {max_gpus: 1.5}\n", "h.yaml:5: user \"bob\": max_gpus \"1.5\": give a whole number"},
		{"quoted cap", "hosts:\n  - name: a\npolicy:\n  users:\n    bob: {max_jobs: \"2\"}\n", "h.yaml:5: user \"bob\": max_jobs \"2\": give a whole number"},
		{"admin word", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {admin: sure}\n", "h.yaml:5: `user \"alice\" admin` must be true or false, found \"sure\""},
		{"user cap typo", "hosts:\n  - name: a\npolicy:\n  users:\n    bob: {max_gpu: 4}\n", "h.yaml:5: unknown key \"max_gpu\" for user \"bob\"; a user takes weight, admin, max_gpus, max_jobs"},
		{"zero default cap", "hosts:\n  - name: a\npolicy:\n  default_user:\n    max_gpus: 0\n", "h.yaml:5: default_user: max_gpus \"0\": give a whole number more than 0"},
		{"default_user weight", "hosts:\n  - name: a\npolicy:\n  default_user: {weight: 2}\n", "h.yaml:4: unknown key \"weight\" in `policy default_user`; it takes max_gpus, max_jobs (a weight and admin are given per user, in `users`)"},
		{"default_user scalar", "hosts:\n  - name: a\npolicy:\n  default_user: 8\n", "h.yaml:4: `policy default_user` must be a mapping (such as `{max_gpus: 8}`), found \"8\""},
		{"default_user twice", "hosts:\n  - name: a\npolicy:\n  default_user: {max_jobs: 1, max_jobs: 2}\n", "h.yaml:4: \"max_jobs\" is given twice in `policy default_user`"},
		{"duplicate host key", "hosts:\n  - name: a\n    port: 22\n    port: 23\n", "h.yaml:4: \"port\" is given twice in a host (first at line 3)"},
		{"duplicate top key", "hosts:\n  - name: a\npolicy: {}\npolicy: {}\n", "h.yaml:4: \"policy\" is given twice in the top level"},
		{"local with an address", "hosts:\n  - name: a\n    local: true\n    address: 10.0.0.1\n", "h.yaml:4: host \"a\" is `local: true`: `address` has no meaning there"},
		{"reap_foreign word", "hosts:\n  - name: a\n    reap_foreign: yes\n", "h.yaml:3: reap_foreign \"yes\": give one of report, kill"},
		{"reap_foreign default", "defaults:\n  reap_foreign: [kill]\nhosts:\n  - name: a\n", "h.yaml:2: reap_foreign a list: give one of report, kill"},
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
	system := filepath.Join(t.TempDir(), "etc-gssh-hosts.yaml") // this test's machine-wide file
	if _, err := Locate("", "", home, system); err != ErrNotFound {
		t.Errorf("Locate with nothing = %v, want ErrNotFound", err)
	}
	if err := os.WriteFile(system, []byte("hosts:\n  - name: s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Locate("", "", home, system); err != nil || p != system {
		t.Errorf("Locate with the machine-wide file only = %q, %v; want %q", p, err, system)
	}
	if _, err := Locate("", "", home, ""); err != ErrNotFound {
		t.Errorf("Locate with no machine-wide file named = %v, want ErrNotFound", err)
	}
	cfg := filepath.Join(home, ".config", "gssh", "hosts.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("hosts:\n  - name: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Locate("", "", home, system); err != nil || p != cfg {
		t.Errorf("Locate = %q, %v; want %q", p, err, cfg)
	}
	other := filepath.Join(home, "other.yaml")
	os.WriteFile(other, []byte("hosts:\n  - name: b\n"), 0o644)
	if p, _ := Locate("", other, home, system); p != other {
		t.Errorf("env path not preferred: %q", p)
	}
	if p, _ := Locate(other, "/nonexistent", home, system); p != other {
		t.Errorf("flag path not preferred: %q", p)
	}
	if _, err := Locate("/nonexistent/h.yaml", "", home, system); err == nil || !strings.Contains(err.Error(), "--inventory") {
		t.Errorf("missing flag file: %v", err)
	}
	if _, err := Locate("", "/nonexistent/h.yaml", home, system); err == nil || !strings.Contains(err.Error(), "$GSSH_INVENTORY") {
		t.Errorf("missing env file: %v", err)
	}
}

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
func TestParsePolicy(t *testing.T) {
	in := "hosts:\n  - name: a\npolicy:\n  order: priority\n  placement: firstfit\n  backfill: skip\n" +
		"  fairshare: {window: 7-00:00:00}\n  users:\n    alice: {weight: 2, admin: true}\n    bob: {weight: 0.5, max_gpus: 4, max_jobs: 2}\n    carol: {max_jobs: 1}\n" +
		"  default_user: {max_gpus: 8}\n" +
		"  backfill_estimate: 12h\n  default_timeout: 1-00:00:00\n" +
		"  rebalance: true\n  preempt_after: 1s\n  min_runtime: 00:20:00\n  down_after: 30s\n  lost_after: 10m\n" +
		"  keep_events: 90d\n" +
		"  keep_jobs: 30d\n  keep_job_dirs: 36h\n  log_limit: 2G\n" +
		"  weights: {fairshare: 1, age: 0.5, size: 0.1}\n  max_age: 14d\n  favor_small: true\n  reserve_depth: 4\n"
	inv, err := Parse("h.yaml", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		Plan: sched.Policy{Order: sched.OrderPriority, Fit: sched.FitFirst, Backfill: sched.BackfillSkip,
			FairShare: sched.FairShare{Window: 7 * 24 * time.Hour},
			Users: map[string]sched.UserShare{"alice": {Weight: 2, Admin: true}, "bob": {Weight: 0.5, Caps: sched.Caps{MaxGPUs: 4, MaxJobs: 2}},
				"carol": {Weight: 1, Caps: sched.Caps{MaxJobs: 1}}},
			DefaultUser:      sched.Caps{MaxGPUs: 8},
			BackfillEstimate: 12 * time.Hour, DefaultTimeout: 24 * time.Hour,
			Rebalance: true, PreemptAfter: time.Second, MinRuntime: 20 * time.Minute,
			Weights: sched.Weights{FairShare: 1, Age: 0.5, Size: 0.1}, MaxAge: 14 * 24 * time.Hour, ReserveDepth: 4},
		Health:     health.Rules{DownAfter: 30 * time.Second, LostAfter: 10 * time.Minute},
		Keep:       job.Keep{Jobs: 30 * 24 * time.Hour, JobDirs: 36 * time.Hour},
		KeepEvents: 90 * 24 * time.Hour, LogLimit: 2 << 30}
	if !reflect.DeepEqual(inv.Policy, want) {
		t.Errorf("policy:\n got %+v\nwant %+v", inv.Policy, want)
	}
	if err := inv.Policy.Check(); err != nil {
		t.Error(err)
	}
	// No block: the zero policy, which the planner reads as the default.
	inv, err = Parse("h.yaml", strings.NewReader("hosts:\n  - name: a\n"))
	if err != nil || !reflect.DeepEqual(inv.Policy, Policy{}) {
		t.Errorf("no policy block: %+v, %v", inv.Policy, err)
	}
}

func TestExampleFile(t *testing.T) {
	inv, err := Load("../hosts.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Names(), ","); got != "gpu01,gpu02,ctl" {
		t.Errorf("hosts = %s", got)
	}
	if h, _ := inv.Lookup("ctl"); !h.Local || h.ReapForeign {
		t.Errorf("ctl: %+v, want local and reap_foreign: report", h)
	}
	if h, _ := inv.Lookup("gpu02"); !h.ReapForeign {
		t.Error("gpu02 does not kill foreign processes")
	}
	// A copied example must not force a login name on every host: that
	// fails every host with "auth failed" until one finds the line.
	if h, _ := inv.Lookup("gpu01"); h.User != "" {
		t.Errorf("gpu01 gets user %q from the example's defaults", h.User)
	}
	// Its commented notify block, uncommented, is one the parser takes.
	b, _ := os.ReadFile("../hosts.example.yaml")
	text, block, ok := strings.Cut(string(b), "\n# notify:")
	if !ok {
		t.Fatal("no commented notify block in hosts.example.yaml")
	}
	text += "\nnotify:" + strings.ReplaceAll(block, "\n# ", "\n")
	inv, err = Parse("example", strings.NewReader(text))
	if err != nil || len(inv.Notify.Webhooks) != 1 || inv.Notify.Email == nil || len(inv.Notify.Email.Admins) != 1 {
		t.Errorf("the example's notify block: %v %+v", err, inv)
	}
}
