package launch_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec"
)

// localWorker is this machine as a worker (no sshd): a home of its own.
func localWorker(t *testing.T, home string) sshexec.Local {
	return sshexec.Local{Env: []string{"HOME=" + home, "PATH=/usr/bin:/bin", launch.ClaimsDirEnv + "=" + filepath.Join(t.TempDir(), "claims")}}
}

// startLocal launches j on the local worker run; it is cancelled at the
// end of the test if still there.
func startLocal(t *testing.T, run sshexec.Local, j job.Job) job.Job {
	t.Helper()
	j.Placement.Host = "local"
	r, err := launch.Start(context.Background(), run, "local", cluster, j)
	if err != nil {
		t.Fatal(err)
	}
	j.Remote = r
	t.Cleanup(func() { launch.Cancel(context.Background(), run, "local", cluster, j, time.Second) })
	return j
}

// waitLocal polls j on run until it ended.
func waitLocal(t *testing.T, run sshexec.Local, j job.Job) job.Status {
	t.Helper()
	for range 200 {
		m, err := launch.Poll(context.Background(), run, "local", cluster, []job.Job{j})
		if err != nil {
			t.Fatal(err)
		}
		if st := m[j.ID]; st.State.Terminal() {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %d did not end in 10s", j.ID)
	return job.Status{}
}

// --log-limit on a real run.sh: the command's output (stdout and stderr
// in the order written) is capped at the limit, the log says it was
// truncated, the command is neither blocked nor killed by the cap, and
// its exit status is kept; under the limit the log is what it wrote.
func TestLogLimit(t *testing.T) {
	home := t.TempDir()
	run := localWorker(t, home)
	// 3 MiB to stdout and stderr, then a last line: it must run to its end.
	big := newJob(21, `printf 'out\n'; printf 'err\n' >&2; printf 'out2\n'; head -c 3145728 /dev/zero | tr '\0' x; echo; echo done >"$HOME/finished"; exit 3`)
	big.Spec.Shell, big.Spec.LogLimit = true, 1<<20
	small := newJob(22, `printf 'a\n'; printf 'b\n' >&2; printf 'c\n'`)
	small.Spec.Shell, small.Spec.LogLimit = true, 1<<20
	big, small = startLocal(t, run, big), startLocal(t, run, small)

	st := waitLocal(t, run, big)
	if st.State != job.Failed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Errorf("capped job: %+v (code %v), want failed with exit status 3", st, deref(st.ExitCode))
	}
	if _, err := os.Stat(filepath.Join(home, "finished")); err != nil {
		t.Errorf("the capped command did not run to its end: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(big.Remote.Dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	const note = "\ngssh: the log was truncated at 1 MiB (--log-limit): the rest of the job's output was thrown away\n"
	body, ok := bytes.CutSuffix(log, []byte(note))
	switch {
	case !ok:
		t.Errorf("log does not end with the note; its end: %q", log[max(0, len(log)-200):])
	case len(body) != 1<<20:
		t.Errorf("log holds %d bytes of output, want the cap, %d", len(body), 1<<20)
	case !bytes.HasPrefix(body, []byte("out\nerr\nout2\nxxx")):
		t.Errorf("log starts %q, want stdout and stderr in the order written", body[:20])
	}
	if _, err := os.Lstat(filepath.Join(big.Remote.Dir, "out")); !os.IsNotExist(err) {
		t.Errorf("the FIFO is left in the job directory: %v", err)
	}

	if st := waitLocal(t, run, small); st.State != job.Succeeded {
		t.Errorf("job under its cap: %+v", st)
	}
	if log, err := os.ReadFile(filepath.Join(small.Remote.Dir, "log")); err != nil || string(log) != "a\nb\nc\n" {
		t.Errorf("log under the cap = %q %v, want the output as written", log, err)
	}
}

// A capped job cancelled mid-run: its log keeps what it wrote before,
// and the log's reader does not outlive it.
func TestLogLimitCancel(t *testing.T) {
	home := t.TempDir()
	run := localWorker(t, home)
	j := newJob(23, `echo started; exec sleep 300`)
	j.Spec.Shell, j.Spec.LogLimit = true, 1<<20
	j = startLocal(t, run, j)
	logf := filepath.Join(j.Remote.Dir, "log")
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(logf); strings.Contains(string(b), "started") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := launch.Cancel(context.Background(), run, "local", cluster, j, time.Second); err != nil {
		t.Fatal(err)
	}
	if st := waitLocal(t, run, j); st.State != job.Cancelled || st.Orphans != 0 {
		t.Errorf("cancelled capped job: %+v, want cancelled, nothing left", st)
	}
	if b, _ := os.ReadFile(logf); !strings.HasPrefix(string(b), "started\n") {
		t.Errorf("log = %q, want what the job wrote before the cancel", b)
	}
}

// RemoveDirs removes exactly the directories given, each quoted (a home
// whose path is shell syntax runs nothing), and only gssh job
// directories of this queue: a recorded path that is not one, or names
// another queue, is left alone; a symlink goes, not what it points to.
func TestRemoveDirs(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h $(touch pwned) `touch pwned2` 'q\" ;x")
	jobs := filepath.Join(home, ".gssh", "jobs")
	mk := func(rel string, size int) string {
		t.Helper()
		d := filepath.Join(home, rel)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "log"), bytes.Repeat([]byte("x"), size), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	mk(launch.DirName(cluster, 5, 1), 100)
	recorded := mk(launch.DirName(cluster, 5, 2), 64<<10)
	other := mk(".gssh/jobs/fedcba9876543210-8.1", 10)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(jobs, cluster+"-10.1")); err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	t.Chdir(cwd)
	run := localWorker(t, home)
	dirs := []job.WorkerDir{
		{Job: 5, Attempt: 1},                // by its default name, under the home
		{Job: 5, Attempt: 2, Dir: recorded}, // as recorded at launch
		{Job: 6, Attempt: 1},                // never made (gone)
		{Job: 7, Attempt: 1, Dir: "/etc"},   // not a job directory
		{Job: 8, Attempt: 1, Dir: other},    // another queue's
		{Job: 9, Attempt: 1, Dir: jobs + "/" + cluster + "-9.1/../../../x"},
		{Job: 10, Attempt: 1}, // a symlink
		{Job: 11, Attempt: 1, Dir: jobs + "/" + cluster + "-11.1\n"},
	}
	got, err := launch.RemoveDirs(context.Background(), run, "local", cluster, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(dirs) {
		t.Fatalf("%d answers for %d directories", len(got), len(dirs))
	}
	ok := func(i int) bool { return got[i].Err == "" && !got[i].Gone }
	if !ok(0) || !ok(1) || got[1].Bytes < 64<<10 || !got[2].Gone || got[2].Err != "" || !ok(6) {
		t.Errorf("removals: %+v", got)
	}
	for _, i := range []int{3, 4, 5, 7} {
		if !strings.Contains(got[i].Err, "not a gssh job directory of this queue") {
			t.Errorf("dir %d (%q): %+v, want it refused", i, dirs[i].Dir, got[i])
		}
	}
	for _, d := range []string{filepath.Join(home, launch.DirName(cluster, 5, 1)), recorded, filepath.Join(jobs, cluster+"-10.1")} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
	for _, d := range []string{other, outside, "/etc"} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	for _, dir := range []string{cwd, home, filepath.Dir(home)} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "pwned") {
				t.Errorf("a path ran as shell: %s in %s", e.Name(), dir)
			}
		}
	}
	// Nothing to try: no command at all.
	if got, err := launch.RemoveDirs(context.Background(), failRunner{t}, "local", cluster, dirs[3:4]); err != nil || !slices.ContainsFunc(got, func(r job.DirRemoval) bool { return r.Err != "" }) {
		t.Errorf("refused only: %+v %v", got, err)
	}
}

// failRunner fails the test if a command is run.
type failRunner struct{ t *testing.T }

func (f failRunner) Run(context.Context, string, string, io.Reader) (sshexec.Result, error) {
	f.t.Error("a command was run")
	return sshexec.Result{}, nil
}
