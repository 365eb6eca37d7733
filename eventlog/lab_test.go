package eventlog

import (
	"fmt"
	"github.com/gssh/gssh/testenv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/labfile"
)

const labPassUID, labMemberUID = 4242, 4243

// labLog is a lab's directory as gssh lab init makes it (the pass
// account labPassUID's, as root) and a file of the pass account beside
// it, whose content and mode no entry may lead a write to change.
func labLog(t *testing.T) (d labfile.Dir, victim string) {
	t.Helper()
	testenv.NeedRoot(t, "the lab event log tests chown files to other uids")
	top := t.TempDir()
	d = labfile.New(filepath.Join(top, "lab"), "pass", labPassUID, "labgrp", os.Getgid())
	if _, err := d.EnsureDir(d.Path, false); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(top, "victim")
	if err := os.WriteFile(victim, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(victim, labPassUID, labPassUID)
	return d, victim
}

func victimSame(t *testing.T, victim string) {
	t.Helper()
	b, err := os.ReadFile(victim)
	fi, _ := os.Stat(victim)
	if err != nil || string(b) != "secret\n" || fi.Mode() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != labPassUID || fi.Sys().(*syscall.Stat_t).Gid != labPassUID {
		t.Errorf("victim changed: %q %v %v", b, fi.Mode(), err)
	}
}

// TestLabLogSwaps: in a lab's directory a member's links at the log's
// names (the log, its lock, a rotated file's name) are never followed: a
// member's write is refused with a warning, the pass account's replaces
// them (a rotated name's link is removed, not compressed) and logs a
// lab_file_replaced event; only the pass account rotates.
func TestLabLogSwaps(t *testing.T) {
	d, victim := labLog(t)
	path := filepath.Join(d.Path, Name)
	dayOld := time.Now().Add(-48 * time.Hour).UTC()
	rotatedName := filepath.Join(d.Path, "events-"+dayOld.Format(backupLayout)+".log")
	for _, p := range []string{path, path + ".lock", rotatedName} {
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	member := Open(path, Options{Lab: new(d.As(labMemberUID)), Warn: func(s string) { warned = append(warned, s) }})
	member.Write(Event{Kind: JobSubmit, Job: 1})
	member.Close()
	if len(warned) == 0 || !strings.Contains(warned[0], "is not gssh's own file (found a symbolic link to "+victim+")") {
		t.Errorf("member's warnings: %q", warned)
	}
	victimSame(t, victim)

	pass := Open(path, Options{Lab: &d, Warn: func(s string) { t.Errorf("warning: %s", s) }})
	pass.Write(Event{Kind: JobSubmit, Job: 2})
	pass.Close()
	victimSame(t, victim)
	b, _ := os.ReadFile(path)
	for _, want := range []string{`"event":"lab_file_replaced","path":"` + path + `","found":"a symbolic link to ` + victim,
		`"event":"lab_file_replaced","path":"` + path + `.lock"`, `"event":"lab_file_replaced","path":"` + rotatedName + `","found":"a symbolic link to ` + victim + ` (removed)"`,
		`"event":"job_submit","job":2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("log lacks %s:\n%s", want, b)
		}
	}
	if _, err := os.Lstat(rotatedName + ".gz"); err == nil {
		t.Error("the link at a rotated file's name was compressed")
	}

	// A day-old log: a member appends, the pass account rotates.
	old := `{"time":"` + dayOld.Format(time.RFC3339) + `","event":"job_submit","job":3}` + "\n"
	if err := os.WriteFile(path, []byte(old), 0); err != nil {
		t.Fatal(err)
	}
	member = Open(path, Options{Lab: new(d.As(labMemberUID))})
	member.Write(Event{Kind: JobSubmit, Job: 4})
	member.Close()
	if gz, _ := filepath.Glob(filepath.Join(d.Path, "events-*.log*")); len(gz) != 0 {
		t.Errorf("a member rotated: %q", gz)
	}
	pass = Open(path, Options{Lab: &d})
	pass.Write(Event{Kind: JobSubmit, Job: 5})
	pass.Close()
	gz, _ := filepath.Glob(filepath.Join(d.Path, "events-*.log.gz"))
	if len(gz) != 1 {
		t.Fatalf("rotated: %q", gz)
	}
	for _, p := range []string{path, gz[0]} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != labfile.Perm || fi.Sys().(*syscall.Stat_t).Uid != labPassUID {
			t.Errorf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	var got []int
	_, err := Read(path, Filter{}, func(e Record) error {
		if e.Kind == JobSubmit {
			got = append(got, int(e.Job))
		}
		return nil
	}, nil)
	if err != nil || len(got) != 3 || got[0] != 3 || got[1] != 4 || got[2] != 5 {
		t.Errorf("read back: %v %v", got, err)
	}
}

// TestLabLogAdopts: a member's rotated file (from before gssh lab init)
// is compressed as the pass account's, its lines kept, and said so.
func TestLabLogAdopts(t *testing.T) {
	d, _ := labLog(t)
	path := filepath.Join(d.Path, Name)
	rotated := filepath.Join(d.Path, "events-"+time.Now().Add(-time.Hour).UTC().Format(backupLayout)+".log")
	line := `{"time":"` + time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339) + `","event":"job_submit","job":7}` + "\n"
	if err := os.WriteFile(rotated, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(rotated, labMemberUID, d.GID)
	pass := Open(path, Options{Lab: &d, Warn: func(s string) { t.Errorf("warning: %s", s) }})
	pass.Write(Event{Kind: JobSubmit, Job: 8})
	pass.Close()
	fi, err := os.Stat(rotated + ".gz")
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != labPassUID {
		t.Fatalf("compressed: %v", err)
	}
	var got []int
	var replaced int
	Read(path, Filter{}, func(e Record) error {
		switch e.Kind {
		case JobSubmit:
			got = append(got, int(e.Job))
		case LabFileReplaced:
			replaced++
		}
		return nil
	}, nil)
	if len(got) != 2 || got[0] != 7 || got[1] != 8 || replaced != 1 {
		t.Errorf("read back %v, %d replaced", got, replaced)
	}
}

// TestLabLogLinked: a member's hard links to the pass account's log and
// to a rotated file cost no line: the pass account's next write copies
// each into a fresh file (a rotated one is then compressed), says so,
// and the links keep the old files.
func TestLabLogLinked(t *testing.T) {
	d, _ := labLog(t)
	path := filepath.Join(d.Path, Name)
	pass := Open(path, Options{Lab: &d, Warn: func(s string) { t.Errorf("warning: %s", s) }})
	pass.Write(Event{Kind: JobSubmit, Job: 8})
	pass.Close()
	rotated := filepath.Join(d.Path, "events-"+time.Now().Add(-time.Hour).UTC().Format(backupLayout)+".log")
	line := `{"time":"` + time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339) + `","event":"job_submit","job":7}` + "\n"
	if err := os.WriteFile(rotated, []byte(line), 0o660); err != nil {
		t.Fatal(err)
	}
	os.Chown(rotated, labPassUID, d.GID)
	for i, p := range []string{path, rotated} {
		if err := os.Link(p, filepath.Join(filepath.Dir(d.Path), "link"+string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	pass = Open(path, Options{Lab: &d, Warn: func(s string) { t.Errorf("warning: %s", s) }})
	pass.Write(Event{Kind: JobSubmit, Job: 9})
	pass.Close()
	var got []int
	var found []string
	Read(path, Filter{}, func(e Record) error {
		switch e.Kind {
		case JobSubmit:
			got = append(got, int(e.Job))
		case LabFileReplaced:
			found = append(found, fmt.Sprint(e.Fields["found"]))
		}
		return nil
	}, nil)
	if len(got) != 3 || got[0] != 7 || got[1] != 8 || got[2] != 9 {
		t.Errorf("read back jobs %v", got)
	}
	if len(found) != 2 || !strings.Contains(found[0], "with 2 links; its content was kept") || !strings.Contains(found[1], "with 2 links; its content was kept") {
		t.Errorf("replaced: %q (jobs %v)", found, got)
	}
}
