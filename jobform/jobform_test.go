package jobform

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

func TestExportEnv(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "HOME=/home/u", "LR=3e-4", "GSSH_JOB_ID=7", "CUDA_VISIBLE_DEVICES=0", "XDG_RUNTIME_DIR=/run/u", "BASH_FUNC_f%%=() { :; }", "EMPTY="}
	var warned []string
	warn := func(s string) { warned = append(warned, s) }
	for spec, want := range map[string][]job.EnvVar{
		"NONE":          nil,
		"":              nil,
		"LR":            {{Key: "LR", Value: "3e-4"}},
		"LR,SEED=1":     {{Key: "LR", Value: "3e-4"}, {Key: "SEED", Value: "1"}},
		"ALL":           {{Key: "PATH", Value: "/usr/bin"}, {Key: "LR", Value: "3e-4"}, {Key: "EMPTY", Value: ""}},
		"ALL,LR=1,HOME": {{Key: "PATH", Value: "/usr/bin"}, {Key: "LR", Value: "1"}, {Key: "EMPTY", Value: ""}, {Key: "HOME", Value: "/home/u"}},
		"EMPTY":         {{Key: "EMPTY", Value: ""}},
	} {
		got, err := ExportEnv("--export", spec, environ, warn)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ExportEnv(%q) = %v, %v; want %v", spec, got, err, want)
		}
	}
	if len(warned) != 0 {
		t.Errorf("warnings %q", warned)
	}
	if got, err := ExportEnv("--export", "NOPE,LR", environ, warn); err != nil || len(got) != 1 || len(warned) != 1 || warned[0] != "--export NOPE,LR: NOPE is not set here: the job gets no NOPE" {
		t.Errorf("an unset name: %v %v %q", got, err, warned)
	}
	for _, bad := range []string{"1X", "A-B=1", "NONE,LR", "=x"} {
		if _, err := ExportEnv("--export", bad, environ, warn); err == nil {
			t.Errorf("ExportEnv(%q) took it", bad)
		}
	}
}

// TestJSON: a request as the HTTP API takes it: the command a list or
// one shell string, the flags' defaults for what is left out, sizes and
// walltimes as the CLI reads them, errors naming the field.
func TestJSON(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	read := func(doc string) (job.Spec, error) {
		var f Form
		if err := json.Unmarshal([]byte(doc), &f); err != nil {
			return job.Spec{}, err
		}
		f.Fields = true
		r, err := f.Request(func(string) {}, now, time.UTC, nil, "")
		return r.Spec, err
	}
	s, err := read(`{"command": ["python", "train.py"], "mem": "8G", "timeout": "2h", "gpus": 2}`)
	if err != nil || !slices.Equal(s.Argv, []string{"python", "train.py"}) || s.Shell || s.MemPerGPU != 8<<30 || s.Timeout != 2*time.Hour ||
		s.GPUs != 2 || s.Host != "auto" || s.Priority != 5 || s.Workdir != "~" {
		t.Errorf("argv request: %+v, %v", s, err)
	}
	if s, err := read(`{"command": "cd ~/p && make", "workdir": "~/p", "priority": 7}`); err != nil || !s.Shell || s.GPUs != 1 || s.Priority != 7 || s.Workdir != "~/p" {
		t.Errorf("shell request: %+v, %v", s, err)
	}
	if s, err := read(`{"command": ["/opt/my tools/prog"]}`); err != nil || s.Shell || len(s.Argv) != 1 {
		t.Errorf("a list of one word is an argv: %+v, %v", s, err)
	}
	for doc, want := range map[string]string{
		`{"command": []}`:                                             "command: empty",
		`{"command": 7}`:                                              "give the command as a list of words",
		`{"command": "x", "mem": "8X"}`:                               "mem: ",
		`{"command": "x", "host_mem": "0"}`:                           "host_mem: ",
		`{"command": "x", "timeout": "soon"}`:                         "timeout: ",
		`{"command": "x", "workdir": "proj"}`:                         `workdir "proj": give an absolute directory, or one under ~`,
		`{"command": "x", "signal_grace": "60s"}`:                     "signal_grace is the grace of a preemption: give it with preemptible",
		`{"command": "x", "env": ["LR"]}`:                             `env "LR": give KEY=VALUE`,
		`{"command": "x", "env": ["=1"]}`:                             `env ""=...: the name must be letters`,
		`{"command": "x", "gpus": 0}`:                                 "gpus 0: a job needs at least 1 GPU",
		`{"command": "x", "priority": 99}`:                            "priority 99: give 0 (first) to 10 (last)",
		`{"command": "x", "export": "GSSH_JOB_ID=1"}`:                 "export \"GSSH_JOB_ID=1\": gssh sets GSSH_JOB_ID itself",
		`{"command": "x", "cpus": "two"}`:                             `cpus "two": give a whole number of CPUs`,
		`{"command": "x", "after_any": ["x y"]}`:                      "after_any: ",
		`{"command": "x", "begin": "someday"}`:                        "begin: ",
		`{"command": "x", "preemptible": true, "signal_grace": "0s"}`: "signal_grace 0s: give a duration from 1s to 24h",
	} {
		if _, err := read(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", doc, err, want)
		}
	}
}
