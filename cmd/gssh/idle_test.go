package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/fakelab"
)

// TestIdleJobs: on a simulated lab, gssh serve flags a job whose GPU
// reads 0 % for the policy's idle_after (gssh ps REASON idle, gssh show
// since when), leaves a busy one alone, and cancels the idle one
// idle_cancel later, saying why.
func TestIdleJobs(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(buildGssh(t), "gssh")
	dir := t.TempDir()
	lab, err := fakelab.Start(fakelab.Options{Dir: filepath.Join(dir, "lab"), Shim: bin,
		Hosts:  []fakelab.HostSpec{{Name: "gpu1", GPUs: []fakelab.GPUSpec{fakelab.A100, fakelab.A100}}},
		Policy: map[string]any{"idle_after": "10s", "idle_cancel": "10s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(dir, "state"), 0o700)
	os.MkdirAll(home, 0o700)
	env := append(os.Environ(), "HOME="+home, "GSSH_INVENTORY="+lab.Inventory, "GSSH_STATE="+filepath.Join(dir, "state", "state.db"),
		"GSSH_HELPER="+bin, "GSSH_SERVER=", "GSSH_TOKEN=", testInventoryEnv+"="+filepath.Join(dir, "none.yaml"))
	gssh := gsshRunner(t, bin, env, dir)
	_, out := startServeAPI(t, bin, env, "--interval", "500ms")
	// On GPUs apart: utilization is a GPU's, not a job's.
	gssh("submit", "--mem", "8G", "--env", "FAKELAB_IDLE=1", "--name", "notebook", "--", "sleep", "300")
	gssh("submit", "--name", "train", "--", "sleep", "300") // exclusive: the other GPU
	until := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); !ok(); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("not so after 60s: %s\ngssh serve said:\n%s", what, out.String())
			}
		}
	}
	until("job 1 flagged idle", func() bool { return regexp.MustCompile(`(?m)^1\t.*\trunning\t.*\tidle\t`).MatchString(gssh("ps")) })
	if s := gssh("show", "1"); !strings.Contains(s, "; idle: its GPUs at 0 % since ") {
		t.Errorf("gssh show 1:\n%s", s)
	}
	if ps := gssh("ps"); regexp.MustCompile(`(?m)^2\t.*\tidle\t`).MatchString(ps) {
		t.Errorf("the busy job is flagged idle:\n%s", ps)
	}
	until("job 1 cancelled", func() bool { return strings.Contains(gssh("show", "1"), "state:       cancelled") })
	if s := gssh("show", "1"); !strings.Contains(s, "cancelled by gssh serve: its GPUs at 0 % utilization since ") {
		t.Errorf("why job 1 was cancelled:\n%s", s)
	}
	if s := gssh("show", "2"); !strings.Contains(s, "state:       running") {
		t.Errorf("the busy job:\n%s", s)
	}
	gssh("cancel", "2")
}

// gsshRunner is a function running the gssh binary bin in env and dir,
// failing t when it fails, returning its output.
func gsshRunner(t *testing.T, bin string, env []string, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env, c.Dir = env, dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("gssh %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
