package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec/sshtest"
	"github.com/gssh/gssh/units"
)

// fakeSMIBin makes a directory holding the fake nvidia-smi and ps, which
// replay the fixture named by GSSH_FAKE_SMI_DIR, and returns it.
func fakeSMIBin(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"nvidia-smi": filepath.Join(root, "probe", "testdata", "fake-nvidia-smi"), "ps": filepath.Join(root, "probe", "testdata", "fake-ps")} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestClockSkew runs jobs on two workers whose clocks are hours off the
// controller's (+5h and -3h: libfaketime in their SSH sessions, so
// `date`, and every time the job's tools read, are skewed) and checks
// that durations never mix the clocks: the runtimes gssh ps and show
// print, the walltime (a pass a second or two in does not stop a
// --timeout 5s job; the worker's own walltime stop ends it at 5 s, with
// no pass running, and the next pass records it), and the fair-share
// usage. The jobs are queued held and released together, so that one
// pass starts them all, however slowly each submit runs.
func TestClockSkew(t *testing.T) {
	t.Parallel() // beside the scripts: it mostly waits on its jobs
	sshtest.RequireSSHD(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := fakeSMIBin(t, root)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := sshtest.NewKey(t, dir, "")
	var inv, cfg, known strings.Builder
	inv.WriteString("hosts:\n")
	skews := []struct{ host, offset string }{{"ahead", "+5h"}, {"behind", "-3h"}}
	for i, h := range skews {
		env := sshtest.SkewedClock(t, h.offset)
		env["PATH"] = bin + ":/usr/bin:/bin"
		env["GSSH_FAKE_SMI_DIR"] = filepath.Join(root, "probe", "testdata", "fleet", "a100x4")
		env["GSSH_CLAIMS_DIR"] = t.TempDir()
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: fmt.Sprintf("127.0.4.%d", i+1), AuthorizedKeys: []string{key.AuthorizedLine}, SetEnv: env})
		fmt.Fprintf(&inv, "  - name: %s\n", h.host)
		host, port, _ := strings.Cut(s.Addr, ":")
		fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n  Port %s\n", h.host, host, port)
		known.WriteString(s.KnownHostsLine + "\n")
	}
	fmt.Fprintf(&cfg, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n", sshdUser(t), key.Path)
	for p, data := range map[string]string{
		filepath.Join(dir, "hosts.yaml"):           inv.String(),
		filepath.Join(home, ".ssh", "config"):      cfg.String(),
		filepath.Join(home, ".ssh", "known_hosts"): known.String(),
	} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SSH_AUTH_SOCK=",
		"GSSH_STATE=" + filepath.Join(dir, "state.db"), "GSSH_INVENTORY=" + filepath.Join(dir, "hosts.yaml"),
		"GSSH_CLAIMS_DIR=" + filepath.Join(dir, "claims"), noSystemInventory}
	gssh := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &out, &errb, env); code != 0 {
			t.Fatalf("gssh %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		if errb.Len() > 0 {
			t.Logf("gssh %s: %s", strings.Join(args, " "), errb.String())
		}
		return out.String()
	}
	jobs := func() map[job.ID]job.Job {
		t.Helper()
		var doc service.JobsDoc
		if err := json.Unmarshal([]byte(gssh("ps", "-a", "--json")), &doc); err != nil {
			t.Fatal(err)
		}
		m := map[job.ID]job.Job{}
		for _, j := range doc.Jobs {
			m[j.ID] = j
		}
		return m
	}

	// Each host: a job that prints the host's clock as a job sees it and
	// runs 1 s, and one stopped at its 5 s walltime (the host's idle GPU
	// 3, exclusive).
	for _, h := range skews {
		gssh("submit", "--hold", "--host", h.host, "--mem", "1G", "--", "date +%s; sleep 1")
		gssh("submit", "--hold", "--host", h.host, "--timeout", "5s", "--", "sleep", "300")
	}
	const aheadShort, aheadTimed, behindShort, behindTimed = 1, 2, 3, 4
	gssh("release", "1", "2", "3", "4")
	m := jobs()
	var first, last time.Time
	for id := aheadShort; id <= behindTimed; id++ {
		j := m[job.ID(id)]
		if j.State != job.Running && j.State != job.Succeeded {
			t.Fatalf("job %d after gssh release: %s %s", id, j.State, j.Reason)
		}
		if first.IsZero() || j.StartedAt.Before(first) {
			first = j.StartedAt
		}
		if j.StartedAt.After(last) {
			last = j.StartedAt
		}
	}
	// A pass once the short jobs have ended, while the timed ones are
	// well inside their walltime.
	time.Sleep(time.Until(last.Add(1300 * time.Millisecond)))
	gssh("schedule")
	m = jobs()
	for _, c := range []struct {
		id   job.ID
		skew time.Duration
	}{{aheadShort, 5 * time.Hour}, {behindShort, -3 * time.Hour}} {
		out := gssh("logs", strconv.Itoa(int(c.id)))
		sec, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("job %d (date +%%s): %q", c.id, out)
		}
		if d := time.Unix(sec, 0).Sub(m[c.id].StartedAt) - c.skew; d.Abs() > time.Minute {
			t.Fatalf("job %d: the worker's clock is off by %v, want %v: faketime did not take", c.id, time.Unix(sec, 0).Sub(m[c.id].StartedAt), c.skew)
		}
		j := m[c.id]
		if d := j.EndedAt.Sub(j.StartedAt); j.State != job.Succeeded || d < 900*time.Millisecond || d > 1500*time.Millisecond {
			t.Errorf("job %d (sleep 1): %s, ran %v", c.id, j.State, d)
		}
		if show := gssh("show", strconv.Itoa(int(c.id))); !strings.Contains(show, "\nruntime:     "+units.FormatElapsed(j.EndedAt.Sub(j.StartedAt))+"\n") {
			t.Errorf("gssh show %d:\n%s", c.id, show)
		}
	}
	ps := gssh("ps")
	for _, id := range []job.ID{aheadTimed, behindTimed} {
		j := m[id]
		if j.State != job.Running {
			t.Fatalf("job %d (--timeout 5s) is %s %v in (the jobs started %v apart): %s", id, j.State, time.Since(j.StartedAt), last.Sub(first), j.Reason)
		}
		// The row's runtime, from the controller's clock, rounded to
		// whole seconds: about the time since the start.
		row := psRow(t, ps, id)
		lo, hi := time.Since(j.StartedAt)-2*time.Second, time.Since(j.StartedAt)+time.Second
		if d, err := time.ParseDuration(row[6]); err != nil || d < lo.Truncate(time.Second) || d > hi {
			t.Errorf("gssh ps: job %d's runtime %q, want between %v and %v:\n%s", id, row[6], lo.Truncate(time.Second), hi, ps)
		}
	}
	// No pass from here: the workers stop the timed jobs themselves (a
	// pass's stop would come at 7 s at the earliest; a loaded machine's
	// own stop may take some 0.7 s past the walltime).
	time.Sleep(time.Until(last.Add(7 * time.Second)))
	out := gssh("schedule")
	m = jobs()
	for _, id := range []job.ID{aheadTimed, behindTimed} {
		j := m[id]
		if d := j.EndedAt.Sub(j.StartedAt); j.State != job.Timeout || d < 4900*time.Millisecond || d > 6500*time.Millisecond {
			t.Errorf("job %d (--timeout 5s): %s %q, ran %v, want timeout after about 5s", id, j.State, j.Reason, d)
		}
		if want := fmt.Sprintf("job %d timeout: ran past its walltime of 5s: stopped", id); !strings.Contains(out, want) {
			t.Errorf("the pass after: %q, want %q", out, want)
		}
		// show's runtime is the record's, as whole seconds (5s or 6s).
		if show := gssh("show", strconv.Itoa(int(id))); !strings.Contains(show, "\nruntime:     "+units.FormatElapsed(j.EndedAt.Sub(j.StartedAt))+"\n") {
			t.Errorf("gssh show %d:\n%s", id, show)
		}
	}
	// Fair-share usage: the GPU time the records say, seconds, not hours.
	var want float64
	for _, j := range m {
		want += j.EndedAt.Sub(j.StartedAt).Hours() * j.Placement.Share
	}
	var usage service.UsageDoc
	if err := json.Unmarshal([]byte(gssh("usage", "--json")), &usage); err != nil {
		t.Fatal(err)
	}
	if len(usage.Users) != 1 || math.Abs(usage.Users[0].GPUHours-want) > 1e-6 || want > 3*12.0/3600 || want < 2*4.9/3600 {
		t.Errorf("usage %+v, want %.6f GPU-hours (two GPUs for 5 s, and a little)", usage.Users, want)
	}
}

// psRow returns the fields of gssh ps's row for job id (tab-separated, as
// gssh ps prints when its output is not a terminal), or fails the test.
func psRow(t *testing.T, ps string, id job.ID) []string {
	t.Helper()
	for _, line := range strings.Split(ps, "\n") {
		if f := strings.Split(line, "\t"); len(f) > 6 && f[0] == strconv.Itoa(int(id)) {
			return f
		}
	}
	t.Fatalf("gssh ps has no row for job %d:\n%s", id, ps)
	return nil
}
