package launch

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
)

func TestRunScriptIsValidShell(t *testing.T) {
	j := job.Job{ID: 7, Spec: job.Spec{Argv: []string{"echo", "a b", "$(touch x)"}, Workdir: "~/my dir",
		Env: []job.EnvVar{{Key: "K", Value: "it's `x`\n$y"}}}, Placement: job.Placement{GPUs: []string{"GPU-1", "GPU-2"}}}
	s, err := RunScript("c0ffee", j)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SHOW") != "" {
		t.Log("\n" + s)
	}
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v %s\n%s", err, out, s)
	}
	if !strings.Contains(s, `export CUDA_VISIBLE_DEVICES=GPU-1,GPU-2`) || !strings.Contains(s, `cd "$HOME"/'my dir'`) {
		t.Errorf("script:\n%s", s)
	}
}

// Workdirs: the worker's homes expand, everything else is literal, and
// each form is valid shell that cd's where it should.
func TestWorkdir(t *testing.T) {
	for in, want := range map[string]string{
		"~":                    `"$HOME"`,
		"~/my dir":             `"$HOME"/'my dir'`,
		"~root":                `~root`,
		"~root/a b":            `~root/'a b'`,
		"~root/":               `~root/''`,
		"/abs/$(x)":            `'/abs/$(x)'`,
		"~$(touch pwned)/x":    `'~$(touch pwned)/x'`,
		"~root;touch pwned":    `'~root;touch pwned'`,
		"~a`touch pwned`":      "'~a`touch pwned`'",
		"relative/not/ours/to": `relative/not/ours/to`,
	} {
		if got := workdir(in); got != want {
			t.Errorf("workdir(%q) = %s, want %s", in, got, want)
		}
	}
	root, err := user.Lookup("root")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", "cd "+workdir("~root")+" && pwd -P").Output()
	if want, _ := filepath.EvalSymlinks(root.HomeDir); err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("cd ~root: %q %v, want %s", out, err, want)
	}
}

func TestCheckSpec(t *testing.T) {
	for _, c := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{}, "empty command"},
		{job.Spec{Argv: []string{"  "}, Shell: true}, "empty command"},
		{job.Spec{Argv: []string{"x"}, Env: []job.EnvVar{{Key: "1A"}}}, `--env "1A"`},
		{job.Spec{Argv: []string{"x"}, Env: []job.EnvVar{{Key: "A;B"}}}, `--env "A;B"`},
		{job.Spec{Argv: []string{"x"}, Env: []job.EnvVar{{Key: "CUDA_VISIBLE_DEVICES"}}}, "gssh sets this one itself"},
		{job.Spec{Argv: []string{"x"}, Env: []job.EnvVar{{Key: "GSSH_JOB_ID"}}}, "gssh sets this one itself"},
		{job.Spec{Argv: []string{"x"}, Workdir: "data/run1"}, `--workdir "data/run1" is relative`},
		{job.Spec{Argv: []string{"x"}, Workdir: "~$(id)"}, `--workdir "~$(id)" is relative`},
		{job.Spec{Argv: []string{"x"}, Workdir: "/a\nb"}, "a newline or NUL"},
	} {
		if err := CheckSpec(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckSpec(%+v) = %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	for in, want := range map[string]string{
		"exit 0": "succeeded exit status 0", "exit 3": "failed exit status 3",
		"exit 143": "failed exit status 143: killed by signal TERM", "error workdir /x does not exist": "failed workdir /x does not exist",
		"garbage": "failed unreadable exit file: garbage",
	} {
		s := exitStatus(in)
		if got := string(s.State) + " " + s.Reason; got != want {
			t.Errorf("exitStatus(%q) = %q, want %q", in, got, want)
		}
	}
}
