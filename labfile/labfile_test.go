package labfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/gssh/gssh/testenv"
)

const (
	passUID   = 4242
	memberUID = 4243
)

// newLab is a lab directory made as gssh lab init makes it (as root),
// and a file of the pass account beside it, victim, that no entry may
// lead a privileged gssh to.
func newLab(t *testing.T) (d Dir, victim string) {
	t.Helper()
	testenv.NeedRoot(t, "the lab file tests chown files to other uids")
	top := t.TempDir()
	d = New(filepath.Join(top, "lab"), "pass", passUID, "labgrp", os.Getgid())
	if r, err := d.EnsureDir(d.Path, false); err != nil || !r.Created {
		t.Fatalf("EnsureDir: %+v %v", r, err)
	}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(top, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(victim, passUID, passUID); err != nil {
		t.Fatal(err)
	}
	return d, victim
}

// TestEnsure: each entry a member could leave where gssh keeps a file
// is refused (a member's view) and replaced by a fresh file of the pass
// account (root's), what it was said; the file it led to is untouched.
func TestEnsure(t *testing.T) {
	kinds := map[string]struct {
		make  func(p, victim string) error
		found string
	}{
		"symlink":        {func(p, v string) error { return os.Symlink(v, p) }, "a symbolic link to "},
		"dangling":       {func(p, v string) error { return os.Symlink(v+"-new", p) }, "a symbolic link to "},
		"hard link":      {func(p, v string) error { return os.Link(v, p) }, "with 2 links; its content was kept"},
		"fifo":           {func(p, v string) error { return syscall.Mkfifo(p, 0o666) }, "a FIFO"},
		"directory":      {func(p, v string) error { return os.Mkdir(p, 0o755) }, "moved aside to "},
		"another's file": {func(p, v string) error { return writeAs(p, memberUID, "theirs") }, "a regular file of 4243; its content was kept"},
	}
	for name, k := range kinds {
		t.Run(name, func(t *testing.T) {
			d, victim := newLab(t)
			p := filepath.Join(d.Path, "events.log")
			if err := k.make(p, victim); err != nil {
				t.Fatal(err)
			}
			member := d.As(memberUID)
			var ue *UntrustedError
			if _, err := member.Open(p, os.O_RDWR, Gssh); !errors.As(err, &ue) || !strings.Contains(err.Error(), "the pass account pass replaces it") {
				t.Errorf("member's Open: %v", err)
			}
			if _, err := member.Ensure(p, CopyOld); !errors.As(err, &ue) {
				t.Errorf("member's Ensure: %v", err)
			}
			r, err := d.Ensure(p, CopyOld)
			if err != nil || r.Replaced == nil || !strings.Contains(r.Replaced.Found, k.found) {
				t.Fatalf("Ensure: %+v %v; want found %q", r.Replaced, err, k.found)
			}
			b, err := os.ReadFile(victim)
			fi, _ := os.Stat(victim)
			if err != nil || string(b) != "secret" || fi.Mode() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != passUID || fi.Sys().(*syscall.Stat_t).Gid != passUID {
				t.Errorf("victim after: %q %v %v", b, fi.Mode(), err)
			}
			if _, err := os.Lstat(victim + "-new"); err == nil {
				t.Error("a dangling link's target was made")
			}
			f, err := d.Open(p, os.O_RDONLY, Gssh)
			if err != nil {
				t.Fatalf("after Ensure: %v", err)
			}
			fi, _ = f.Stat()
			f.Close()
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode() != Perm || st.Uid != passUID || int(st.Gid) != d.GID || st.Nlink != 1 {
				t.Errorf("replaced file: %v uid %d gid %d links %d", fi.Mode(), st.Uid, st.Gid, st.Nlink)
			}
			// A regular file's content is kept: a link is to a file the
			// member may read (fs.protected_hardlinks, Check).
			want := map[string]string{"another's file": "theirs", "hard link": "secret"}[name]
			if b, _ := os.ReadFile(p); string(b) != want {
				t.Errorf("content %q, want %q", b, want)
			}
			if r, err := d.Ensure(p, CopyOld); err != nil || r != (Result{}) {
				t.Errorf("Ensure again: %+v %v", r, err)
			}
		})
	}
}

// writeAs writes a file of uid at p.
func writeAs(p string, uid int, content string) error {
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Chown(p, uid, uid)
}

// TestOpenFixes: a right file of a looser mode or another group is put
// right through its descriptor by its owner (or root), not by a member;
// a missing one is made by the pass account only.
func TestOpenFixes(t *testing.T) {
	d, _ := newLab(t)
	p := filepath.Join(d.Path, "state.db.pass.lock")
	if _, err := d.As(memberUID).OpenFix(p, os.O_RDWR, true, nil, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("member, missing: %v", err)
	}
	f, err := d.OpenFix(p, os.O_RDWR, true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chmod(p, 0o600)
	os.Chown(p, passUID, 0o7777)
	if f, err = d.As(memberUID).Open(p, os.O_RDONLY, Gssh); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(p); fi.Mode() != 0o600 {
		t.Errorf("a member changed the mode: %v", fi.Mode())
	}
	if f, err = d.Open(p, os.O_RDONLY, Gssh); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(p); fi.Mode() != Perm || int(fi.Sys().(*syscall.Stat_t).Gid) != d.GID {
		t.Errorf("not put right: %v gid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid)
	}
}

// TestCheckDir: the directory must be the pass account's, the lab
// group's, 3770, not a link; EnsureDir moves a member's directory aside.
func TestCheckDir(t *testing.T) {
	d, _ := newLab(t)
	for _, mode := range []fs.FileMode{fs.ModeSetgid | 0o770, fs.ModeSticky | 0o770, fs.ModeSetgid | fs.ModeSticky | 0o777} {
		os.Chmod(d.Path, mode)
		if err := d.Check(); !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), "as root: gssh lab init") {
			t.Errorf("mode %v: %v", mode, err)
		}
	}
	if r, err := d.EnsureDir(d.Path, false); err != nil || r != (Result{}) || d.Check() != nil {
		t.Errorf("EnsureDir of the pass account's: %+v %v", r, err)
	}
	run := filepath.Join(d.Path, "state.db.run")
	os.Mkdir(run, 0o777)
	os.Chmod(run, 0o777)
	os.Chown(run, memberUID, d.GID)
	if _, err := d.As(memberUID).EnsureDir(run, false); !errors.Is(err, ErrDir) {
		t.Errorf("member's EnsureDir: %v", err)
	}
	r, err := d.EnsureDir(run, false)
	if err != nil || r.Replaced == nil || !strings.Contains(r.Replaced.Found, "a directory (mode 0777) of 4243, moved aside to "+run+".untrusted-") {
		t.Errorf("EnsureDir of a member's: %+v %v", r.Replaced, err)
	}
	if err := d.Sub(run).Check(); err != nil {
		t.Error(err)
	}
}

// TestCheckParents: a directory above the state's that others may write
// (not sticky) is refused: they could move the state directory away.
func TestCheckParents(t *testing.T) {
	d, _ := newLab(t)
	parent := filepath.Dir(d.Path)
	os.Chmod(parent, 0o777)
	if err := d.Check(); !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), parent+", above the lab's state directory, is a directory (mode 0777) of root") {
		t.Errorf("a parent others write: %v", err)
	}
	os.Chmod(parent, fs.ModeSticky|0o777)
	if err := d.Check(); err != nil {
		t.Errorf("a sticky parent: %v", err)
	}
}

// TestEnsureKeepsLinked: a member's hard link to one of gssh's files
// (allowed: the lab's files are 0660) costs the file nothing: a
// member's gssh refuses it till the pass account copies it into a fresh
// file, whose content is the old one's; the member's link keeps the old
// file, which the entry no longer is.
func TestEnsureKeepsLinked(t *testing.T) {
	d, _ := newLab(t)
	p := filepath.Join(d.Path, "events.log")
	if _, err := d.Ensure(p, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("the lab's lines\n"), 0); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(d.Path), "evlink")
	if err := os.Link(p, link); err != nil {
		t.Fatal(err)
	}
	var ue *UntrustedError
	if _, err := d.As(memberUID).OpenFix(p, os.O_RDWR|os.O_APPEND, true, CopyOld, nil); !errors.As(err, &ue) || !strings.Contains(err.Error(), "with 2 links") {
		t.Fatalf("member's OpenFix: %v", err)
	}
	var got []Replaced
	f, err := d.OpenFix(p, os.O_RDWR|os.O_APPEND, true, CopyOld, func(r Replaced) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if len(got) != 1 || !strings.Contains(got[0].Found, "a regular file of 4242 with 2 links; its content was kept") {
		t.Errorf("replaced: %+v", got)
	}
	if b, _ := os.ReadFile(p); string(b) != "the lab's lines\n" {
		t.Errorf("entry's content %q", b)
	}
	fi, _ := os.Lstat(p)
	li, _ := os.Lstat(link)
	if os.SameFile(fi, li) || fi.Sys().(*syscall.Stat_t).Nlink != 1 || li.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Errorf("entry %v and link %v", fi.Sys(), li.Sys())
	}
}

// TestLockFileLinks: a lock with a link a member made is used as it is
// (no second file to lock beside a holder of the first), and neither its
// group nor its mode is touched through it.
func TestLockFileLinks(t *testing.T) {
	d, _ := newLab(t)
	p := filepath.Join(d.Path, "state.db.pass.lock")
	f, err := d.OpenLock(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Link(p, filepath.Join(filepath.Dir(d.Path), "locklink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, as := range []Dir{d, d.As(memberUID)} {
		g, err := as.OpenLock(p, func(r Replaced) { t.Errorf("replaced: %+v", r) })
		if err != nil {
			t.Fatalf("OpenLock as %d: %v", as.self, err)
		}
		if !os.SameFile(mustStat(t, f), mustStat(t, g)) {
			t.Error("another file than the held lock's")
		}
		if ok, _ := TryLock(f, syscall.LOCK_EX); !ok {
			t.Fatal("lock")
		}
		if ok, _ := TryLock(g, syscall.LOCK_EX); ok {
			t.Error("a second holder of the lock")
		}
		g.Close()
	}
	if fi, _ := os.Stat(p); fi.Mode() != 0o640 {
		t.Errorf("mode %v changed through a file with 2 links", fi.Mode())
	}
}

func mustStat(t *testing.T, f *os.File) fs.FileInfo {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestProtectedHardlinks: a lab needs fs.protected_hardlinks=1; Check
// says how to turn it on.
func TestProtectedHardlinks(t *testing.T) {
	d, _ := newLab(t)
	d.sysctl = filepath.Join(t.TempDir(), "protected_hardlinks")
	for v, want := range map[string]string{"0\n": "fs.protected_hardlinks is 0", "": "fs.protected_hardlinks is  (", "1\n": ""} {
		if err := os.WriteFile(d.sysctl, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		err := d.Check()
		if want == "" {
			if err != nil {
				t.Errorf("%q: %v", v, err)
			}
			continue
		}
		if !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sysctl -w fs.protected_hardlinks=1") || !strings.Contains(err.Error(), "/etc/sysctl.d/") {
			t.Errorf("%q: %v", v, err)
		}
	}
	os.Remove(d.sysctl)
	if err := d.Check(); !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), "cannot be read") {
		t.Errorf("no sysctl: %v", err)
	}
}

// TestOpenMemberPrivateFile: a member's file that the pass account may
// not even open (0600, where gssh expects its own) is untrusted, so that
// the pass account replaces it, not a plain permission error that would
// block the lab's file for good.
func TestOpenMemberPrivateFile(t *testing.T) {
	d, _ := newLab(t)
	for _, dir := range []string{filepath.Dir(filepath.Dir(d.Path)), filepath.Dir(d.Path)} { // t.TempDir's are 0700
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(d.Path, "events.log")
	if err := os.WriteFile(path, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, memberUID, memberUID); err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		// This thread only, which ends with the goroutine (still locked).
		runtime.LockOSThread()
		syscall.Setfsuid(passUID)
		f, err := d.Open(path, os.O_RDWR|os.O_APPEND, Gssh)
		if err == nil {
			f.Close()
		}
		got <- err
	}()
	var ue *UntrustedError
	if err := <-got; !errors.As(err, &ue) {
		t.Errorf("Open of a member's 0600 file as the pass account: %v, want an *UntrustedError", err)
	}
}
