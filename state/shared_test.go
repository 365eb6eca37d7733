package state_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/testenv"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/state"
)

// Uids of the shared-lab tests (as root: chown takes any number).
const (
	passUID   = 4242
	memberUID = 4243
)

// labDir is a lab's state directory made as gssh lab init makes it,
// whose pass account is passUID.
func labDir(t *testing.T) labfile.Dir {
	t.Helper()
	testenv.NeedRoot(t, "the shared-lab file tests chown files to other uids")
	dir := filepath.Join(t.TempDir(), "lab")
	d := labfile.New(dir, "pass", passUID, "labgrp", os.Getgid())
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "gssh lab init") {
		t.Fatalf("missing directory: %v", err)
	}
	if _, err := d.EnsureDir(dir, false); err != nil {
		t.Fatal(err)
	}
	return d
}

// victim is a file of the pass account that a member would like the
// pass account (or root) to open or change for them.
func victim(t *testing.T, dir string) (string, os.FileInfo) {
	t.Helper()
	p := filepath.Join(dir, "victim")
	if err := os.WriteFile(p, []byte("the pass account's own"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, passUID, passUID); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	return p, fi
}

// unchanged fails t unless the file at p still has fi's content size,
// mode and owner, and the content the victim was made with.
func unchanged(t *testing.T, p string, fi os.FileInfo) {
	t.Helper()
	now, err := os.Stat(p)
	b, _ := os.ReadFile(p)
	if err != nil || now.Mode() != fi.Mode() || now.Sys().(*syscall.Stat_t).Uid != fi.Sys().(*syscall.Stat_t).Uid ||
		now.Sys().(*syscall.Stat_t).Gid != fi.Sys().(*syscall.Stat_t).Gid || string(b) != "the pass account's own" {
		t.Errorf("%s changed: %v %v, %q", p, now.Mode(), err, b)
	}
}

// TestSharedMode: a lab's state is made by the pass account (or root),
// never by a member, whose gssh says to run gssh lab init; it is the
// pass account's, 0660 in the lab's group; the directory must be the
// lab's (3770, the pass account's).
func TestSharedMode(t *testing.T) {
	d := labDir(t)
	path := filepath.Join(d.Path, "state.db")
	member := state.Options{Shared: &state.Shared{Lab: d.As(memberUID)}}
	if _, err := state.Open(path, member); !errors.Is(err, state.ErrNoLabState) || !strings.Contains(err.Error(), "run gssh lab init as root") {
		t.Fatalf("member, no state: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a member's open made the state: %v", err)
	}
	pass := state.Options{Shared: &state.Shared{Lab: d}}
	if _, err := state.Open(path, state.Options{Shared: pass.Shared, NoCreate: true}); !errors.Is(err, state.ErrNoState) {
		t.Errorf("pass account, read-only, no state: %v", err)
	}
	s, err := state.Open(path, pass)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.Submit(job.Job{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != passUID || int(fi.Sys().(*syscall.Stat_t).Gid) != d.GID {
		t.Errorf("new shared file: %v, %v", fi.Mode(), err)
	}
	if _, err := state.Open(path, member); err != nil {
		t.Errorf("member: %v", err)
	}
	for _, mode := range []os.FileMode{0o700, os.ModeSetgid | 0o770, os.ModeSetgid | os.ModeSticky | 0o777} {
		if err := os.Chmod(d.Path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := state.Open(path, pass); !errors.Is(err, labfile.ErrDir) || !strings.Contains(err.Error(), "gssh lab init") {
			t.Errorf("directory mode %v: %v", mode, err)
		}
	}
}

// TestSharedSwaps: a member's entry where the state file should be (a
// symbolic link to a file of the pass account, a FIFO, a directory) is
// refused by a member's gssh, and replaced by the pass account's with an
// empty queue, saying so; the file it pointed to is unchanged. A
// member's own state file (made before the lab was set up with gssh lab
// init) keeps its queue, and so does the lab's state with a hard link a
// member made to it (ln state.db ~/x), which keeps the old file. (A
// member cannot link the pass account's private file there:
// fs.protected_hardlinks, which labfile.Dir.Check requires.)
func TestSharedSwaps(t *testing.T) {
	for _, kind := range []string{"symlink", "hardlink", "fifo", "dir", "member file"} {
		t.Run(kind, func(t *testing.T) {
			d := labDir(t)
			path := filepath.Join(d.Path, "state.db")
			vic, vfi := victim(t, filepath.Dir(d.Path))
			var err error
			switch kind {
			case "symlink":
				err = os.Symlink(vic, path)
			case "hardlink":
				var s *state.Bolt
				if s, err = state.Open(path, state.Options{Shared: &state.Shared{Lab: d}}); err == nil {
					_, err = s.Submit(job.Job{User: "alice"})
				}
				if err == nil {
					err = os.Link(path, filepath.Join(filepath.Dir(d.Path), "statelink"))
				}
			case "fifo":
				err = syscall.Mkfifo(path, 0o666)
			case "dir":
				err = os.Mkdir(path, 0o777)
			case "member file":
				var s *state.Bolt
				if s, err = state.Open(path, state.Options{Shared: &state.Shared{Lab: d}}); err == nil {
					_, err = s.Submit(job.Job{User: "alice"})
				}
				if err == nil {
					err = os.Chown(path, memberUID, d.GID)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if kind != "member file" { // a member's own file: theirs to use
				_, err := state.Open(path, state.Options{Shared: &state.Shared{Lab: d.As(memberUID)}})
				var ue *labfile.UntrustedError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), "replaces it at its next pass") {
					t.Errorf("member: %v", err)
				}
			}
			var told []labfile.Replaced
			s, err := state.Open(path, state.Options{Shared: &state.Shared{Lab: d, Report: func(r labfile.Replaced) { told = append(told, r) }}})
			if err != nil {
				t.Fatalf("pass account: %v", err)
			}
			unchanged(t, vic, vfi)
			fi, err := os.Lstat(path)
			if err != nil || fi.Mode() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != passUID || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
				t.Errorf("replaced: %v %v", fi.Mode(), err)
			}
			if len(told) != 1 || told[0].Path != path || told[0].Found == "" {
				t.Errorf("told %+v", told)
			}
			jobs, err := s.List(state.Filter{})
			if want := map[bool]int{true: 1, false: 0}[kind == "member file" || kind == "hardlink"]; err != nil || len(jobs) != want {
				t.Errorf("jobs after: %d %v, want %d", len(jobs), err, want)
			}
		})
	}
}

// TestSharedRestore: a lab's restore keeps the file it replaces in a
// new file of the pass account, passing over a member's link at
// .before-restore (never followed); the restored state is the pass
// account's, with one link; a member may not restore.
func TestSharedRestore(t *testing.T) {
	d := labDir(t)
	path := filepath.Join(d.Path, "state.db")
	opt := state.Options{Shared: &state.Shared{Lab: d}}
	s, err := state.Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(job.Job{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	vic, vfi := victim(t, filepath.Dir(d.Path))
	if err := os.Symlink(vic, path+".before-restore"); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Restore(backup, path, 0, state.Options{Shared: &state.Shared{Lab: d.As(memberUID)}}); err == nil || !strings.Contains(err.Error(), "restored by its pass account pass or root") {
		t.Errorf("member's restore: %v", err)
	}
	r, err := state.Restore(backup, path, 0, opt)
	if err != nil || r.Before != path+".before-restore.2" {
		t.Fatalf("Restore: %+v %v", r, err)
	}
	unchanged(t, vic, vfi)
	for _, p := range []string{path, r.Before} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != passUID || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Errorf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	if _, err := state.Open(path, opt); err != nil {
		t.Errorf("after the restore: %v", err)
	}
}

// TestSharedLinkedWhileWriting: a member's hard link to the lab's state
// made while the pass account writes loses no write: every Submit that
// returned an id is in the file the entry names after the next Open
// replaced it, and the link keeps the old file, which no write reaches
// afterwards.
func TestSharedLinkedWhileWriting(t *testing.T) {
	d := labDir(t)
	path := filepath.Join(d.Path, "state.db")
	pass := state.Options{Shared: &state.Shared{Lab: d}}
	s, err := state.Open(path, pass)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(d.Path), "statelink")
	stop := make(chan struct{})
	ids := make(chan job.ID, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if j, err := s.Submit(job.Job{User: "alice"}); err == nil {
				ids <- j.ID
			} else if !strings.Contains(err.Error(), "with 2 links") {
				t.Errorf("submit: %v", err)
				return
			}
		}
	}()
	for i := range 5 {
		time.Sleep(20 * time.Millisecond)
		os.Remove(link)
		if err := os.Link(path, link); err != nil {
			t.Fatal(err)
		}
		var told []labfile.Replaced
		opt := pass
		opt.Shared = &state.Shared{Lab: d, Report: func(r labfile.Replaced) { told = append(told, r) }}
		if _, err := state.Open(path, opt); err != nil {
			t.Fatalf("pass account's open %d: %v", i, err)
		}
		if len(told) != 1 || !strings.Contains(told[0].Found, "with 2 links; its content was kept") {
			t.Errorf("told %+v", told)
		}
	}
	close(stop)
	<-done
	close(ids)
	if len(ids) == 0 {
		t.Fatal("no submit went through")
	}
	linked, _ := os.ReadFile(link)
	for id := range ids {
		if _, err := s.Get(id); err != nil {
			t.Errorf("job %d, stored, is lost: %v", id, err)
		}
	}
	after, _ := os.ReadFile(link)
	if string(linked) != string(after) {
		t.Error("the old file, linked, was written after its replacement")
	}
}
