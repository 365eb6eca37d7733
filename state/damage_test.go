package state_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Damaged state files: bytes of a real state file flipped at random
// offsets, then every read and write path of the store, backup, check and
// restore run on it. None may panic or fault; each failure is a
// *FileError (or one of the store's own errors for what it could read);
// and once an operation found the file damaged, no write of that store
// changes a byte of it.

// damageSeed is a real state file (the bytes), made once: jobs queued,
// running and ended (with usage entries and earlier runs), some moved to
// the history, host and drain records.
var damageSeed = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "gssh-damage-seed-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	s, err := state.Open(path, state.Options{})
	if err != nil {
		return nil, err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var jobs []job.Job
	for i := range 60 {
		jobs = append(jobs, job.Job{User: []string{"ann", "bob", "cy"}[i%3], SubmittedAt: t0.Add(time.Duration(i) * time.Minute),
			Spec: job.Spec{Argv: []string{"python", "train.py", "--seed", strings.Repeat("s", i*7)}, Host: "auto", GPUs: 1, Workdir: "/home/u/x", Name: "job"}})
	}
	got, err := s.SubmitAll(jobs, nil)
	if err != nil {
		return nil, err
	}
	for i, j := range got {
		var fn func(*job.Job) error
		switch i % 4 {
		case 0: // stays queued
			continue
		case 1:
			fn = func(x *job.Job) error {
				x.State, x.Attempt, x.AttemptHosts = job.Running, 1, []string{"h1"}
				x.Placement = job.Placement{Host: "h1", GPUs: []string{"GPU-0"}, Indexes: []int{0}}
				x.StartedAt = t0.Add(time.Hour)
				return nil
			}
		default:
			fn = func(x *job.Job) error {
				x.State, x.Attempt, x.AttemptHosts = job.Succeeded, 1, []string{"h2"}
				x.Placement = job.Placement{Host: "h2", GPUs: []string{"GPU-1"}, Indexes: []int{1}}
				x.Remote = job.Remote{Dir: "/home/u/.gssh/jobs/c-1.1", PID: 10}
				x.StartedAt, x.EndedAt = t0.Add(time.Duration(i)*time.Minute), t0.Add(time.Duration(i+30)*time.Minute)
				return nil
			}
		}
		if _, err := s.Update(j.ID, fn); err != nil {
			return nil, err
		}
	}
	if _, err := s.Trim(state.TrimBefore{Jobs: t0.Add(40 * time.Minute)}); err != nil {
		return nil, err
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		if _, err := s.UpdateHost(h, func(x *health.Host) error { x.Failures, x.LastError = 2, "no route to "+h; return nil }); err != nil {
			return nil, err
		}
	}
	if _, err := s.UpdateDrains(func(m map[string]sched.Drain) error {
		m["h3"] = sched.Drain{By: "root", At: t0, From: t0, Reason: "driver upgrade"}
		return nil
	}); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// flipBytes is seed with each 4-byte group of flips applied: a 3-byte
// offset (modulo the length) and a byte to XOR there (0 taken as 0xFF).
func flipBytes(seed, flips []byte) []byte {
	b := bytes.Clone(seed)
	for ; len(flips) >= 4; flips = flips[4:] {
		off := int(uint32(flips[0])|uint32(flips[1])<<8|uint32(flips[2])<<16) % len(b)
		x := flips[3]
		if x == 0 {
			x = 0xFF
		}
		b[off] ^= x
	}
	return b
}

// randomFlips are n flips of random bits at random offsets.
func randomFlips(r *rand.Rand, n int) []byte {
	var out []byte
	for range n {
		off := r.Uint32()
		out = binary.LittleEndian.AppendUint32(out, off&0xFFFFFF|uint32(1)<<(24+r.IntN(8)))
	}
	return out
}

// memTempDir is a temporary directory in memory (/dev/shm) where there
// is one, else t.TempDir(): the writes' fsyncs are most of the test's
// time on a disk.
func memTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "gssh-damage-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// found is what runDamaged saw of a damaged file.
type found struct {
	damaged  bool // an operation failed with ErrDamaged
	problems bool // Check reported problems
}

// runDamaged runs every path of the store on the damaged file data.
func runDamaged(t *testing.T, data []byte) (f found) {
	dir := memTempDir(t)
	path := filepath.Join(dir, "state.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Whatever fails must be the file's error or the store's own.
	allowed := func(what string, err error) {
		t.Helper()
		var fe *state.FileError
		if err == nil || errors.As(err, &fe) || errors.Is(err, state.ErrBadRecord) || errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrTerminal) {
			return
		}
		// What an Update's record check and decoding say of a record.
		if strings.Contains(err.Error(), "decode") || strings.Contains(err.Error(), "job ") {
			return
		}
		t.Errorf("%s: %v (%T), want a *state.FileError or the store's own error", what, err, err)
	}

	rep, err := state.Check(path, state.Options{Timeout: time.Second})
	allowed("Check", err)
	f.problems = len(rep.Problems) > 0

	s, err := state.Open(path, state.Options{Timeout: time.Second, NoCreate: true})
	allowed("Open", err)
	if err != nil {
		f.damaged = errors.Is(err, state.ErrDamaged)
		return f
	}
	damaged := false
	var frozen []byte // the file when damage was first found
	note := func(what string, err error) {
		t.Helper()
		allowed(what, err)
		if errors.Is(err, state.ErrDamaged) && !damaged {
			damaged = true
			frozen, _ = os.ReadFile(path)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reads := func() {
		_, err := s.Active()
		note("Active", err)
		_, err = s.List(state.Filter{})
		note("List", err)
		_, err = s.List(state.Filter{Since: t0.Add(10 * time.Minute)})
		note("List since", err)
		_, err = s.List(state.Filter{States: []job.State{job.Queued}, Limit: 3})
		note("List active", err)
		_, err = s.Uses(t0)
		note("Uses", err)
		for _, id := range []job.ID{1, 2, 3, 30, 59, 60} {
			_, err = s.Get(id)
			note("Get", err)
		}
		_, err = s.Hosts()
		note("Hosts", err)
		_, err = s.Drains()
		note("Drains", err)
		_, err = s.DirsDue(t0.Add(24*time.Hour), 10)
		note("DirsDue", err)
		_, err = s.Backup(filepath.Join(dir, "backup.db"))
		note("Backup", err)
	}
	writes := func() {
		_, err := s.Submit(job.Job{User: "dee", Spec: job.Spec{Argv: []string{"true"}, Host: "auto", GPUs: 1}})
		note("Submit", err)
		for _, id := range []job.ID{1, 2, 3, 58, 59} {
			_, err = s.Update(id, func(x *job.Job) error { x.Reason = "damage test"; return nil })
			note("Update", err)
		}
		_, err = s.UpdateHost("h1", func(x *health.Host) error { x.Failures++; return nil })
		note("UpdateHost", err)
		_, err = s.UpdateDrains(func(m map[string]sched.Drain) error { delete(m, "h3"); return nil })
		note("UpdateDrains", err)
		_, err = s.MarkHousekept(map[job.ID]job.Housekept{3: {At: t0.Add(48 * time.Hour)}})
		note("MarkHousekept", err)
		_, err = s.Trim(state.TrimBefore{Jobs: t0.Add(50 * time.Minute), Uses: t0.Add(20 * time.Minute)})
		note("Trim", err)
	}
	reads()
	writes()
	reads()
	if damaged {
		if now, _ := os.ReadFile(path); !bytes.Equal(now, frozen) {
			t.Errorf("the store wrote to the file after a read found it damaged")
		}
	}
	// Check again (after writes), then restore the damaged file from a
	// good backup: the live file, damaged, is put aside.
	_, err = state.Check(path, state.Options{Timeout: time.Second})
	allowed("Check after", err)
	good := filepath.Join(dir, "good.db")
	seed, _ := damageSeed()
	if err := os.WriteFile(good, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = state.Restore(good, path, 0, state.Options{Timeout: time.Second})
	allowed("Restore over", err)
	// And restoring the damaged file (as a backup) elsewhere.
	_, err = state.Restore(filepath.Join(dir, "before.db"), filepath.Join(dir, "other.db"), 0, state.Options{Timeout: time.Second})
	_ = err // a missing backup: refused
	if err := os.WriteFile(filepath.Join(dir, "damaged-copy.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = state.Restore(filepath.Join(dir, "damaged-copy.db"), filepath.Join(dir, "other.db"), 0, state.Options{Timeout: time.Second})
	allowed("Restore of damaged", err)
	f.damaged = f.damaged || damaged
	return f
}

// TestDamagedState runs every path on a few hundred damaged copies of a
// real state file (60 with -race or -short), each with 1 to 8 bits
// flipped, from a fixed seed: the same files every run.
func TestDamagedState(t *testing.T) {
	seed, err := damageSeed()
	if err != nil {
		t.Fatal(err)
	}
	n := 300
	if testing.Short() || raceBuild { // 8 times slower: the fuzz goes further
		n = 60
	}
	r := rand.New(rand.NewPCG(21, 2))
	var damaged, problems int
	for i := range n {
		flips := randomFlips(r, 1+r.IntN(8))
		t.Run("", func(t *testing.T) {
			t.Logf("case %d: flips %x", i, flips)
			f := runDamaged(t, flipBytes(seed, flips))
			damaged += btoi(f.damaged)
			problems += btoi(f.problems)
		})
	}
	// Most flips land on pages in use (the seed has few free ones):
	// the test would be vacuous if none were found.
	t.Logf("%d files: %d found damaged by an operation, %d with problems in Check", n, damaged, problems)
	if damaged < n/100 || problems < n/10 {
		t.Errorf("only %d of %d files were found damaged, %d had problems: the flips miss the pages in use", damaged, n, problems)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzDamagedState is TestDamagedState's search, open-ended (make fuzz).
func FuzzDamagedState(f *testing.F) {
	seed, err := damageSeed()
	if err != nil {
		f.Fatal(err)
	}
	r := rand.New(rand.NewPCG(21, 3))
	for range 16 {
		f.Add(randomFlips(r, 1+r.IntN(4)))
	}
	f.Fuzz(func(t *testing.T, flips []byte) {
		if len(flips) > 64 {
			flips = flips[:64]
		}
		runDamaged(t, flipBytes(seed, flips))
	})
}
