package state_test

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/state/storetest"
)

func openTemp(t *testing.T) (*state.Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(path, state.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, path
}

func TestBolt(t *testing.T) {
	storetest.Run(t, func(t *testing.T) state.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestDefaultPath(t *testing.T) {
	for _, tc := range []struct{ home, xdg, want string }{
		{"/home/a", "", "/home/a/.local/state/gssh/state.db"},
		{"/home/a", "/var/xdg", "/var/xdg/gssh/state.db"},
		{"/home/a", "relative/xdg", "/home/a/.local/state/gssh/state.db"},
	} {
		if got := state.DefaultPath(tc.home, tc.xdg); got != tc.want {
			t.Errorf("DefaultPath(%q, %q) = %q, want %q", tc.home, tc.xdg, got, tc.want)
		}
	}
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFileMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "gssh")
	path := filepath.Join(dir, "state.db")
	if _, err := state.Open(path, state.Options{}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got := perm(t, dir); got != 0o700 {
		t.Errorf("dir mode = %o, want 700", got)
	}
	if got := perm(t, path); got != 0o600 {
		t.Errorf("new file mode = %o, want 600", got)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got := perm(t, path); got != 0o600 {
		t.Errorf("mode after reopening a 644 file = %o, want 600", got)
	}
	if _, err := s.Submit(job.Job{User: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, path); got != 0o600 {
		t.Errorf("mode after Submit = %o, want 600", got)
	}
}

func TestReopen(t *testing.T) {
	s, path := openTemp(t)
	id, _ := s.ClusterID()
	for range 3 {
		if _, err := s.Submit(job.Job{User: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if id2, _ := s2.ClusterID(); id2 != id {
		t.Errorf("cluster id changed on reopen: %s -> %s", id, id2)
	}
	j, err := s2.Submit(job.Job{User: "b"})
	if err != nil || j.ID != 4 {
		t.Errorf("Submit after reopen = %d, %v; want id 4", j.ID, err)
	}
	_, other := openTemp(t)
	s3, err := state.Open(other, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if id3, _ := s3.ClusterID(); id3 == id {
		t.Errorf("two files share cluster id %s", id)
	}
}

// TestLockReleasedBetweenOps: the store holds no lock between calls, so
// another process (here: a direct bbolt Open) gets the file at once.
func TestLockReleasedBetweenOps(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.Submit(job.Job{User: "a"}); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("file still locked after Submit returned: %v", err)
	}
	db.Close()
}

// TestBusyInProcess: a lock held by this process is reported with its pid.
func TestBusyInProcess(t *testing.T) {
	_, path := openTemp(t)
	s, err := state.Open(path, state.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = state.Open(path, state.Options{Timeout: 200 * time.Millisecond})
	checkBusy(t, err, os.Getpid())
	_, err = s.Get(1) // reads wait for a writer too
	checkBusy(t, err, os.Getpid())
}

func checkBusy(t *testing.T, err error, pid int) {
	t.Helper()
	if !errors.Is(err, state.ErrBusy) {
		t.Fatalf("error = %v, want ErrBusy", err)
	}
	var be *state.BusyError
	if !errors.As(err, &be) || be.PID != pid {
		t.Errorf("BusyError = %+v, want pid %d", be, pid)
	}
	if want := "state is busy (held by pid " + itoa(pid) + ")"; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to contain %q", err, want)
	}
}

func setMeta(t *testing.T, path, key string, val []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte(key), val) })
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	setMeta(t, path, "version", binary.BigEndian.AppendUint64(nil, 3))
	const want = "state file was written by a newer gssh (schema 3; this gssh reads up to 2); upgrade gssh"
	_, err := state.Open(path, state.Options{})
	if !errors.Is(err, state.ErrNewerSchema) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open = %v, want ErrNewerSchema %q", err, want)
	}
	// A store opened before the upgrade refuses too, reads and writes alike.
	if _, err := s.Submit(job.Job{User: "a"}); !errors.Is(err, state.ErrNewerSchema) {
		t.Errorf("Submit = %v, want ErrNewerSchema", err)
	}
	if _, err := s.List(state.Filter{}); !errors.Is(err, state.ErrNewerSchema) {
		t.Errorf("List = %v, want ErrNewerSchema", err)
	}
}

// A file of schema 1 (before attempts were counted) is read as it is, its
// records as attempt 0, and migrated to 2 by the first write.
func TestMigrateFromSchema1(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.Submit(job.Job{User: "a", State: job.Running, Placement: job.Placement{Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	setMeta(t, path, "version", binary.BigEndian.AppendUint64(nil, 1))
	version := func() uint64 {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v uint64
		db.View(func(tx *bolt.Tx) error {
			v = binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("version")))
			return nil
		})
		return v
	}
	r, err := state.Open(path, state.Options{NoCreate: true})
	if err != nil {
		t.Fatalf("read-only open of schema 1: %v", err)
	}
	js, err := r.List(state.Filter{})
	if err != nil || len(js) != 1 || js[0].Attempt != 0 || version() != 1 {
		t.Fatalf("read: %+v %v, version %d", js, err, version())
	}
	if _, err := r.Update(js[0].ID, func(x *job.Job) error { x.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 2 {
		t.Errorf("after a write: schema %d, want 2", v)
	}
}

func TestCorrupt(t *testing.T) {
	garbage := make([]byte, 64<<10)
	rand.Read(garbage)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"random bytes", func(t *testing.T, path string) { write(t, path, garbage) }},
		{"short text", func(t *testing.T, path string) { write(t, path, []byte("hello\n")) }},
		{"one page of zeros", func(t *testing.T, path string) { write(t, path, make([]byte, 4096)) }},
		{"foreign bbolt file", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
				t.Fatal(err)
			}
		}},
		{"bad cluster id", func(t *testing.T, path string) {
			if _, err := state.Open(path, state.Options{}); err != nil {
				t.Fatal(err)
			}
			setMeta(t, path, "cluster_id", []byte("nope"))
		}},
		{"bad version value", func(t *testing.T, path string) {
			if _, err := state.Open(path, state.Options{}); err != nil {
				t.Fatal(err)
			}
			setMeta(t, path, "version", []byte("1"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			tc.setup(t, path)
			_, err := state.Open(path, state.Options{Timeout: time.Second})
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			t.Log(err)
		})
	}
}

// A 0-byte file is an error, not a fresh queue; so is a truncated one (at
// any length: bbolt alone would die of SIGBUS on some), and a directory.
// Every such error is a *FileError naming the file.
func TestDamagedFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	write(t, path, nil)
	_, err := state.Open(path, state.Options{})
	if !errors.Is(err, state.ErrDamaged) || !strings.Contains(err.Error(), "empty (0 bytes)") {
		t.Errorf("empty file: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("Open wrote to the empty file")
	}

	s, full := openTemp(t)
	for range 200 {
		if _, err := s.Submit(job.Job{User: "a", Spec: job.Spec{Argv: []string{strings.Repeat("x", 200)}}}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{100, 4096, 8192, 12000, 16384, 20000, 30000} { // all below the pages in use
		cut := filepath.Join(t.TempDir(), "state.db")
		write(t, cut, data[:n])
		_, err := state.Open(cut, state.Options{})
		var fe *state.FileError
		if !errors.As(err, &fe) || fe.Path != cut || !errors.Is(err, state.ErrDamaged) && !errors.Is(err, state.ErrCorrupt) {
			t.Errorf("cut to %d of %d bytes: %v", n, len(data), err)
		}
		if n >= 8192 && !errors.Is(err, state.ErrDamaged) {
			t.Errorf("cut to %d bytes: %v, want ErrDamaged (it was a gssh file)", n, err)
		}
	}

	dir := t.TempDir()
	_, err = state.Open(dir, state.Options{})
	var fe *state.FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// NoCreate (read-only commands) never makes the file or its directory.
func TestNoCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo", "state.db")
	_, err := state.Open(path, state.Options{NoCreate: true})
	var fe *state.FileError
	if !errors.Is(err, state.ErrNoState) || !errors.As(err, &fe) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open = %v, want ErrNoState naming the file", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory was made: %v", err)
	}
	if _, err := state.Open(path, state.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(path, state.Options{NoCreate: true})
	if err != nil {
		t.Fatalf("existing file: %v", err)
	}
	if js, err := s.List(state.Filter{}); err != nil || len(js) != 0 {
		t.Errorf("List = %v, %v", js, err)
	}
}

// A write that fails for a full disk is a *FileError (exit 3), the job is
// not stored, and the file stays readable.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test mounts a small tmpfs")
		}
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "state.db")
	s, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 16<<10)
	var last job.ID
	for i := range 100 {
		j, err := s.Submit(job.Job{User: "a", Spec: job.Spec{Argv: []string{big}}})
		if err == nil {
			last = j.ID
			continue
		}
		var fe *state.FileError
		if !errors.As(err, &fe) || fe.Op != "write" || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("submit %d: %v, want a write *FileError for ENOSPC", i, err)
		}
		js, err := s.List(state.Filter{})
		if err != nil || len(js) == 0 || js[len(js)-1].ID != last {
			t.Fatalf("after ENOSPC: %d jobs (last %d), %v", len(js), last, err)
		}
		return
	}
	t.Fatal("the disk never filled")
}

func TestCorruptRecord(t *testing.T) {
	s, path := openTemp(t)
	for range 3 {
		if _, err := s.Submit(job.Job{User: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("jobs")).Put(binary.BigEndian.AppendUint64(nil, 2), []byte("{bad"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string]func() ([]job.Job, error){
		"List":   func() ([]job.Job, error) { return s.List(state.Filter{}) },
		"Active": s.Active,
	} {
		js, err := list()
		if !errors.Is(err, state.ErrBadRecord) || !strings.Contains(err.Error(), "job 2") {
			t.Errorf("%s error = %v, want ErrBadRecord naming job 2", name, err)
		}
		if len(js) != 2 || js[0].ID != 1 || js[1].ID != 3 {
			t.Errorf("%s returned %d jobs, want the 2 good ones", name, len(js))
		}
	}
	if _, err := s.Get(2); err == nil {
		t.Error("Get of a bad record: no error")
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
