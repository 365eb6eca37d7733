package state_test

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/testenv"

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

func TestBoltKeeper(t *testing.T) {
	storetest.RunKeeper(t, func(t *testing.T) state.Keeper {
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
	setMeta(t, path, "version", binary.BigEndian.AppendUint64(nil, 7))
	const want = "state file was written by a newer gssh (schema 7; this gssh reads up to 6); upgrade gssh"
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

// schemaOf reads the schema version of the file at path directly.
func schemaOf(t testing.TB, path string) uint64 {
	t.Helper()
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

// ledger reads the usage bucket directly: its keys and values, in order.
func ledger(t testing.TB, path string) (keys, vals [][]byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("usage")).ForEach(func(k, v []byte) error {
			keys, vals = append(keys, slices.Clone(k)), append(vals, slices.Clone(v))
			return nil
		})
	})
	return keys, vals
}

// downgrade makes the file at path one of schema v < 5: the version key
// says v, the buckets of schema 5 (drains/, history/, ended/, jobdirs/) are gone
// and, for v < 3, usage/ is the empty reserved bucket it was then.
func downgrade(t testing.TB, path string, v uint64) {
	t.Helper()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("meta")).Put([]byte("version"), binary.BigEndian.AppendUint64(nil, v)); err != nil {
			return err
		}
		for _, name := range []string{"drains", "history", "ended", "jobdirs"} {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		if v >= 3 {
			return nil
		}
		if err := tx.DeleteBucket([]byte("usage")); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte("usage"))
		return err
	})
}

// putRecord writes a raw jobs/ record, as an older gssh (or damage) would.
func putRecord(t testing.TB, path string, id job.ID, data []byte) {
	t.Helper()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("jobs")).Put(binary.BigEndian.AppendUint64(nil, uint64(id)), data)
	})
}

// rawUpdate runs fn in a write transaction on the file itself, past the
// store (as an older gssh, or damage, would write).
func rawUpdate(t testing.TB, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// A new file is of schema 6, and a file of schema 6 is refused by nothing:
// reads and writes work and keep the version.
func TestSchema6(t *testing.T) {
	s, path := openTemp(t)
	if v := schemaOf(t, path); v != 6 {
		t.Fatalf("new file: schema %d, want 6", v)
	}
	setMeta(t, path, "version", binary.BigEndian.AppendUint64(nil, 6))
	for _, opt := range []state.Options{{}, {NoCreate: true}} {
		if _, err := state.Open(path, opt); err != nil {
			t.Fatalf("Open(%+v) of a schema-6 file: %v", opt, err)
		}
	}
	j, err := s.Submit(job.Job{User: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(j.ID, func(j *job.Job) error { j.State = job.Cancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(j.ID); err != nil {
		t.Error(err)
	}
	if _, err := s.List(state.Filter{}); err != nil {
		t.Error(err)
	}
	if _, err := s.Active(); err != nil {
		t.Error(err)
	}
	if _, err := s.Uses(time.Time{}); err != nil {
		t.Error(err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after writes: schema %d, want 6", v)
	}
}

// The ledger is as documented: key = Ended as big-endian Unix nanoseconds,
// then the big-endian job id; value = the JSON of job.Use. It follows the
// record: one entry per ended job that started, moved when its end does.
func TestUsageLedgerLayout(t *testing.T) {
	s, path := openTemp(t)
	start := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(90*time.Minute + 123)
	p := job.Placement{Host: "h", GPUs: []string{"GPU-a"}, Indexes: []int{0}, Share: 0.25}
	if _, err := s.Submit(job.Job{User: "q"}); err != nil { // 1: queued
		t.Fatal(err)
	}
	if _, err := s.Submit(job.Job{User: "r", State: job.Running, Placement: p, StartedAt: start}); err != nil { // 2: running
		t.Fatal(err)
	}
	ended, err := s.Submit(job.Job{User: "e", State: job.Succeeded, Placement: p, StartedAt: start, EndedAt: end}) // 3
	if err != nil {
		t.Fatal(err)
	}
	check := func(end time.Time) {
		t.Helper()
		keys, vals := ledger(t, path)
		if len(keys) != 1 {
			t.Fatalf("ledger has %d entries, want 1 (job %d): %x", len(keys), ended.ID, keys)
		}
		want := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(end.UnixNano())), uint64(ended.ID))
		if !slices.Equal(keys[0], want) {
			t.Errorf("key %x, want %x", keys[0], want)
		}
		var u job.Use
		if err := json.Unmarshal(vals[0], &u); err != nil {
			t.Fatalf("value %s: %v", vals[0], err)
		}
		if u.User != "e" || !u.Started.Equal(start) || !u.Ended.Equal(end) || u.Share != 0.25 {
			t.Errorf("value %s", vals[0])
		}
	}
	check(end)
	end2 := end.Add(time.Hour)
	if _, err := s.Update(ended.ID, func(j *job.Job) error { j.EndedAt = end2; return nil }); err != nil {
		t.Fatal(err)
	}
	check(end2)
	if _, err := s.Update(2, func(j *job.Job) error { j.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	check(end2)
}

// A file of schema 2 (no ledger) answers Uses from its job records while
// it is only read, and is migrated to 3 by the first write, which builds
// the ledger from every record; Uses then reads the ledger alone.
func TestMigrateFromSchema2(t *testing.T) {
	s, path := openTemp(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	gpus := func(n int) job.Placement {
		p := job.Placement{Host: "h"}
		for i := range n {
			p.GPUs, p.Indexes = append(p.GPUs, fmt.Sprintf("GPU-%d", i)), append(p.Indexes, i)
		}
		return p
	}
	half := gpus(1)
	half.Share = 0.5
	for _, j := range []job.Job{
		{User: "queued"}, // 1
		{User: "running", State: job.Running, Placement: gpus(1), StartedAt: t0},                                // 2
		{User: "late", State: job.Succeeded, Placement: gpus(2), StartedAt: t0, EndedAt: t0.Add(2 * time.Hour)}, // 3
		{User: "early", State: job.Failed, Placement: half, StartedAt: t0, EndedAt: t0.Add(time.Hour)},          // 4
		{User: "never", State: job.Cancelled, EndedAt: t0},                                                      // 5
	} {
		if _, err := s.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	// One record as a schema-2 gssh wrote it, straight into jobs/.
	old, _ := json.Marshal(job.Job{ID: 6, User: "old", State: job.Timeout, Placement: gpus(4), StartedAt: t0.Add(time.Hour), EndedAt: t0.Add(3 * time.Hour)})
	putRecord(t, path, 6, old)
	setMeta(t, path, "job_seq", binary.BigEndian.AppendUint64(nil, 6))
	downgrade(t, path, 2)
	if keys, _ := ledger(t, path); len(keys) != 0 {
		t.Fatalf("schema-2 file with %d ledger entries", len(keys))
	}
	all := []job.Use{
		{User: "early", Started: t0, Ended: t0.Add(time.Hour), Share: 0.5},
		{User: "late", Started: t0, Ended: t0.Add(2 * time.Hour), Share: 2},
		{User: "old", Started: t0.Add(time.Hour), Ended: t0.Add(3 * time.Hour), Share: 4},
	}

	r, err := state.Open(path, state.Options{NoCreate: true})
	if err != nil {
		t.Fatalf("open of schema 2: %v", err)
	}
	for _, tc := range []struct {
		since time.Time
		want  []job.Use
	}{{time.Time{}, all}, {t0.Add(time.Hour), all}, {t0.Add(90 * time.Minute), all[1:]}, {t0.Add(3*time.Hour + 1), nil}} {
		got, err := r.Uses(tc.since)
		if err != nil {
			t.Fatalf("Uses of schema 2: %v", err)
		}
		storetest.SameUses(t, fmt.Sprintf("Uses(%v) of schema 2", tc.since), got, tc.want)
	}
	if v := schemaOf(t, path); v != 2 {
		t.Fatalf("after reads: schema %d, want 2 (reads do not migrate)", v)
	}

	if _, err := r.Update(1, func(x *job.Job) error { x.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after a write: schema %d, want 6", v)
	}
	if keys, _ := ledger(t, path); len(keys) != len(all) {
		t.Errorf("migrated ledger has %d entries, want %d", len(keys), len(all))
	}
	// Spoil every job record: Uses of schema 3 reads only the ledger.
	for id := range job.ID(6) {
		putRecord(t, path, id+1, []byte("{bad"))
	}
	got, err := r.Uses(time.Time{})
	if err != nil {
		t.Fatalf("Uses after the migration: %v", err)
	}
	storetest.SameUses(t, "Uses after the migration", got, all)
	got, err = r.Uses(t0.Add(90 * time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameUses(t, "Uses(since) after the migration", got, all[1:])
}

// A file of schema 1 (before attempts were counted) is read as it is, its
// records as attempt 0, and migrated to 3 by the first write (with the
// ledger built).
func TestMigrateFromSchema1(t *testing.T) {
	s, path := openTemp(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.Submit(job.Job{User: "a", State: job.Running, Placement: job.Placement{Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(job.Job{User: "b", State: job.Succeeded, Placement: job.Placement{Host: "h", GPUs: []string{"GPU-0"}}, StartedAt: t0, EndedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	downgrade(t, path, 1)
	want := []job.Use{{User: "b", Started: t0, Ended: t0.Add(time.Hour), Share: 1}}
	r, err := state.Open(path, state.Options{NoCreate: true})
	if err != nil {
		t.Fatalf("read-only open of schema 1: %v", err)
	}
	js, err := r.List(state.Filter{})
	if err != nil || len(js) != 2 || js[0].Attempt != 0 || schemaOf(t, path) != 1 {
		t.Fatalf("read: %+v %v, version %d", js, err, schemaOf(t, path))
	}
	got, err := r.Uses(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameUses(t, "Uses of schema 1", got, want)
	if _, err := r.Update(js[0].ID, func(x *job.Job) error { x.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after a write: schema %d, want 6", v)
	}
	if keys, _ := ledger(t, path); len(keys) != 1 {
		t.Errorf("migrated ledger has %d entries, want 1", len(keys))
	}
	got, err = r.Uses(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameUses(t, "Uses after the migration", got, want)
}

// A record that cannot be decoded does not stop the migration (it has no
// use to read; failing would refuse every write); Uses of the old file
// reports it like List, with the others.
func TestMigrateBadRecord(t *testing.T) {
	s, path := openTemp(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for range 3 {
		if _, err := s.Submit(job.Job{User: "a", State: job.Succeeded, Placement: job.Placement{GPUs: []string{"g"}}, StartedAt: t0, EndedAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	putRecord(t, path, 2, []byte("{bad"))
	downgrade(t, path, 2)
	got, err := s.Uses(time.Time{})
	if !errors.Is(err, state.ErrBadRecord) || !strings.Contains(err.Error(), "job 2") || len(got) != 2 {
		t.Errorf("Uses of schema 2 with a bad record = %d uses, %v; want 2 and ErrBadRecord naming job 2", len(got), err)
	}
	if _, err := s.Submit(job.Job{User: "b"}); err != nil {
		t.Fatalf("write (migration) with a bad record: %v", err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after a write: schema %d, want 6", v)
	}
	got, err = s.Uses(time.Time{})
	if err != nil || len(got) != 2 {
		t.Errorf("Uses after the migration = %d uses, %v; want 2", len(got), err)
	}
}

// A ledger entry that cannot be decoded is reported like a bad record,
// with the other uses.
func TestBadLedgerEntry(t *testing.T) {
	s, path := openTemp(t)
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		if _, err := s.Submit(job.Job{User: "a", State: job.Succeeded, Placement: job.Placement{GPUs: []string{"g"}}, StartedAt: t0, EndedAt: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := ledger(t, path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("usage")).Put(keys[1], []byte("{bad")) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Uses(time.Time{})
	if !errors.Is(err, state.ErrBadRecord) || !strings.Contains(err.Error(), "job 2") || len(got) != 2 {
		t.Errorf("Uses = %d uses, %v; want 2 and ErrBadRecord naming job 2", len(got), err)
	}
}

// Ends a usage key cannot hold (before 1970, after 2262) are clamped in
// the key, and since still filters them exactly.
func TestUsesOutOfRange(t *testing.T) {
	ends := []time.Time{
		time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1965, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	b, _ := openTemp(t)
	for name, s := range map[string]state.Store{"Bolt": b, "Mem": state.NewMem()} {
		t.Run(name, func(t *testing.T) {
			for _, e := range ends {
				if _, err := s.Submit(job.Job{User: e.Format("2006"), State: job.Succeeded, Placement: job.Placement{GPUs: []string{"g"}}, StartedAt: e, EndedAt: e}); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				since time.Time
				want  []string
			}{
				{time.Time{}, []string{"1960", "1965", "2024", "2300", "2400"}},
				{time.Date(1962, 1, 1, 0, 0, 0, 0, time.UTC), []string{"1965", "2024", "2300", "2400"}},
				{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), []string{"2024", "2300", "2400"}},
				{time.Date(2350, 1, 1, 0, 0, 0, 0, time.UTC), []string{"2400"}},
				{time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC), nil},
			} {
				us, err := s.Uses(tc.since)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, u := range us {
					got = append(got, u.User)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("Uses(%v) = %v, want %v", tc.since, got, tc.want)
				}
			}
		})
	}
}

// BenchmarkUses: 10k ended jobs in the ledger (one a minute), Uses over
// the last 10 % of them and over all; for comparison, the same over the
// job records of a schema-2 file (no ledger).
func BenchmarkUses(b *testing.B) {
	const n = 10000
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := b.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := state.Open(path, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		jobs := tx.Bucket([]byte("jobs"))
		for i := range n {
			id := job.ID(i + 1)
			end := t0.Add(time.Duration(i) * time.Minute)
			data, err := json.Marshal(job.Job{ID: id, User: fmt.Sprintf("user%d", i%20), State: job.Succeeded,
				Spec:      job.Spec{Argv: []string{"python", "train.py", "--epochs", "100"}, Host: "auto", GPUs: 2, Workdir: "/home/u/x", Priority: 5},
				Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"}, Indexes: []int{0, 1}, Share: 2},
				Remote:    job.Remote{Dir: "/home/u/.gssh/jobs/x-1.1", PID: 1234, StartTicks: 5678}, Attempt: 1,
				SubmittedAt: end.Add(-2 * time.Hour), StartedAt: end.Add(-time.Hour), EndedAt: end})
			if err != nil {
				return err
			}
			if err := jobs.Put(binary.BigEndian.AppendUint64(nil, uint64(id)), data); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("job_seq"), binary.BigEndian.AppendUint64(nil, n))
	})
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	downgrade(b, path, 2)
	old := filepath.Join(dir, "schema2.db")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(old, data, 0o600); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Update(1, func(j *job.Job) error { return nil }); err != nil { // migrates: builds the ledger
		b.Fatal(err)
	}
	if keys, _ := ledger(b, path); len(keys) != n {
		b.Fatalf("ledger has %d entries, want %d", len(keys), n)
	}
	s2, err := state.Open(old, state.Options{NoCreate: true})
	if err != nil {
		b.Fatal(err)
	}
	last10 := t0.Add(time.Duration(n-n/10) * time.Minute)
	for _, bc := range []struct {
		name  string
		s     *state.Bolt
		since time.Time
		want  int
	}{
		{"ledger/last10pct", s, last10, n / 10},
		{"ledger/all", s, time.Time{}, n},
		{"schema2-records/last10pct", s2, last10, n / 10},
		{"schema2-records/all", s2, time.Time{}, n},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				us, err := bc.s.Uses(bc.since)
				if err != nil || len(us) != bc.want {
					b.Fatalf("Uses = %d, %v; want %d", len(us), err, bc.want)
				}
			}
		})
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

// A write that fails for a full disk is a *FileError (exit 3) saying so
// and what to do, the job is not stored, and the file stays readable.
func TestDiskFull(t *testing.T) {
	testenv.NeedRoot(t, "the test mounts a small tmpfs")
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
		if !errors.As(err, &fe) || fe.Op != "write" || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, state.ErrDiskFull) {
			t.Fatalf("submit %d: %v, want a write *FileError for ENOSPC", i, err)
		}
		want := "write state " + path + ": no space left on device (the disk holding it is full): the change was not stored, and the file holds what it held before; free space on the filesystem of " + dir + " (df -h " + dir + " shows it) and run the command again"
		if err.Error() != want {
			t.Errorf("submit %d: %q, want %q", i, err, want)
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

// BenchmarkSubmitArray is `gssh submit --array 0-9999`: 10,000 tasks in
// one transaction.
func BenchmarkSubmitArray(b *testing.B) {
	tasks := make([]job.Job, 10000)
	for i := range tasks {
		tasks[i] = job.Job{User: "u", Spec: job.Spec{Argv: []string{"python", "train.py", "--seed", "$GSSH_ARRAY_TASK_ID"}, Host: "auto", GPUs: 1, Workdir: "/home/u/x", Priority: 5}}
	}
	s, err := state.Open(filepath.Join(b.TempDir(), "state.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, err := s.SubmitAll(tasks, func(first job.ID, js []job.Job) {
			for i := range js {
				js[i].Spec.Array = &job.ArrayTask{Job: first, Task: i, Tasks: len(js)}
			}
		})
		if err != nil || len(got) != len(tasks) {
			b.Fatal(err)
		}
	}
}
