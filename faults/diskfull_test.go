package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/testenv"
)

// TestStateDiskFull puts the state file on a 1 MiB tmpfs and fills it:
// a state that cannot be made, a submit that cannot be stored and a pass
// that cannot record how jobs ended each fail with exit 3, saying the
// disk is full, naming the state file and what to do; nothing stored is
// lost or damaged (bbolt's own check, every job read back), reads still
// work, and once there is room again the next pass records what the full
// disk kept it from recording.
//
// bbolt grows its file with ftruncate, which allocates nothing on tmpfs
// (nor on ext4 or XFS): a full disk shows when a commit writes its pages
// past the blocks the file has (or when a new file writes its first
// pages), before the meta page that would make them part of the file.
func TestStateDiskFull(t *testing.T) {
	t.Parallel() // each test has a fleet of its own
	testenv.NeedRoot(t, "it mounts a small tmpfs")
	f := newFleet(t, 0)
	mnt := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a 1 MiB tmpfs on %s: %v\n%s", mnt, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	f.setState(filepath.Join(mnt, "state.db"))
	fill := filepath.Join(mnt, "fill")
	diskFull := func(op, kept string) *regexp.Regexp {
		return regexp.MustCompile(`^gssh: (warning: job [0-9]+: .*)?` + op + ` state ` + regexp.QuoteMeta(f.state) +
			`: no space left on device \(the disk holding it is full\): ` + kept +
			`; free space on the filesystem of ` + regexp.QuoteMeta(mnt) + ` \(df -h ` + regexp.QuoteMeta(mnt) + ` shows it\) and run the command again$`)
	}

	// No state yet and no room to make one: nothing is left behind.
	fillDisk(t, fill)
	r := f.gssh("submit", "--", "true")
	if r.code != 3 || !matchLine(diskFull("create", "no state file was made"), r.stderr) {
		t.Fatalf("submit with no room for a new state: want exit 3 saying the disk is full\n%s", r)
	}
	if left, _ := filepath.Glob(filepath.Join(mnt, "*state*")); len(left) > 0 {
		t.Errorf("a failed creation left %v", left)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}

	// Three jobs run on the local host until the test lets them end (the
	// job dirs are in HOME, not on the full disk); a fourth is held.
	gate := filepath.Join(f.dir, "go")
	cmd := fmt.Sprintf(": %s; while [ ! -e %s ]; do sleep 0.05; done", strings.Repeat("x", 20<<10), gate)
	for i := 1; i <= 3; i++ {
		if r := f.gssh("submit", "--mem", "1G", "--host", "ctl", "--name", fmt.Sprintf("run%d", i), "--", cmd); r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("job %d running on ctl:", i)) {
			t.Fatalf("submit %d:\n%s", i, r)
		}
	}
	if r := f.gssh("submit", "--hold", "--name", "held", "--", "true"); r.code != 0 || !strings.HasPrefix(r.stdout, "job 4 ") {
		t.Fatalf("submit --hold:\n%s", r)
	}
	cluster := clusterID(t, f.state)
	t.Cleanup(func() { killQueue(cluster) })

	// The state file is compacted so that it has no free pages: on a full
	// disk every write then needs new blocks. (Without this, bbolt first
	// reuses the pages its earlier transactions freed, and whether one
	// write fails depends on its allocator: the test would prove less.)
	compact(t, f.state)
	before, err := readJobs(f.state)
	if err != nil || len(before) != 4 {
		t.Fatalf("%d jobs before the disk filled: %v", len(before), err)
	}
	fillDisk(t, fill)
	wantFull := diskFull("write", "the change was not stored, and the file holds what it held before")

	// A submit stores nothing and says why; reads still work.
	r = f.gssh("submit", "--mem", "1G", "--", "true")
	if r.code != 3 || r.stdout != "" || !matchLine(wantFull, r.stderr) {
		t.Errorf("submit on a full disk: want exit 3 saying the disk is full\n%s", r)
	}
	if r := f.gssh("ps", "-a"); r.code != 0 || strings.Count(r.stdout, "\n") != 5 {
		t.Errorf("ps on a full disk reads every job:\n%s", r)
	}

	// The jobs end; a pass cannot record it: each job says why, exit 3.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		waitFile(t, filepath.Join(f.home(), launch.DirName(cluster, job.ID(i), 1), "exit"))
	}
	r = f.gssh("schedule")
	t.Logf("what a pass on a full disk says:\n%s", r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if r.code != 3 || r.stdout != "" || len(lines) != 2 || !wantFull.MatchString(lines[0]) ||
		lines[1] != "gssh: warning: 2 more changes to jobs were not stored, for the same reason (the state file's disk is full)" {
		t.Errorf("a pass on a full disk: want exit 3 saying once that the disk is full\n%s", r)
	}
	checkBolt(t, f.state)
	after, err := readJobs(f.state)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("the jobs changed on a full disk (%v):\nbefore %+v\nafter  %+v", err, before, after)
	}

	// Room again: the next pass records the ends, a submit works.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if r := f.gssh("schedule"); r.code != 0 || r.stdout != "job 1 succeeded: exit status 0\njob 2 succeeded: exit status 0\njob 3 succeeded: exit status 0\n" {
		t.Errorf("the pass after space was freed:\n%s", r)
	}
	if r := f.gssh("submit", "--mem", "1G", "--host", "ctl", "--", "true"); r.code != 0 || !strings.HasPrefix(r.stdout, "job 5 running on ctl:") {
		t.Errorf("a submit after space was freed:\n%s", r)
	}
	checkBolt(t, f.state)
}

// compact rewrites the bbolt file at path without free pages (bbolt's
// Compact into a file beside it, renamed over it).
func compact(t *testing.T, path string) {
	t.Helper()
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tmp := path + ".compact"
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.Compact(dst, src, 0); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fillDisk writes path until its filesystem has no room left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	for { // the last partial block
		if _, err := fh.Write(buf[:1]); err != nil {
			break
		}
	}
}

// matchLine reports whether some line of text matches re.
func matchLine(re *regexp.Regexp, text string) bool {
	for _, line := range strings.Split(text, "\n") {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// waitFile waits (at most 30 s) until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30 s", path)
		}
	}
}
