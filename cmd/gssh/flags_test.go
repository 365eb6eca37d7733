package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

// run executes cmd with args the way Main does, without a service.
func run(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}

func testApp() *app {
	return &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, env: map[string]string{}, now: time.Now}
}

// Flags reach each command's options; bad values are refused before
// anything is called.
func TestSubmitFlags(t *testing.T) {
	var got *submitOptions
	capture := func(o *submitOptions) error { got = o; return nil }
	err := run(t, newSubmitCmd(testApp(), capture), "--host", "gpu01", "--gpus", "2", "--gpu-mem", "8G", "--env", "A=1", "--env", "B=x=y",
		"--timeout", "1:00:00", "--priority", "0", "--label", "a100,nvlink", "--log-limit", "1.5G", "--dry-run", "--", "python", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	if got.host != "gpu01" || got.gpus != 2 || got.mem != "8G" || !slices.Equal(got.labels, []string{"a100", "nvlink"}) || !got.dryRun ||
		!slices.Equal(got.argv, []string{"python", "train.py"}) {
		t.Errorf("options %+v", got)
	}
	var warned []string
	s, err := got.spec(func(w string) { warned = append(warned, w) })
	if err != nil {
		t.Fatal(err)
	}
	if s.MemPerGPU != 8<<30 || s.Timeout != time.Hour || s.LogLimit != 1536<<20 || s.Shell || len(s.Env) != 2 || s.Env[1] != (job.EnvVar{Key: "B", Value: "x=y"}) || len(warned) != 0 {
		t.Errorf("spec %+v, warnings %q", s, warned)
	}
	if err := run(t, newSubmitCmd(testApp(), capture), "--mem", "1G", "--gpu-mem", "1G", "--", "x"); err == nil || !strings.Contains(err.Error(), "the same flag") {
		t.Errorf("--mem and --gpu-mem: %v", err)
	}
}

// A relative --workdir, and the default, are taken from the current
// directory; ~ forms are the worker's and are kept.
func TestSubmitWorkdir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for in, want := range map[string]string{"": dir, "sub/x": dir + "/sub/x", "../up": filepath.Join(filepath.Dir(dir), "up"),
		"/abs": "/abs", "~": "~", "~/x": "~/x", "~bob/x": "~bob/x"} {
		o := &submitOptions{argv: []string{"true"}, workdir: in, gpus: 1}
		s, err := o.spec(func(string) {})
		if err != nil || s.Workdir != want {
			t.Errorf("--workdir %q: %q, %v; want %q", in, s.Workdir, err, want)
		}
	}
	o := &submitOptions{argv: []string{"true"}, mem: "100", gpus: 1}
	var warned []string
	if _, err := o.spec(func(w string) { warned = append(warned, w) }); err != nil || len(warned) != 1 || !strings.Contains(warned[0], "did you mean 100G?") {
		t.Errorf("tiny bare --mem: %q, %v", warned, err)
	}
}

func TestCancelFlags(t *testing.T) {
	newCmd := func(runF func(*cancelOptions) error) *cobra.Command { return newCancelCmd(testApp(), runF) }
	grace := service.DefaultGrace
	flagTable(t, newCmd, []flagCase[cancelOptions]{
		{args: []string{"--grace", "2s", "3", "#4"}, want: cancelOptions{names: []string{"3", "#4"}, grace: 2 * time.Second}},
		{args: []string{"--force", "12_3"}, want: cancelOptions{names: []string{"12_3"}, grace: grace, force: true}},
		{args: []string{"--mine", "--job-state", "PD", "-y"}, want: cancelOptions{names: []string{}, grace: grace, mine: true, jobState: "PD", yes: true}},
		{args: []string{"--user", "ann"}, want: cancelOptions{names: []string{}, grace: grace, user: "ann"}},
		{args: []string{"--grace", "-5s", "1"}, refused: "--grace -5s"},
		{args: []string{"--grace", "48h", "1"}, refused: "--grace 48h"},
		{args: nil, refused: "give the ids of the jobs to cancel"},
		{args: []string{"--mine", "1"}, refused: "give job ids or --user/--mine/--job-state, not both"},
		{args: []string{"--mine", "--user", "ann"}, refused: "--user and --mine: give one"},
		{args: []string{"--job-state", "held"}, refused: `--job-state "held": give queued or running`},
		{args: []string{"x"}, refused: `"x"`},
	})
}

func TestLogsFlags(t *testing.T) {
	newCmd := func(runF func(*logsOptions) error) *cobra.Command { return newLogsCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[logsOptions]{
		{args: []string{"7"}, want: logsOptions{id: 7, tail: -1}},
		{args: []string{"-f", "--tail", "5", "7"}, want: logsOptions{id: 7, follow: true, tail: 5}},
		{args: []string{"--attempt", "2", "7"}, want: logsOptions{id: 7, tail: -1, attempt: 2}},
		{args: []string{"12_3"}, want: logsOptions{id: 12, tail: -1}}, // offline: the array's id
		{args: []string{"--tail", "-2", "1"}, refused: "--tail -2"},
		{args: []string{"x"}, refused: `"x" is not a job id`},
		{args: []string{"--attempt", "-1", "1"}, refused: "--attempt -1: give an attempt's number, 1 or more (gssh show 1 lists them)"},
		{args: []string{"--attempt", "0", "1"}, refused: "--attempt 0: give an attempt's number"},
		{args: []string{"-f", "--attempt", "2", "1"}, refused: "--attempt goes without -f"},
		{args: []string{"1", "2"}, refused: "give one job id, e.g. gssh logs 12"},
	})
}

func TestScheduleFlags(t *testing.T) {
	newCmd := func(runF func(*scheduleOptions) error) *cobra.Command { return newScheduleCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[scheduleOptions]{
		{args: nil, want: scheduleOptions{wait: 30 * time.Second}},
		{args: []string{"--rebalance", "--dry-run", "--wait", "0s"}, want: scheduleOptions{rebalance: true, dryRun: true}},
		{args: []string{"--wait", "-1s"}, refused: "--wait -1s: give a duration from 0s to 24h"},
		{args: []string{"--wait", "100h"}, refused: "--wait 100h"},
		{args: []string{"now"}, refused: `unknown command "now"`},
	})
}

func TestShowFlags(t *testing.T) {
	newCmd := func(runF func(*showOptions) error) *cobra.Command { return newShowCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[showOptions]{
		{args: []string{"--json", "12"}, want: showOptions{id: 12, json: true}},
		{args: []string{"#7"}, want: showOptions{id: 7}},
		{args: []string{"0"}, refused: `"0" is not a job id`},
		{args: nil, refused: "give one job id, e.g. gssh show 12"},
	})
}

func TestPsFlags(t *testing.T) {
	newCmd := func(runF func(*psOptions) error) *cobra.Command { return newPsCmd(testApp(), runF) }
	flagTable(t, newCmd, []flagCase[psOptions]{
		{args: nil, want: psOptions{}},
		{args: []string{"-a", "--user", "ann", "--json"}, want: psOptions{all: true, user: "ann", json: true}},
		{args: []string{"--since", "30d"}, want: psOptions{all: true, since: "30d"}}, // --since implies -a
		{args: []string{"--since", ""}, refused: `--since "": give a time ago`},
		{args: []string{"--since", "lastweek"}, refused: `--since "lastweek" is not a time: give a time ago (90m, 2h, 7d, 2w)`},
		{args: []string{"--since", "2999-01-01"}, refused: `--since "2999-01-01" is 2999-01-01 00:00`},
		{args: []string{"7"}, refused: `unknown command "7"`},
	})
}

func TestEventsFlags(t *testing.T) {
	a := testApp()
	var ev *eventsOptions
	a.now = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	if err := run(t, newEventsCmd(a, func(o *eventsOptions) error { ev = o; return nil }), "--job", "42", "--user", "ann", "--since", "2h", "--kind", "job_end",
		"--kind", "job_start,host_down", "--json", "-n", "5"); err != nil ||
		ev.filter.Job != 42 || ev.filter.User != "ann" || !ev.filter.Since.Equal(a.now().Add(-2*time.Hour)) || len(ev.filter.Kinds) != 3 || !ev.json || ev.tail != 5 {
		t.Errorf("events %+v, %v", ev, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, `--since "yesterday" is not a time: give a time ago (90m, 2h, 7d, 2w), a date (2026-11-30)`},
		{[]string{"--since", ""}, `--since "": give a time ago`},
		{[]string{"--since", "2999-01-01"}, `--since "2999-01-01" is 2999-01-01 00:00`},
		{[]string{"--since", "-2h"}, `--since "-2h": give a time ago more than 0`},
		{[]string{"--kind", "job_start,job_finish"}, `--kind "job_finish": no such event; give one of job_submit, job_start, job_end`},
		{[]string{"--job", "x"}, `--job: "x" is not a job id`},
		{[]string{"-n", "-1"}, `--tail -1`},
	} {
		cmd := newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil })
		if err := run(t, cmd, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("events %q: %v, want %q", tt.args, err, tt.want)
		}
	}
}
