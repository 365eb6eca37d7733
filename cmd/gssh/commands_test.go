package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/service"
)

// flagCase is one command line of a command's table test: the options
// its runF gets (want), or the error it is refused with before runF is
// called (refused, a part of the message).
type flagCase[O any] struct {
	args    []string
	want    O
	refused string
}

// flagTable runs each case through the command newCmd makes with a runF
// that captures its options, without a service.
func flagTable[O any](t *testing.T, newCmd func(runF func(*O) error) *cobra.Command, cases []flagCase[O]) {
	t.Helper()
	for _, tt := range cases {
		var got *O
		cmd := newCmd(func(o *O) error { got = o; return nil })
		err := run(t, cmd, tt.args...)
		switch {
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
			t.Errorf("%s %q: %v, want refused with %q", cmd.Name(), tt.args, err, tt.refused)
		case tt.refused != "" && got != nil:
			t.Errorf("%s %q: runF called with %+v, though refused", cmd.Name(), tt.args, *got)
		case tt.refused == "" && err != nil:
			t.Errorf("%s %q: %v", cmd.Name(), tt.args, err)
		case tt.refused == "" && (got == nil || !reflect.DeepEqual(*got, tt.want)):
			t.Errorf("%s %q: options %+v, want %+v", cmd.Name(), tt.args, got, tt.want)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHoldFlags(t *testing.T) {
	for _, release := range []bool{false, true} {
		newCmd := func(runF func(*holdOptions) error) *cobra.Command { return newHoldCmd(testApp(), runF) }
		if release {
			newCmd = func(runF func(*holdOptions) error) *cobra.Command { return newReleaseCmd(testApp(), runF) }
		}
		flagTable(t, newCmd, []flagCase[holdOptions]{
			{args: []string{"7", "#8", "12_3"}, want: holdOptions{names: []string{"7", "#8", "12_3"}, release: release}},
			{args: []string{"12[1-3]"}, want: holdOptions{names: []string{"12[1-3]"}, release: release}},
			{args: nil, refused: "give the ids of the jobs to "},
			{args: []string{"x"}, refused: `"x"`},
			{args: []string{"0"}, refused: `"0"`},
			{args: []string{"--grace", "1s", "7"}, refused: "unknown flag: --grace"},
		})
	}
}

func TestUpdateFlags(t *testing.T) {
	newCmd := func(runF func(*updateOptions) error) *cobra.Command { return newUpdateCmd(testApp(), runF) }
	prio, name, mem, cpus, limit, timeout := 3, "x", uint64(16<<30), 4, uint64(1<<30), 4*time.Hour
	flagTable(t, newCmd, []flagCase[updateOptions]{
		{args: []string{"7", "--priority", "3"}, want: updateOptions{names: []string{"7"}, priority: 3, req: service.UpdateRequest{Priority: &prio}}},
		{args: []string{"12", "13", "--timeout", "4:00:00", "--mem", "16G", "--name", "x", "--cpus", "4", "--host-mem", "16G", "--log-limit", "1G"},
			want: updateOptions{names: []string{"12", "13"}, timeout: "4:00:00", mem: "16G", name: "x", cpus: "4", hostMem: "16G", logLimit: "1G",
				req: service.UpdateRequest{Timeout: &timeout, Mem: &mem, Name: &name, CPUs: &cpus, HostMem: &mem, LogLimit: &limit}}},
		{args: []string{"7"}, refused: "nothing to update: give --priority"},
		{args: []string{"--priority", "1"}, refused: "give the ids of the jobs to update"},
		{args: []string{"7", "--timeout", "soon"}, refused: "--timeout: "},
		{args: []string{"7", "--mem", "lots"}, refused: "--mem: "},
		{args: []string{"7", "--cpus", "0"}, refused: `--cpus "0": give a whole number of CPUs`},
		{args: []string{"7", "--log-limit", ""}, refused: "--log-limit is empty"},
		{args: []string{"x", "--priority", "1"}, refused: `"x"`},
	})
}

func TestRequeueFlags(t *testing.T) {
	newCmd := func(runF func(*requeueOptions) error) *cobra.Command { return newRequeueCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[requeueOptions]{
		{args: []string{"7"}, want: requeueOptions{names: []string{"7"}, grace: service.DefaultGrace}},
		{args: []string{"7", "8", "--grace", "2m"}, want: requeueOptions{names: []string{"7", "8"}, grace: 2 * time.Minute}},
		{args: []string{"7", "--grace", "-1s"}, refused: "--grace -1s: give a duration from 0s to 1h"},
		{args: []string{"7", "--grace", "2h"}, refused: "--grace 2h"},
		{args: nil, refused: "give the ids of the jobs to requeue"},
		{args: []string{"7_"}, refused: `"7_"`},
	})
}

func TestWaitFlags(t *testing.T) {
	newCmd := func(runF func(*waitOptions) error) *cobra.Command { return newWaitCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[waitOptions]{
		{args: []string{"7", "8"}, want: waitOptions{names: []string{"7", "8"}, interval: 5 * time.Second}},
		{args: []string{"-q", "--interval", "2s", "12_3"}, want: waitOptions{names: []string{"12_3"}, interval: 2 * time.Second, quiet: true}},
		{args: []string{"7", "--interval", "100ms"}, refused: "--interval 100ms: give a duration from 1s to 1h"},
		{args: nil, refused: "give the ids of the jobs to wait for"},
		{args: []string{"seven"}, refused: `"seven"`},
	})
}

func TestRunFlags(t *testing.T) {
	a := testApp()
	var got *runOptions
	if err := run(t, newRunCmd(a, func(o *runOptions) error { got = o; return nil }), "--pty", "-q", "--gpus", "2", "--mem", "20G", "--host", "gpu01", "--", "bash", "-l"); err != nil {
		t.Fatal(err)
	}
	if !got.pty || !got.quiet || got.gpus != 2 || got.mem != "20G" || got.host != "gpu01" || !reflect.DeepEqual(got.argv, []string{"bash", "-l"}) {
		t.Errorf("run options %+v", got)
	}
	// gssh's flags end at the command's first word.
	if err := run(t, newRunCmd(a, func(o *runOptions) error { got = o; return nil }), "python", "eval.py", "--gpus", "8"); err != nil || got.gpus != 1 ||
		!reflect.DeepEqual(got.argv, []string{"python", "eval.py", "--gpus", "8"}) {
		t.Errorf("run python eval.py --gpus 8: %+v, %v", got, err)
	}
	for _, tt := range []struct {
		args    []string
		refused string
	}{
		{[]string{"--wait", "--", "true"}, "gssh run has no --wait (it runs one job in the foreground); gssh submit --wait does"},
		{[]string{"--array", "0-3", "--", "true"}, "gssh run has no --array"},
		{[]string{"--mem", "1G", "--gpu-mem", "1G", "--", "true"}, "--mem and --gpu-mem are the same flag"},
		{[]string{"--label", "", "--", "true"}, `--label "": an empty label`},
		{[]string{"--timeout", "", "--", "true"}, `--timeout "": no value given`},
	} {
		called := false
		cmd := newRunCmd(a, func(*runOptions) error { called = true; return nil })
		err := run(t, cmd, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.refused) || called {
			t.Errorf("run %q: %v (runF called: %v), want refused with %q", tt.args, err, called, tt.refused)
		}
	}
}

func TestResumeFlags(t *testing.T) {
	newCmd := func(runF func(*resumeOptions) error) *cobra.Command { return newResumeCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[resumeOptions]{
		{args: []string{"gpu01", "gpu02"}, want: resumeOptions{hosts: []string{"gpu01", "gpu02"}}},
		{args: nil, refused: "give the hosts to resume"},
		{args: []string{"--reason", "x", "gpu01"}, refused: "unknown flag: --reason"},
	})
}

func TestStateFlags(t *testing.T) {
	flagTable(t, func(runF func(*stateBackupOptions) error) *cobra.Command { return newStateBackupCmd(testApp(), runF) }, []flagCase[stateBackupOptions]{
		{args: []string{"b.db"}, want: stateBackupOptions{file: "b.db"}},
		{args: []string{"-q", "b.db"}, want: stateBackupOptions{file: "b.db", quiet: true}},
		{args: nil, refused: "give the file to write"},
		{args: []string{"a.db", "b.db"}, refused: "give the file to write"},
	})
	flagTable(t, func(runF func(*stateCheckOptions) error) *cobra.Command { return newStateCheckCmd(testApp(), runF) }, []flagCase[stateCheckOptions]{
		{args: nil, want: stateCheckOptions{}},
		{args: []string{"--quiet", "b.db"}, want: stateCheckOptions{file: "b.db", quiet: true}},
		{args: []string{"a.db", "b.db"}, refused: "accepts at most 1 arg"},
	})
	flagTable(t, func(runF func(*stateRestoreOptions) error) *cobra.Command { return newStateRestoreCmd(testApp(), runF) }, []flagCase[stateRestoreOptions]{
		{args: []string{"b.db"}, want: stateRestoreOptions{req: service.RestoreRequest{Backup: "b.db", Wait: 30 * time.Second}}},
		{args: []string{"--force", "--wait", "0s", "-q", "b.db"}, want: stateRestoreOptions{req: service.RestoreRequest{Backup: "b.db", Force: true}, quiet: true}},
		{args: []string{"--wait", "-1s", "b.db"}, refused: "--wait -1s: give a duration from 0s to 24h"},
		{args: nil, refused: "give the backup to restore"},
	})
}

func TestVersionFlags(t *testing.T) {
	flagTable(t, func(runF func(*versionOptions) error) *cobra.Command { return newVersionCmd(testApp(), runF) }, []flagCase[versionOptions]{
		{args: nil, want: versionOptions{}},
		{args: []string{"--json"}, want: versionOptions{json: true}},
		{args: []string{"now"}, refused: `unknown command "now"`},
	})
}

// gssh lab init's inventory: --inventory, else $GSSH_INVENTORY when it
// has a lab: block, else the machine-wide inventory (/etc/gssh/hosts.yaml;
// here the test's own).
func TestLabInitFlags(t *testing.T) {
	dir := t.TempDir()
	lab, personal, system := dir+"/lab.yaml", dir+"/mine.yaml", dir+"/etc-gssh-hosts.yaml"
	writeFile(t, lab, "lab:\n  state: /srv/gssh/state.db\nhosts:\n  - name: a\n")
	writeFile(t, personal, "hosts:\n  - name: a\n")
	for _, tt := range []struct {
		flag, env, want string
	}{
		{"", "", system},
		{"", lab, lab},
		{"", personal, system},
		{personal, lab, personal},
	} {
		a := testApp()
		a.inventoryPath, a.env["GSSH_INVENTORY"], a.systemInventory = tt.flag, tt.env, system
		var got *labInitOptions
		if err := run(t, newLabInitCmd(a, func(o *labInitOptions) error { got = o; return nil })); err != nil || got.inventory != tt.want {
			t.Errorf("--inventory %q, $GSSH_INVENTORY %q: %+v, %v; want %s", tt.flag, tt.env, got, err, tt.want)
		}
	}
	if err := run(t, newLabInitCmd(testApp(), func(*labInitOptions) error { t.Error("called"); return nil }), "now"); err == nil {
		t.Error("gssh lab init now: taken")
	}
}

func TestUsageFlags(t *testing.T) {
	flagTable(t, func(runF func(*usageOptions) error) *cobra.Command { return newUsageCmd(testApp(), runF) }, []flagCase[usageOptions]{
		{args: nil, want: usageOptions{}},
		{args: []string{"--json"}, want: usageOptions{json: true}},
		{args: []string{"ann"}, refused: `unknown command "ann"`},
	})
}

func TestGPUsHostsFlags(t *testing.T) {
	flagTable(t, func(runF func(*gpusOptions) error) *cobra.Command { return newGPUsCmd(testApp(), runF) }, []flagCase[gpusOptions]{
		{args: nil, want: gpusOptions{maxAge: 5 * time.Second}},
		{args: []string{"--host", "a,b", "--host", "c", "--label", "a100", "--json", "--watch", "2"},
			want: gpusOptions{hosts: []string{"a", "b", "c"}, labels: []string{"a100"}, json: true, watch: 2, maxAge: 5 * time.Second}},
		{args: []string{"--max-age", "0", "--fresh"}, want: gpusOptions{fresh: true}},
		{args: []string{"--max-age", "2h"}, refused: "--max-age 2h: give a duration from 0s to 1h"},
		{args: []string{"--watch", "0.1"}, refused: "--watch 0.1: give a number of seconds from 0.5 to 86400"},
		{args: []string{"--host", ""}, refused: "empty name"},
	})
	flagTable(t, func(runF func(*hostsOptions) error) *cobra.Command { return newHostsCmd(testApp(), runF) }, []flagCase[hostsOptions]{
		{args: nil, want: hostsOptions{}},
		{args: []string{"-v", "--host", "a", "--label", "x,y", "--json"}, want: hostsOptions{hosts: []string{"a"}, labels: []string{"x", "y"}, json: true, verbose: true}},
		{args: []string{"--host", ""}, refused: "empty name"},
	})
}

func TestSimFlags(t *testing.T) {
	base := simOptions{policies: "gssh,fifo,fifo-backfill,firstfit", walltime: "x2"}
	with := func(f func(*simOptions)) simOptions { o := base; f(&o); return o }
	flagTable(t, func(runF func(*simOptions) error) *cobra.Command { return newSimCmd(testApp(), runF) }, []flagCase[simOptions]{
		{args: []string{"--trace", "t.csv", "--lab", "2x8xV100-32G", "--users", "20", "--load", "1.3", "--plot", "p.svg", "-q"},
			want: with(func(o *simOptions) {
				o.trace, o.lab, o.users, o.load, o.plot, o.quiet = "t.csv", "2x8xV100-32G", 20, 1.3, "p.svg", true
			})},
		{args: []string{"--trace", "t.csv", "--lab", "l.json", "--reserve", "5"},
			want: with(func(o *simOptions) { o.trace, o.lab, o.reserve, o.reserveSet = "t.csv", "l.json", 5, true })},
		{args: []string{"--lab", "1x1xA100-80G"}, refused: "--trace: give the trace file"},
		{args: []string{"--trace", "t.csv"}, refused: "--lab: give the lab"},
		{args: []string{"--trace", "t.csv", "--lab", "1x1xA100-80G", "--load", "0"}, refused: "--load 0: give a load above 0"},
		{args: []string{"--trace", "t.csv", "--lab", "1x1xA100-80G", "--fill", "1.3", "--plot", "p.svg"}, refused: "--plot draws a replay over time"},
		{args: []string{"--trace", "t.csv", "--lab", "1x1xA100-80G", "--fill", "1.3", "--users", "3"}, refused: "--users: --fill places jobs with no clock"},
		{args: []string{"--trace", "t.csv", "--lab", "1x1xA100-80G", "--users", "3", "--users-from", "r.csv:c"}, refused: "--users and --users-from: give one"},
	})
}

func TestServeFlags(t *testing.T) {
	flagTable(t, func(runF func(*serveOptions) error) *cobra.Command { return newServeCmd(testApp(), runF) }, []flagCase[serveOptions]{
		{args: nil, want: serveOptions{interval: 2 * time.Second, streams: 2 * time.Second}},
		{args: []string{"--interval", "10s"}, want: serveOptions{interval: 10 * time.Second, streams: 2 * time.Second}},
		{args: []string{"--gpu-interval", "0"}, want: serveOptions{interval: 2 * time.Second}},
		{args: []string{"--gpu-interval", "500ms"}, want: serveOptions{interval: 2 * time.Second, streams: 500 * time.Millisecond}},
		{args: []string{"--gpu-interval", "2m"}, refused: "--gpu-interval 2m: give a duration from 100ms to 1m"},
		{args: []string{"--interval", "10ms"}, refused: "--interval 10ms: give a duration from 100ms to 1h"},
		{args: []string{"--interval", "-1s"}, refused: "--interval -1s: give a duration from 100ms to 1h"},
		{args: []string{"now"}, refused: `unknown command "now"`},
	})
}
