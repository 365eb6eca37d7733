package launch

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/units"
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
	j.Spec.LogLimit = 1 << 30 // and with its log capped
	capped, err := RunScript("c0ffee", j)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shells(t) {
		for _, s := range []string{s, capped} {
			args := append(strings.Fields(sh), "-n", "-c", s)
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v %s\n%s", sh, err, out, s)
			}
		}
	}
	if !strings.Contains(capped, "head -c 1073741824;") || !strings.Contains(capped, "truncated at 1 GiB (--log-limit)") {
		t.Errorf("capped script:\n%s", capped)
	}
	// The start of the command is read just before it runs.
	if !strings.Contains(s, "\n"+readU0+`( export K='it'"'"'s `+"`x`\n$y'; exec echo 'a b' '$(touch x)' ) </dev/null"+"\nfin \"exit $?\"\n") {
		t.Errorf("no uptime reading just before the command:\n%s", s)
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
		{job.Spec{Argv: []string{"printf", "\xff"}}, "word 2 of the command is not valid UTF-8"},
		{job.Spec{Argv: []string{"x"}, Env: []job.EnvVar{{Key: "K", Value: "\xc3"}}}, "--env K is not valid UTF-8"},
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

func TestRuntimeOf(t *testing.T) {
	for _, c := range []struct {
		u0, u1 string
		want   time.Duration
	}{
		{"12345.67", "12346.70", 1030 * time.Millisecond},
		{"100.00", "100.00", 0},
		{"0.5", "2", 1500 * time.Millisecond},
		{"7", "9.", 2 * time.Second},
		{"999999999.99", "999999999.99", 0},
		{"12346.70", "12345.67", 0}, // negative: u1 before u0
		{"-", "-", 0},               // no runtime line
		{"-1.00", "2.00", 0},
		{"1.00", "+2.00", 0},
		{"1e3", "2e3", 0},
		{"1.2.3", "4.00", 0},
		{".5", "1.00", 0},
		{"1.00", "", 0},
		{"1h", "2h", 0},
		{"1.00", "NaN", 0},
		{"1.00", "Inf", 0},
		{"0.00", "99999999999999999999.00", 0}, // past 10⁹ s: refused, never overflows
		{"１.00", "2.00", 0},                    // not ASCII digits
	} {
		if got := runtimeOf(c.u0, c.u1); got != c.want {
			t.Errorf("runtimeOf(%q, %q) = %v, want %v", c.u0, c.u1, got, c.want)
		}
	}
}

// Poll's answer for ended jobs, "ID exit MTIME LEFTOVERS U0 U1 FIRST-LINE":
// the runtime words come before the exit file's first line, so a line
// holding "runtime" is read as text.
func TestParsePollExit(t *testing.T) {
	for _, c := range []struct {
		line    string
		state   job.State
		reason  string
		code    any
		runtime time.Duration
		orphans int
	}{
		{"1 exit 1700000000 0 100.00 101.50 exit 0", job.Succeeded, "exit status 0", 0, 1500 * time.Millisecond, 0},
		{"2 exit 1700000000 2 - - exit 3", job.Failed, "exit status 3", 3, 0, 2},                                // an old exit file
		{"3 exit 1700000000 0 abc 101.50 exit 0", job.Succeeded, "exit status 0", 0, 0, 0},                      // garbage
		{"4 exit 1700000000 0 101.50 100.00 exit 0", job.Succeeded, "exit status 0", 0, 0, 0},                   // negative
		{"5 exit 1700000000 0 - - error bad runtime 1.00 9.00", job.Failed, "bad runtime 1.00 9.00", nil, 0, 0}, // "runtime" in the text
		{"6 exit 1700000000 0 1.00 3.00 error runtime 5 9", job.Failed, "runtime 5 9", nil, 2 * time.Second, 0},
		{"7 exit 1700000000 0 1.00 3.00 exit 143", job.Failed, "exit status 143: killed by signal TERM", 143, 2 * time.Second, 0},
		{"8 exit 1700000000 0 - -", job.Failed, "unreadable exit file", nil, 0, 0}, // empty first line
		{"9 exit 1700000000 0 exit 0", job.Failed, "unreadable exit file", nil, 0, 0},
	} {
		m := parsePoll([]byte(c.line+"\n"), "w", "")
		var st job.Status
		for _, s := range m {
			st = s
		}
		if len(m) != 1 || st.State != c.state || st.Reason != c.reason || deref(st.ExitCode) != c.code || st.Runtime != c.runtime || st.Orphans != c.orphans {
			t.Errorf("parsePoll(%q) = %+v (code %v), want %s %q code %v runtime %v orphans %d", c.line, st, deref(st.ExitCode), c.state, c.reason, c.code, c.runtime, c.orphans)
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// shells are the POSIX shells here that run.sh may meet on a worker.
func shells(t *testing.T) []string {
	var out []string
	for _, sh := range [][]string{{"sh"}, {"dash"}, {"bash", "--posix"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(sh[0]); err == nil {
			out = append(out, strings.Join(sh, " "))
		}
	}
	if len(out) == 0 {
		t.Fatal("no sh")
	}
	return out
}

// runScript runs script as run.sh in a fresh job directory under sh (a
// shell of shells), with GSSH_U0 and GSSH_U1 in its environment, and
// returns the exit file it wrote.
func runScript(t *testing.T, sh, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(strings.Fields(sh), "run.sh")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GSSH_U0=1.00", "GSSH_U1=2.00") // inherited: neither read nor passed on
	out, err := cmd.CombinedOutput()
	exit, rerr := os.ReadFile(filepath.Join(dir, "exit"))
	if rerr != nil {
		t.Fatalf("%s run.sh: %v %s; no exit file: %v", sh, err, out, rerr)
	}
	if _, err := os.Stat(filepath.Join(dir, "exit.tmp")); err == nil {
		t.Errorf("%s: exit.tmp left behind", sh)
	}
	return string(exit)
}

// The exit file run.sh writes, under each shell: "exit N" then "runtime
// U0 U1" (raw /proc/uptime values); the first line alone when
// /proc/uptime cannot be read, and for a workdir that is missing (the
// command never started). The command never sees the readings.
func TestRunScriptExitFile(t *testing.T) {
	rt := regexp.MustCompile(`^runtime ([0-9]+\.[0-9]+) ([0-9]+\.[0-9]+)$`)
	for _, sh := range shells(t) {
		j := job.Job{ID: 7, Spec: job.Spec{Argv: []string{"sh", "-c", `sleep 0.2; env | grep '^GSSH_U' && exit 9; exit 4`}, Workdir: "/"}}
		script, err := RunScript("c0ffee", j)
		if err != nil {
			t.Fatal(err)
		}
		exit := runScript(t, sh, script)
		lines := strings.Split(exit, "\n")
		if len(lines) != 3 || lines[0] != "exit 4" || lines[2] != "" || !rt.MatchString(lines[1]) {
			t.Fatalf("%s: exit file %q, want \"exit 4\\nruntime U0 U1\\n\"", sh, exit)
		}
		m := rt.FindStringSubmatch(lines[1])
		if d := runtimeOf(m[1], m[2]); d < 150*time.Millisecond || d > 10*time.Second {
			t.Errorf("%s: runtime %v of a 0.2 s command (%q)", sh, d, lines[1])
		}

		noUptime := strings.ReplaceAll(script, "/proc/uptime", "/nonexistent/uptime")
		if noUptime == script {
			t.Fatal("run.sh does not read /proc/uptime")
		}
		if exit := runScript(t, sh, noUptime); exit != "exit 4\n" {
			t.Errorf("%s, /proc/uptime unreadable: exit file %q, want %q", sh, exit, "exit 4\n")
		}

		j.Spec.Workdir = "/nonexistent/dir runtime 1.00 2.00"
		script, err = RunScript("c0ffee", j)
		if err != nil {
			t.Fatal(err)
		}
		if exit, want := runScript(t, sh, script), "error workdir /nonexistent/dir runtime 1.00 2.00 does not exist on the worker\n"; exit != want {
			t.Errorf("%s, workdir missing: exit file %q, want %q", sh, exit, want)
		}
	}
}

// Poll reads exit files of every form, old ones included, on one line a
// job: the runtime line survives a long first line, and text in the first
// line is never taken for a runtime.
func TestPollExitFiles(t *testing.T) {
	long := "error " + strings.Repeat("x", 100<<10)
	for i, c := range []struct {
		file    string
		state   job.State
		reason  string
		runtime time.Duration
	}{
		{"exit 0\nruntime 12345.67 12346.70\n", job.Succeeded, "exit status 0", 1030 * time.Millisecond},
		{"exit 0\n", job.Succeeded, "exit status 0", 0}, // before runtimes were recorded
		{"exit 0", job.Succeeded, "exit status 0", 0},
		{"exit 2\nruntime 5.00 6.00", job.Failed, "exit status 2", time.Second}, // no final newline
		{"exit 0\nruntime garbage 6.00\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\nruntime 1.2.3 6.00\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\nruntime 6.00\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\nruntime 5.00 6.00 7.00\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\nruntime 5.00 6.00\r\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\nruntime 9.00 6.00\n", job.Succeeded, "exit status 0", 0}, // negative
		{"exit 0\nruntime -9.00 6.00\n", job.Succeeded, "exit status 0", 0},
		{"exit 0\n\nruntime 5.00 6.00\n", job.Succeeded, "exit status 0", 0}, // only the second line counts
		{"exit 0\nruntime 5.00 6.00\nruntime 1.00 9.00\n", job.Succeeded, "exit status 0", time.Second},
		{"error no runtime 1.00 9.00 here\n", job.Failed, "no runtime 1.00 9.00 here", 0},
		{"error runtime 1.00 9.00\nruntime 5.00 6.00\n", job.Failed, "runtime 1.00 9.00", time.Second},
		{long + "\nruntime 5.00 7.50\n", job.Failed, long[6:300], 2500 * time.Millisecond},
		{"exit 0 runtime 5.00 6.00\n", job.Failed, "unreadable exit file: exit 0 runtime 5.00 6.00", 0},
		{"\nruntime 5.00 6.00\n", job.Failed, "unreadable exit file", 0},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "exit"), []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		// Two jobs in one poll: the first one's answer stays on its line.
		j := job.Job{ID: job.ID(9100 + 2*i), Remote: job.Remote{Dir: dir}}
		k := job.Job{ID: job.ID(9101 + 2*i), Remote: job.Remote{Dir: dir}}
		m, err := Poll(context.Background(), sshexec.Local{}, "local", "c0ffee", []job.Job{j, k})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []job.ID{j.ID, k.ID} {
			st := m[id]
			if st.State != c.state || st.Reason != c.reason || st.Runtime != c.runtime || st.EndedAt.IsZero() != (c.reason == "unreadable exit file") {
				t.Errorf("exit file %.80q: job %d: %s %.80q runtime %v ended %v, want %s %.80q runtime %v", c.file, id, st.State, st.Reason, st.Runtime, st.EndedAt, c.state, c.reason, c.runtime)
			}
		}
	}
}

// runLog runs script as run.sh with sh and PATH path ("" keeps this
// process's), and returns what it wrote (the job's log) and its exit file.
func runLog(t *testing.T, sh, script, path string) (log, exit string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(strings.Fields(sh), "run.sh")
	bin, err := exec.LookPath(args[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args[1:]...)
	cmd.Dir = dir
	// Inherited: neither is the job's (Start unsets GSSH_CPUS before run.sh).
	cmd.Env = append(os.Environ(), "GSSH_CPUS=99", "GSSH_PIN=0")
	if path != "" {
		cmd.Env = append(cmd.Env, "PATH="+path)
	}
	out, _ := cmd.CombinedOutput()
	b, err := os.ReadFile(filepath.Join(dir, "exit"))
	if err != nil {
		t.Fatalf("%s: no exit file: %v\n%s", sh, err, out)
	}
	return string(out), string(b)
}

// allowedCPUs is this process's Cpus_allowed_list, as ids.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	// CI runs on Linux: a missing /proc there is a broken runner, never a skip.
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...) // outside CI only: under CI=true it failed above
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		skip("no /proc: %v", err)
	}
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(b)
	if m == nil {
		skip("no Cpus_allowed_list in /proc/self/status")
	}
	ids, err := gpuinfo.ParseCPUList(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestRunScriptCPUs: --cpus exports GSSH_CPUS and pins the command, in
// each of its forms, to the placement's CPUs with taskset; without
// taskset (or when taskset refuses) it runs unpinned and the log says so;
// without --cpus neither appears.
func TestRunScriptCPUs(t *testing.T) {
	ids := allowedCPUs(t)
	pin := ids[len(ids)-1:] // one CPU: the job's affinity then differs from ours wherever we have two
	want := units.Ranges(pin, 2)
	probe := `printf 'cpus=%s\n' "$GSSH_CPUS"; grep '^Cpus_allowed_list:' /proc/self/status; echo "pin=${GSSH_PIN-unset}"`
	_, hasTaskset := exec.LookPath("taskset")
	if hasTaskset != nil && os.Getenv("CI") == "true" {
		t.Fatal("taskset not found: .ci/run installs util-linux")
	}
	forms := map[string]job.Spec{
		"shell": {Argv: []string{probe}, Shell: true},
		"argv":  {Argv: []string{"sh", "-c", probe}},
	}
	if _, err := exec.LookPath("bash"); err == nil {
		forms["login shell"] = job.Spec{Argv: []string{probe}, Shell: true, Login: true}
		forms["login argv"] = job.Spec{Argv: []string{"sh", "-c", probe}, Login: true}
	}
	for name, spec := range forms {
		spec.CPUs, spec.Workdir = 1, "/"
		j := job.Job{ID: 3, Spec: spec, Placement: job.Placement{GPUs: []string{"GPU-1"}, CPUs: pin}}
		script, err := RunScript("c0ffee", j)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shells(t) {
			log, exit := runLog(t, sh, script, "")
			if !strings.HasPrefix(exit, "exit 0") || !strings.Contains(log, "cpus=1\n") || !strings.Contains(log, "pin=unset") {
				t.Errorf("%s, %s: exit %q, log:\n%s", name, sh, exit, log)
			}
			if hasTaskset == nil && !regexp.MustCompile(`Cpus_allowed_list:\s*`+regexp.QuoteMeta(want)+"\n").MatchString(log) {
				t.Errorf("%s, %s: not pinned to CPU %s:\n%s", name, sh, want, log)
			}
		}
	}

	// No taskset on PATH: unpinned, one line in the log.
	bin := t.TempDir()
	for _, tool := range []string{"sh", "sed", "cut", "mkdir", "mv", "grep", "cat"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	j := job.Job{ID: 3, Spec: job.Spec{Argv: []string{probe}, Shell: true, Workdir: "/", CPUs: 1}, Placement: job.Placement{CPUs: pin}}
	script, _ := RunScript("c0ffee", j)
	log, exit := runLog(t, "sh", script, bin)
	if !strings.HasPrefix(exit, "exit 0") || strings.Count(log, "gssh: taskset not found on this host: the job runs unpinned (it was given CPUs "+want+")\n") != 1 || !strings.Contains(log, "cpus=1") {
		t.Errorf("without taskset: exit %q, log:\n%s", exit, log)
	}
	// A taskset that refuses the list.
	if err := os.WriteFile(filepath.Join(bin, "taskset"), []byte("#!/bin/sh\necho 'taskset: failed to set pid 0 affinity: Invalid argument' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	log, exit = runLog(t, "sh", script, bin)
	if !strings.HasPrefix(exit, "exit 0") || !strings.Contains(log, "gssh: taskset -c "+want+" refused: the job runs unpinned\n") || strings.Contains(log, "Invalid argument") {
		t.Errorf("taskset refuses: exit %q, log:\n%s", exit, log)
	}

	// --cpus without CPU ids (the host's are unknown): GSSH_CPUS, no pinning.
	j.Placement.CPUs = nil
	script, _ = RunScript("c0ffee", j)
	if strings.Contains(script, "taskset") || !strings.Contains(script, "export GSSH_CPUS=1\n") {
		t.Errorf("unpinned --cpus:\n%s", script)
	}
	// Without --cpus: nothing of either.
	j.Spec.CPUs = 0
	script, _ = RunScript("c0ffee", j)
	if strings.Contains(script, "taskset") || strings.Contains(script, "export GSSH_CPUS") || strings.Contains(script, "gssh_run") {
		t.Errorf("no --cpus:\n%s", script)
	}
}

// An --env PATH is the command's: run.sh's own tools (mv, sed, the sh
// of a shell command, taskset) are found on the worker's PATH, so a job
// with a PATH of its own still records how it ended.
func TestRunScriptEnvPath(t *testing.T) {
	for _, c := range []struct {
		spec job.Spec
		exit string
		log  string
	}{
		{job.Spec{Argv: []string{`echo "path=$PATH"`}, Shell: true, Env: []job.EnvVar{{Key: "PATH", Value: "/nonexistent"}}}, "exit 0", "path=/nonexistent\n"},
		{job.Spec{Argv: []string{"ls", "/"}, Env: []job.EnvVar{{Key: "PATH", Value: "/nonexistent"}}}, "exit 127", "not found"},
		{job.Spec{Argv: []string{`echo "cpus=$GSSH_CPUS"`}, Shell: true, CPUs: 1, Env: []job.EnvVar{{Key: "PATH", Value: "/nonexistent"}}}, "exit 0", "cpus=1\n"},
	} {
		c.spec.Workdir = "/"
		j := job.Job{ID: 9, Spec: c.spec}
		if c.spec.CPUs > 0 {
			j.Placement.CPUs = []int{0}
		}
		script, err := RunScript("c0ffee", j)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shells(t) {
			log, exit := runLog(t, sh, script, "")
			if !strings.HasPrefix(exit, c.exit+"\n") || !strings.Contains(log, c.log) || strings.Contains(log, "taskset not found") {
				t.Errorf("%q with PATH=/nonexistent, %s: exit %q, log:\n%s", c.spec.Argv, sh, exit, log)
			}
		}
	}
}
