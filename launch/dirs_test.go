package launch_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec"
)

// JobDirs lists the queue's attempt directories and nothing else; a
// hostile cluster id reaches the shell as a literal, never as code.
func TestJobDirs(t *testing.T) {
	home := t.TempDir()
	run := &sshexec.Local{Env: []string{"HOME=" + home, "PATH=/usr/bin:/bin"}}
	if dirs, err := launch.JobDirs(context.Background(), run, "ctl", cluster); err != nil || len(dirs) != 0 {
		t.Fatalf("no ~/.gssh/jobs: %v, %v", dirs, err)
	}
	root := filepath.Join(home, ".gssh", "jobs")
	for _, name := range []string{cluster + "-3.1", cluster + "-3.2", cluster + "-12", cluster + "-7.1", "ffff-9.1", cluster + "-x.1", cluster + "-4.0", cluster + "-0.1"} {
		if err := os.MkdirAll(filepath.Join(root, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, cluster+"-99.1"), nil, 0o600); err != nil { // a file: no attempt's
		t.Fatal(err)
	}
	dirs, err := launch.JobDirs(context.Background(), run, "ctl", cluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []launch.JobDir{{ID: 12}, {ID: 3, Attempt: 1}, {ID: 3, Attempt: 2}, {ID: 7, Attempt: 1}}
	slices.SortFunc(dirs, func(a, b launch.JobDir) int { return int(a.ID)*100 + a.Attempt - int(b.ID)*100 - b.Attempt })
	slices.SortFunc(want, func(a, b launch.JobDir) int { return int(a.ID)*100 + a.Attempt - int(b.ID)*100 - b.Attempt })
	if !slices.Equal(dirs, want) {
		t.Errorf("dirs %v, want %v", dirs, want)
	}

	mark := filepath.Join(home, "pwned")
	for _, hostile := range []string{"x'; touch " + mark + "; '", "$(touch " + mark + ")", "`touch " + mark + "`", "*", "a b\n;touch " + mark} {
		if dirs, err := launch.JobDirs(context.Background(), run, "ctl", hostile); err != nil || len(dirs) != 0 {
			t.Errorf("cluster %q: %v, %v; want none", hostile, dirs, err)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("a hostile cluster id ran as shell code")
	}
}
