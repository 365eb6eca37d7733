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
	return &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, env: map[string]string{}}
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

func TestJobCommandFlags(t *testing.T) {
	a := testApp()
	var cancel *cancelOptions
	if err := run(t, newCancelCmd(a, func(o *cancelOptions) error { cancel = o; return nil }), "--grace", "2s", "3", "#4"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cancel.names, []string{"3", "#4"}) || cancel.grace != 2*time.Second {
		t.Errorf("cancel %+v", cancel)
	}
	var logs *logsOptions
	if err := run(t, newLogsCmd(a, func(o *logsOptions) error { logs = o; return nil }), "-f", "--tail", "5", "7"); err != nil || logs.id != 7 || !logs.follow || logs.tail != 5 {
		t.Errorf("logs %+v, %v", logs, err)
	}
	if err := run(t, newLogsCmd(a, func(o *logsOptions) error { logs = o; return nil }), "--attempt", "2", "7"); err != nil || logs.id != 7 || logs.attempt != 2 {
		t.Errorf("logs --attempt %+v, %v", logs, err)
	}
	var sched *scheduleOptions
	if err := run(t, newScheduleCmd(a, func(o *scheduleOptions) error { sched = o; return nil })); err != nil || sched.wait != 30*time.Second {
		t.Errorf("schedule %+v, %v", sched, err)
	}
	var show *showOptions
	if err := run(t, newShowCmd(a, func(o *showOptions) error { show = o; return nil }), "--json", "12"); err != nil || show.id != 12 || !show.json {
		t.Errorf("show %+v, %v", show, err)
	}
	var ps *psOptions
	if err := run(t, newPsCmd(a, func(o *psOptions) error { ps = o; return nil }), "-a", "--user", "ann"); err != nil || !ps.all || ps.user != "ann" {
		t.Errorf("ps %+v, %v", ps, err)
	}
	var ev *eventsOptions
	a.now = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	if err := run(t, newEventsCmd(a, func(o *eventsOptions) error { ev = o; return nil }), "--job", "42", "--user", "ann", "--since", "2h", "--kind", "job_end",
		"--kind", "job_start,host_down", "--json", "-n", "5"); err != nil ||
		ev.filter.Job != 42 || ev.filter.User != "ann" || !ev.filter.Since.Equal(a.now().Add(-2*time.Hour)) || len(ev.filter.Kinds) != 3 || !ev.json || ev.tail != 5 {
		t.Errorf("events %+v, %v", ev, err)
	}
	if err := run(t, newPsCmd(a, func(o *psOptions) error { ps = o; return nil }), "--since", "30d"); err != nil || !ps.all || ps.since != "30d" {
		t.Errorf("ps --since (implies -a) %+v, %v", ps, err)
	}
	for _, tt := range []struct {
		cmd  *cobra.Command
		args []string
		want string
	}{
		{newScheduleCmd(a, func(*scheduleOptions) error { t.Error("called"); return nil }), []string{"--wait", "-1s"}, "--wait -1s: give a duration from 0s to 24h0m0s"},
		{newScheduleCmd(a, func(*scheduleOptions) error { t.Error("called"); return nil }), []string{"--wait", "100h"}, "--wait 100h0m0s"},
		{newCancelCmd(a, func(*cancelOptions) error { t.Error("called"); return nil }), []string{"--grace", "-5s", "1"}, "--grace -5s"},
		{newCancelCmd(a, func(*cancelOptions) error { t.Error("called"); return nil }), []string{"--grace", "48h", "1"}, "--grace 48h0m0s"},
		{newCancelCmd(a, func(*cancelOptions) error { t.Error("called"); return nil }), nil, "give the ids of the jobs to cancel"},
		{newLogsCmd(a, func(*logsOptions) error { t.Error("called"); return nil }), []string{"--tail", "-2", "1"}, "--tail -2"},
		{newLogsCmd(a, func(*logsOptions) error { t.Error("called"); return nil }), []string{"x"}, `"x" is not a job id`},
		{newLogsCmd(a, func(*logsOptions) error { t.Error("called"); return nil }), []string{"--attempt", "-1", "1"}, "--attempt -1: give an attempt's number, 1 or more (gssh show 1 lists them)"},
		{newLogsCmd(a, func(*logsOptions) error { t.Error("called"); return nil }), []string{"-f", "--attempt", "2", "1"}, "--attempt goes without -f"},
		{newShowCmd(a, func(*showOptions) error { t.Error("called"); return nil }), []string{"0"}, `"0" is not a job id`},
		{newShowCmd(a, func(*showOptions) error { t.Error("called"); return nil }), nil, "give one job id, e.g. gssh show 12"},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--since", "yesterday"}, `--since "yesterday" is not a time: give a time ago (90m, 2h, 7d, 2w), a date (2026-11-30)`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--since", ""}, `--since "": give a time ago`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--since", "2999-01-01"}, `--since "2999-01-01" is 2999-01-01 00:00`},
		{newPsCmd(a, func(*psOptions) error { t.Error("called"); return nil }), []string{"--since", ""}, `--since "": give a time ago`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--since", "-2h"}, `--since "-2h": give a time ago more than 0`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--kind", "job_start,job_finish"}, `--kind "job_finish": no such event; give one of job_submit, job_start, job_end`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"--job", "x"}, `--job: "x" is not a job id`},
		{newEventsCmd(a, func(*eventsOptions) error { t.Error("called"); return nil }), []string{"-n", "-1"}, `--tail -1`},
		{newPsCmd(a, func(*psOptions) error { t.Error("called"); return nil }), []string{"--since", "lastweek"}, `--since "lastweek" is not a time: give a time ago (90m, 2h, 7d, 2w)`},
		{newPsCmd(a, func(*psOptions) error { t.Error("called"); return nil }), []string{"--since", "2999-01-01"}, `--since "2999-01-01" is 2999-01-01 00:00`},
	} {
		if err := run(t, tt.cmd, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %q: %v, want %q", tt.cmd.Name(), tt.args, err, tt.want)
		}
	}
}
