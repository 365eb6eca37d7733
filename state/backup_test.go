package state_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

func submitN(t *testing.T, s *state.Bolt, n int, user string) []job.Job {
	t.Helper()
	var out []job.Job
	for range n {
		j, err := s.Submit(job.Job{User: user, Spec: job.Spec{Argv: []string{"true"}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

// A backup taken while another goroutine keeps writing is a whole, clean
// state file of mode 0600; the destinations that would lose data or
// cannot be written are refused, saying what to give instead.
func TestBackup(t *testing.T) {
	s, path := openTemp(t)
	submitN(t, s, 3, "a")
	end := time.Unix(1700000000, 0)
	if _, err := s.Update(1, func(j *job.Job) error {
		j.State, j.StartedAt, j.EndedAt = job.Succeeded, end.Add(-time.Hour), end
		j.Placement = job.Placement{Host: "h", GPUs: []string{"GPU-1"}, Indexes: []int{0}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Submit(job.Job{User: "w"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	dir := t.TempDir()
	dest := filepath.Join(dir, "b.db")
	var sum state.Summary
	var err error
	for range 5 { // each replaces the last whole
		if sum, err = s.Backup(dest); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if sum.Jobs < 3 || sum.MaxID != job.ID(sum.Jobs) || sum.JobSeq != uint64(sum.MaxID) || sum.Schema != schemaOf(t, path) || sum.Path != dest || sum.Bytes <= 0 {
		t.Errorf("summary %+v", sum)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != sum.Bytes {
		t.Errorf("backup file: %v, %v", fi, err)
	}
	r, err := state.Check(dest, state.Options{})
	if err != nil || len(r.Problems) != 0 || r.Jobs != sum.Jobs || r.ClusterID != sum.ClusterID {
		t.Errorf("check of the backup: %+v, %v", r, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".gssh-backup-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	link := filepath.Join(dir, "link.db")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.db")
	if err := os.Symlink(path, sym); err != nil {
		t.Fatal(err)
	}
	// gssh's own files beside the state file (the event log, the pass
	// lock: empty) and any file that is no older backup stay as they are.
	events, lock := filepath.Join(filepath.Dir(path), "events.log"), path+".pass.lock"
	if err := os.WriteFile(events, []byte(`{"event":"job_submit"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const notBackup = "the file exists and is no bbolt file (no older backup) that a backup may replace; give a new file name, or remove it first"
	for _, tc := range []struct{ dest, want string }{
		{events, notBackup},
		{lock, notBackup},
		{path, "that is the live state file itself"},
		{filepath.Join(filepath.Dir(path), ".", "state.db"), "that is the live state file itself"},
		{link, "that is the live state file " + path + " itself (another name for it)"},
		{sym, "another name for it"},
		{filepath.Join(dir, "nothere", "b.db"), "directory " + filepath.Join(dir, "nothere") + " does not exist: make it first (mkdir -p"},
		{dir, "is a directory: give a file name, such as " + filepath.Join(dir, "gssh-backup.db")},
		{filepath.Join(dest, "x.db"), "is not a directory"},
	} {
		if _, err := s.Backup(tc.dest); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Backup(%s) = %v, want %q", tc.dest, err, tc.want)
		}
	}
	if r, err := state.Check(path, state.Options{}); err != nil || len(r.Problems) != 0 {
		t.Errorf("the live file after the refusals: %+v, %v", r, err)
	}
	if b, err := os.ReadFile(events); err != nil || string(b) != `{"event":"job_submit"}`+"\n" {
		t.Errorf("the event log after a refused backup onto it: %q, %v", b, err)
	}
}

// Check reports each problem of a readable file, and refuses files that
// are not gssh state files, saying what they are; it never changes a
// file, even one whose schema a write would migrate or whose mode Open
// would tighten.
func TestCheck(t *testing.T) {
	s, path := openTemp(t)
	submitN(t, s, 4, "a")
	end := time.Unix(1700000000, 0)
	for _, id := range []job.ID{1, 2} {
		if _, err := s.Update(id, func(j *job.Job) error {
			j.State, j.StartedAt, j.EndedAt = job.Succeeded, end.Add(-time.Hour), end.Add(time.Duration(id)*time.Second)
			j.Placement = job.Placement{Host: "h", GPUs: []string{"GPU-1"}, Indexes: []int{0}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := state.Check(path, state.Options{})
	if err != nil || len(r.Problems) != 0 || r.Jobs != 4 || r.Active != 2 || r.MaxID != 4 || r.JobSeq != 4 || r.Schema != schemaOf(t, path) || len(r.ActiveJobs) != 2 {
		t.Fatalf("clean file: %+v, %v", r, err)
	}

	// Break it in every way gssh's check knows.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		key := func(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }
		active, jobs, usage := tx.Bucket([]byte("active")), tx.Bucket([]byte("jobs")), tx.Bucket([]byte("usage"))
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(active.Delete(key(3)))                 // queued, not indexed
		must(active.Put(key(1), nil))               // ended, indexed
		must(active.Put(key(9), nil))               // indexed, no record
		must(jobs.Put(key(7), []byte("{not json"))) // unreadable record
		must(tx.Bucket([]byte("meta")).Put([]byte("job_seq"), key(5)))
		c := usage.Cursor()
		k, _ := c.First()
		must(usage.Delete(append([]byte(nil), k...))) // job 1's use missing
		must(usage.Put(append(key(uint64(end.UnixNano())), key(4)...), []byte(`{"user":"a"}`)))
		must(tx.Bucket([]byte("hosts")).Put([]byte("h2"), []byte("{")))
		must(tx.Bucket([]byte("drains")).Put([]byte("h3"), []byte("[")))
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	fi0, _ := os.Stat(path)
	r, err = state.Check(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"job 3 is queued but not in the active index",
		"active: job 1 is in the active index but has ended (succeeded)",
		"active: job 9 is in the active index but not stored",
		"jobs: job 7: decode:",
		"meta: job_seq 5 is below the highest job id 7",
		"usage: job 1 has no ledger entry",
		"usage: an entry for job 4 that its record does not have",
		"hosts: the record of h2 cannot be decoded",
		"drains: the records of [h3] cannot be decoded",
	} {
		found := false
		for _, p := range r.Problems {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("no problem %q in %q", want, r.Problems)
		}
	}
	if len(r.Problems) != 9 {
		t.Errorf("%d problems, want 9: %q", len(r.Problems), r.Problems)
	}
	after, _ := os.ReadFile(path)
	fi1, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !fi1.ModTime().Equal(fi0.ModTime()) || fi1.Mode() != fi0.Mode() {
		t.Error("Check changed the file")
	}

	// Files that are not gssh state files, or cannot be checked.
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	buf := make([]byte, 64<<10)
	rand.Read(buf)
	os.WriteFile(junk, buf, 0o600)
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	foreign := filepath.Join(dir, "foreign.db")
	fdb, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	fdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	fdb.Close()
	_, newer := openTemp(t)
	setMeta(t, newer, "version", binary.BigEndian.AppendUint64(nil, 9))
	for _, tc := range []struct {
		path string
		is   error
		want string
	}{
		{junk, state.ErrCorrupt, "not a gssh state file"},
		{empty, state.ErrDamaged, "the file is empty (0 bytes)"},
		{foreign, state.ErrCorrupt, `no "meta" bucket (another program's bbolt file?)`},
		{newer, state.ErrNewerSchema, fmt.Sprintf("schema 9; this gssh reads up to %d); upgrade gssh to check it", schemaOf(t, path))},
		{filepath.Join(dir, "nothere.db"), state.ErrNoState, "no such file"},
	} {
		old, _ := os.ReadFile(tc.path)
		_, err := state.Check(tc.path, state.Options{})
		var fe *state.FileError
		if !errors.Is(err, tc.is) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("Check(%s) = %v, want %v saying %q", filepath.Base(tc.path), err, tc.is, tc.want)
		}
		if now, _ := os.ReadFile(tc.path); !bytes.Equal(old, now) {
			t.Errorf("Check(%s) changed the file", filepath.Base(tc.path))
		}
	}
}

// Restore puts the backup in place under its cluster id, keeps the file
// it replaces aside, and continues ids past both that file's and minSeq;
// a second restore keeps the first one's file too.
func TestRestore(t *testing.T) {
	s, path := openTemp(t)
	submitN(t, s, 2, "a")
	backup := filepath.Join(t.TempDir(), "b.db")
	if _, err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	submitN(t, s, 3, "later") // ids 3-5: in the live file only
	cluster, _ := s.ClusterID()
	backupBytes, _ := os.ReadFile(backup)

	r, err := state.Restore(backup, path, 0, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Before != path+".before-restore" || r.JobSeq != 5 || r.Jobs != 2 || r.ClusterID != cluster || r.Path != path {
		t.Errorf("restored %+v", r)
	}
	if now, _ := os.ReadFile(backup); !bytes.Equal(now, backupBytes) {
		t.Error("Restore changed the backup")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("restored file: %v, %v", fi, err)
	}
	// The store opened before sees the restored file and hands out 6.
	if j := submitN(t, s, 1, "new"); j[0].ID != 6 {
		t.Errorf("first id after the restore: %d, want 6", j[0].ID)
	}
	if c, _ := s.ClusterID(); c != cluster {
		t.Errorf("cluster id %s, want %s", c, cluster)
	}
	old, err := state.Check(path+".before-restore", state.Options{})
	if err != nil || old.Jobs != 5 || len(old.Problems) != 0 {
		t.Errorf("the file kept aside: %+v, %v", old, err)
	}

	// minSeq (the highest id on the workers) wins when higher.
	r, err = state.Restore(backup, path, 40, state.Options{})
	if err != nil || r.Before != path+".before-restore.2" || r.JobSeq != 40 {
		t.Errorf("second restore: %+v, %v", r, err)
	}
	if j := submitN(t, s, 1, "new"); j[0].ID != 41 {
		t.Errorf("first id after the second restore: %d, want 41", j[0].ID)
	}

	// No state file yet (a new controller): made from the backup.
	fresh := filepath.Join(t.TempDir(), "sub", "state.db")
	if r, err := state.Restore(backup, fresh, 3, state.Options{}); err != nil || r.Before != "" || r.JobSeq != 3 {
		t.Errorf("restore to a new file: %+v, %v", r, err)
	}
	if r, err := state.Check(fresh, state.Options{}); err != nil || len(r.Problems) != 0 || r.JobSeq != 3 {
		t.Errorf("check of the new file: %+v, %v", r, err)
	}
}

// An operation waiting for the lock of the file a restore replaces never
// writes into the replaced file unseen: it either ran before the swap
// (its id is then past by the restored file's job_seq) or finds the new
// file.
func TestRestoreWhileWaiting(t *testing.T) {
	s, path := openTemp(t)
	submitN(t, s, 2, "a")
	backup := filepath.Join(t.TempDir(), "b.db")
	if _, err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan job.Job, 1)
	go func() {
		j, err := s.Submit(job.Job{User: "waiter"})
		if err != nil {
			t.Error(err)
		}
		waiting <- j
	}()
	waitForWaiter(t, path)
	restored := make(chan state.Restored, 1)
	go func() {
		r, err := state.Restore(backup, path, 0, state.Options{})
		if err != nil {
			t.Error(err)
		}
		restored <- r
	}()
	db.Close()
	j, r := <-waiting, <-restored
	now, err := state.Check(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inNew := false
	for _, a := range now.ActiveJobs {
		inNew = inNew || a.ID == j.ID && a.User == "waiter"
	}
	if !inNew && r.JobSeq < uint64(j.ID) {
		t.Errorf("job %d of the waiter is in neither file's ids: restored job_seq %d", j.ID, r.JobSeq)
	}
	t.Logf("the waiter's job %d went to the %s file", j.ID, map[bool]string{true: "restored", false: "replaced"}[inNew])

	// Replaced while it waited for the old file's lock: it finds the new
	// one.
	other := filepath.Join(t.TempDir(), "other.db")
	if _, err := state.Restore(backup, other, 70, state.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		j, err := s.Submit(job.Job{User: "waiter2"})
		if err != nil {
			t.Error(err)
		}
		waiting <- j
	}()
	waitForWaiter(t, path)
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if j := <-waiting; j.ID != 71 {
		t.Errorf("the waiter's job went to id %d, want 71 in the new file", j.ID)
	}
}
