package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asUser runs a command as u (its uid, its group and the lab's),
// returning its error.
func (l *sharedLab) asUser(u *labUser, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{uint32(l.gid)}}}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v as %s: %v: %s", name, args, u.name, err, errb.String())
	}
	return nil
}

// victimFile is a file a member would like a privileged gssh to follow
// a link to; same reports whether it is still as it was.
type victimFile struct {
	path string
	fi   os.FileInfo
	data []byte
}

func (l *sharedLab) victim(path string, uid int, content string) victimFile {
	l.t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		l.t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	return victimFile{path: path, fi: fi, data: []byte(content)}
}

func (v victimFile) same(t *testing.T, after string) {
	t.Helper()
	fi, err := os.Stat(v.path)
	b, _ := os.ReadFile(v.path)
	if err != nil || fi.Mode() != v.fi.Mode() || fi.Sys().(*syscall.Stat_t).Uid != v.fi.Sys().(*syscall.Stat_t).Uid ||
		fi.Sys().(*syscall.Stat_t).Gid != v.fi.Sys().(*syscall.Stat_t).Gid || !bytes.Equal(b, v.data) {
		t.Errorf("after %s, %s changed: mode %v, %v, content %q", after, v.path, fi.Mode(), err, b)
	}
}

// TestSharedLabSwaps: a member can neither redirect nor block the lab's
// files. The files gssh lab init made are the pass account's in a
// sticky directory: a member cannot replace them. Where one is missing
// (or for names gssh makes later: a rotated event log, a gssh run's
// lock), a member's symbolic link to a file of the pass account (or, for
// the state, of root) is refused by members' gssh, and replaced (or
// removed) by the pass account's pass or root's gssh ps, with a
// lab_file_replaced event; the files it pointed to are unchanged. A
// member's copy of the lab inventory naming themselves pass_user is not
// used. gssh lab init is idempotent.
func TestSharedLabSwaps(t *testing.T) {
	t.Parallel() // beside the scripts: it mostly waits on its jobs
	l := newSharedLab(t)
	alice, bob, pass := l.alice, l.bob, l.pass
	root := &labUser{name: "root", home: l.root}
	dir := l.stateDir
	passFile := l.victim(filepath.Join(pass.home, "secret"), int(pass.uid), "the pass account's own")
	rootFile := l.victim(filepath.Join(l.root, "root-file"), 0, "root's own")
	want := func(what, got, sub string) {
		t.Helper()
		if !strings.Contains(got, sub) {
			t.Errorf("%s: want %q in:\n%s", what, sub, got)
		}
	}

	// What lab init made cannot be replaced by a member.
	for _, name := range []string{"state.db", "state.db.pass.lock", "events.log", "events.log.lock", "state.db.run"} {
		if err := l.asUser(alice, "ln", "-sfT", passFile.path, filepath.Join(dir, name)); err == nil {
			t.Errorf("alice replaced %s with a symbolic link", name)
		}
	}
	if out := l.labInit(); strings.Contains(out, "made") || strings.Contains(out, "replaced") {
		t.Errorf("gssh lab init again changed things:\n%s", out)
	}

	// A member's copy of the lab inventory naming herself pass_user.
	if _, errs, code := l.gssh(bob, "submit", "--hold", "--host", "w1", "--workdir", l.work, "--", "true"); code != 0 {
		t.Fatalf("bob's submit: %s", errs)
	}
	mine := filepath.Join(alice.home, "lab.yaml")
	l.writeInventory(mine, l.statePath, alice.name, "  users: {}\n")
	os.Chown(mine, int(alice.uid), int(alice.gid))
	for _, args := range [][]string{{"cancel", "1"}, {"schedule"}} {
		_, errs, code := l.gsshWith(alice, []string{"GSSH_INVENTORY=" + mine}, args...)
		if code != exitUsage {
			t.Errorf("alice's %v with her own lab inventory: exit %d, want %d", args, code, exitUsage)
		}
		want("her own lab inventory", errs, mine+": its `lab:` block is not used: the file "+mine+" is owned by "+alice.name+", not root")
	}
	if out, _, _ := l.gssh(bob, "ps"); !strings.Contains(out, "1\t"+bob.name+"\theld") {
		t.Errorf("bob's job after alice's try:\n%s", out)
	}

	// The pass lock, the event log and its lock, missing: a member's
	// links to the pass account's file.
	for _, name := range []string{"state.db.pass.lock", "events.log", "events.log.lock"} {
		p := filepath.Join(dir, name)
		os.Remove(p)
		if err := l.asUser(alice, "ln", "-s", passFile.path, p); err != nil {
			t.Fatal(err)
		}
	}
	// A member's gssh refuses them: her event is not written, and says why.
	_, errs, code := l.gssh(alice, "submit", "--hold", "--host", "w1", "--workdir", l.work, "--", "true")
	if code != 0 {
		t.Fatalf("alice's submit: exit %d", code)
	}
	want("alice's submit beside a link", errs, "is not gssh's own file (found a symbolic link to "+passFile.path+"): it is not used; the pass account "+pass.name+" replaces it")
	passFile.same(t, "alice's submit")
	// A rotated event log's name and a gssh run's lock: a member's links
	// too (old enough to be compressed; any token).
	rotated := filepath.Join(dir, "events-"+time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15-04-05.000")+".log")
	runLock := filepath.Join(dir, "state.db.run", strings.Repeat("ab", 16)+".lock")
	for _, p := range []string{rotated, runLock} {
		if err := l.asUser(alice, "ln", "-s", passFile.path, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, errs, code := l.gssh(pass, "schedule"); code != 0 {
		t.Fatalf("the pass account's schedule: exit %d: %s", code, errs)
	}
	passFile.same(t, "the pass account's schedule")
	for _, name := range []string{"state.db.pass.lock", "events.log", "events.log.lock"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != pass.uid {
			t.Errorf("%s after the pass: %v %v; want a regular file of %s, 0660", name, fi.Mode(), err, pass.name)
		}
	}
	for _, p := range []string{rotated, rotated + ".gz", runLock} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there after the pass", p)
		}
	}
	out, _, _ := l.gssh(bob, "events", "--json")
	for _, p := range []string{filepath.Join(dir, "state.db.pass.lock"), filepath.Join(dir, "events.log"), filepath.Join(dir, "events.log.lock"), rotated, runLock} {
		want("events", out, `"event":"lab_file_replaced","path":"`+p)
	}
	want("events", out, `"found":"a symbolic link to `+passFile.path+` (removed)"`)

	// The state file, missing: a member's link to a file of root's. A
	// member's gssh refuses it; root's gssh ps replaces it (a fresh
	// queue), not touching root's file.
	os.Remove(l.statePath)
	_, errs, code = l.gssh(alice, "ps")
	if code != exitState {
		t.Errorf("alice's ps without the state: exit %d, want %d", code, exitState)
	}
	want("alice's ps without the state", errs, "the lab's state file is not made yet: no such file: run gssh lab init as root")
	if err := l.asUser(alice, "ln", "-s", rootFile.path, l.statePath); err != nil {
		t.Fatal(err)
	}
	_, errs, code = l.gssh(alice, "ps")
	if code != exitState {
		t.Errorf("alice's ps beside a link: exit %d, want %d", code, exitState)
	}
	want("alice's ps beside a link", errs, "state.db is not gssh's own file (found a symbolic link to "+rootFile.path+")")
	if _, errs, code := l.gssh(root, "ps"); code != 0 {
		t.Errorf("root's ps: exit %d: %s", code, errs)
	}
	rootFile.same(t, "root's gssh ps")
	fi, err := os.Lstat(l.statePath)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != pass.uid {
		t.Errorf("state after root's ps: %v %v; want a regular file of %s, 0660", fi.Mode(), err, pass.name)
	}
	out, _, _ = l.gssh(bob, "events", "--json")
	want("events", out, `"event":"lab_file_replaced","path":"`+l.statePath+`","found":"a symbolic link to `+rootFile.path)

	// A lab set up the old way (a root-owned 2770 directory, the state
	// made by the first member who submitted): gssh lab init makes it
	// the pass account's, the queue kept.
	if _, errs, code := l.gssh(alice, "submit", "--hold", "--host", "w1", "--workdir", l.work, "--", "true"); code != 0 {
		t.Fatalf("alice's submit: %s", errs)
	}
	mustRun(t, "", "chown", "root", dir)
	mustRun(t, "", "chmod", "2770", dir)
	mustRun(t, "", "chown", alice.name, l.statePath)
	out = l.labInit()
	want("lab init of an old lab", out, dir+": made owner "+pass.name+", group "+l.group+", mode 3770")
	want("lab init of an old lab", out, l.statePath+": was not gssh's (a regular file of "+alice.name+"; its content was kept)")
	if out, _, _ := l.gssh(bob, "ps"); !strings.Contains(out, "1\t"+alice.name+"\theld") {
		t.Errorf("the queue after lab init:\n%s", out)
	}
}

// TestSharedLabHardLinks: a member's hard link to one of the lab's files
// (allowed: they are 0660 and fs.protected_hardlinks lets a member link
// what they may read and write) costs the lab nothing. Members' gssh
// refuse a state file with two links until the pass account's next pass,
// which copies it into a fresh file: the queue, its job ids and the
// event log are kept, and the member's link keeps the old file. A lock
// with a link is used as it is. No member can link the pass account's
// private file in (the kernel refuses).
func TestSharedLabHardLinks(t *testing.T) {
	t.Parallel() // beside the scripts: it mostly waits on its jobs
	l := newSharedLab(t)
	alice, bob, pass := l.alice, l.bob, l.pass
	dir := l.stateDir
	want := func(what, got, sub string) {
		t.Helper()
		if !strings.Contains(got, sub) {
			t.Errorf("%s: want %q in:\n%s", what, sub, got)
		}
	}
	passFile := l.victim(filepath.Join(pass.home, "secret"), int(pass.uid), "the pass account's own")
	if err := l.asUser(alice, "ln", passFile.path, filepath.Join(dir, "mine")); err == nil {
		t.Error("alice hard-linked the pass account's private file into the lab's directory")
	}
	for range 2 {
		if _, errs, code := l.gssh(bob, "submit", "--hold", "--host", "w1", "--workdir", l.work, "--", "true"); code != 0 {
			t.Fatalf("bob's submit: %s", errs)
		}
	}
	links := map[string]string{}
	for _, name := range []string{"state.db", "events.log", "state.db.pass.lock", "events.log.lock"} {
		links[name] = filepath.Join(alice.home, name+"-link")
		if err := l.asUser(alice, "ln", filepath.Join(dir, name), links[name]); err != nil {
			t.Fatal(err)
		}
	}
	_, errs, code := l.gssh(bob, "ps")
	if code != exitState {
		t.Errorf("bob's ps beside a linked state: exit %d, want %d", code, exitState)
	}
	want("bob's ps", errs, "state.db is not gssh's own file (found a regular file of "+pass.name+" with 2 links): it is not used; the pass account "+pass.name+" replaces it at its next pass")
	if _, errs, code := l.gssh(pass, "schedule"); code != 0 {
		t.Fatalf("the pass account's schedule: exit %d: %s", code, errs)
	}
	out, errs, code := l.gssh(bob, "ps")
	if code != 0 {
		t.Fatalf("bob's ps after the pass: exit %d: %s", code, errs)
	}
	for _, id := range []string{"1", "2"} {
		want("the queue after the pass", out, id+"\t"+bob.name+"\theld")
	}
	if out, _, _ := l.gssh(bob, "submit", "--hold", "--host", "w1", "--workdir", l.work, "--", "true"); !strings.Contains(out, "3") {
		t.Errorf("the next job id: %s", out)
	}
	out, _, _ = l.gssh(bob, "events", "--json")
	want("events", out, `"event":"job_submit","job":1,"user":"`+bob.name+`"`)
	for _, name := range []string{"state.db", "events.log"} {
		want("events", out, `"event":"lab_file_replaced","path":"`+filepath.Join(dir, name)+`","found":"a regular file of `+pass.name+` with 2 links; its content was kept"`)
		fi, err := os.Lstat(filepath.Join(dir, name))
		li, lerr := os.Lstat(links[name])
		if err != nil || lerr != nil || os.SameFile(fi, li) || fi.Sys().(*syscall.Stat_t).Nlink != 1 || fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Uid != pass.uid {
			t.Errorf("%s after the pass: %v %v (link: %v)", name, fi, err, lerr)
		}
	}
	for _, name := range []string{"state.db.pass.lock", "events.log.lock"} {
		if strings.Contains(out, `"path":"`+filepath.Join(dir, name)+`"`) {
			t.Errorf("%s, linked, was replaced", name)
		}
	}
	passFile.same(t, "the pass")
}
