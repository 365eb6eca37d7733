package state_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

var h0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// endedJob is a job of user that ran an hour to end (hours after h0) on
// gpu01 as its attempt 1, as a pass records one.
func endedJob(user string, end float64) job.Job {
	e := h0.Add(time.Duration(end * float64(time.Hour)))
	return job.Job{User: user, State: job.Succeeded,
		Spec:      job.Spec{Argv: []string{"python", "train.py", "--epochs", "100"}, Host: "auto", GPUs: 2, Workdir: "/home/u/x", Priority: 5},
		Placement: job.Placement{Host: "gpu01", GPUs: []string{"GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"}, Indexes: []int{0, 1}, Share: 2},
		Remote:    job.Remote{Dir: "/home/u/.gssh/jobs/x-1.1", PID: 1234, StartTicks: 5678}, Attempt: 1, AttemptHosts: []string{"gpu01"},
		SubmittedAt: e.Add(-2 * time.Hour), StartedAt: e.Add(-time.Hour), EndedAt: e}
}

// bucketKeys are the job ids (the last 8 bytes of each key) of bucket
// name in the file at path, in key order; nil when there is no bucket.
func bucketKeys(t testing.TB, path, name string) []job.ID {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []job.ID
	db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(name))
		if b == nil {
			return nil
		}
		out = []job.ID{}
		return b.ForEach(func(k, _ []byte) error {
			out = append(out, job.ID(binary.BigEndian.Uint64(k[len(k)-8:])))
			return nil
		})
	})
	return out
}

// The buckets are as documented: ended/ and jobdirs/ index the ended jobs
// by end, Trim moves records from jobs/ to history/ (their jobdirs/
// entries stay until MarkHousekept) and sets history_until.
func TestHistoryLayout(t *testing.T) {
	s, path := openTemp(t)
	late, _ := s.Submit(endedJob("a", 2))                   // 1
	if _, err := s.Submit(job.Job{User: "q"}); err != nil { // 2: queued
		t.Fatal(err)
	}
	early, _ := s.Submit(endedJob("b", 1)) // 3
	for name, want := range map[string][]job.ID{"jobs": {1, 2, 3}, "ended": {3, 1}, "jobdirs": {3, 1}, "history": {}, "active": {2}} {
		if got := bucketKeys(t, path, name); !slices.Equal(got, want) {
			t.Errorf("%s/ = %v, want %v", name, got, want)
		}
	}
	got, err := s.Trim(state.TrimBefore{Jobs: h0.Add(90 * time.Minute)})
	if err != nil || got.Moved != 1 {
		t.Fatalf("Trim = %+v %v", got, err)
	}
	for name, want := range map[string][]job.ID{"jobs": {1, 2}, "ended": {1}, "jobdirs": {3, 1}, "history": {3}} {
		if got := bucketKeys(t, path, name); !slices.Equal(got, want) {
			t.Errorf("after Trim: %s/ = %v, want %v", name, got, want)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var until []byte
	db.View(func(tx *bolt.Tx) error {
		until = slices.Clone(tx.Bucket([]byte("meta")).Get([]byte("history_until")))
		return nil
	})
	db.Close()
	if len(until) != 8 || int64(binary.BigEndian.Uint64(until)) != early.EndedAt.UnixNano() {
		t.Errorf("history_until = %x, want job 3's end %d", until, early.EndedAt.UnixNano())
	}
	if _, err := s.MarkHousekept(map[job.ID]job.Housekept{early.ID: {At: h0}, late.ID: {At: h0}}); err != nil {
		t.Fatal(err)
	}
	if got := bucketKeys(t, path, "jobdirs"); len(got) != 0 {
		t.Errorf("jobdirs/ after the marks = %v, want none", got)
	}
}

// A file of schema 4 reads as it is (List with Since scans its records;
// nothing is due for housekeeping), and its first write migrates it:
// ended/ and jobdirs/ are built from the records.
func TestMigrateFromSchema4(t *testing.T) {
	s, path := openTemp(t)
	s.Submit(endedJob("a", 1))                                                         // 1
	run, _ := s.Submit(job.Job{User: "r", State: job.Running, StartedAt: h0})          // 2
	s.Submit(job.Job{User: "c", State: job.Cancelled, EndedAt: h0.Add(3 * time.Hour)}) // 3: never launched
	downgrade(t, path, 4)
	if got, err := s.List(state.Filter{Since: h0.Add(2 * time.Hour)}); err != nil || !slices.Equal(ids(got), []job.ID{2, 3}) {
		t.Errorf("List since +2h of schema 4 = %v %v, want [2 3]", ids(got), err)
	}
	if due, err := s.DirsDue(h0.Add(9*time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("DirsDue of schema 4 = %v %v, want none (until it is migrated)", ids(due), err)
	}
	if v := schemaOf(t, path); v != 4 {
		t.Fatalf("read: schema %d", v)
	}
	if _, err := s.Update(run.ID, func(x *job.Job) error { x.Reason = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := schemaOf(t, path); v != 6 {
		t.Errorf("after a write: schema %d, want 6", v)
	}
	for name, want := range map[string][]job.ID{"ended": {1, 3}, "jobdirs": {1}, "history": {}} {
		if got := bucketKeys(t, path, name); !slices.Equal(got, want) {
			t.Errorf("migrated %s/ = %v, want %v", name, got, want)
		}
	}
	if got, err := s.Trim(state.TrimBefore{Jobs: h0.Add(9 * time.Hour)}); err != nil || got.Moved != 2 {
		t.Errorf("Trim of the migrated file = %+v %v, want 2 moved", got, err)
	}
}

func ids(js []job.Job) []job.ID {
	out := []job.ID{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// A backlog larger than one Trim takes (TrimBatch × MaxTrimBatches) is
// moved over several calls, each saying whether more is left; the
// ledger's uses go too, in the same batches.
func TestTrimBacklog(t *testing.T) {
	state.SetTrimBatches(t, 10, 3)
	s, _ := openTemp(t)
	const n = 45
	jobs := make([]job.Job, n)
	for i := range jobs {
		jobs[i] = endedJob("u", float64(i)/3600)
	}
	if _, err := s.SubmitAll(jobs, nil); err != nil {
		t.Fatal(err)
	}
	cut := state.TrimBefore{Jobs: h0.Add(24 * time.Hour), Uses: h0.Add(24 * time.Hour)}
	var got []state.Trimmed
	for more := true; more && len(got) < 10; {
		tr, err := s.Trim(cut)
		if err != nil {
			t.Fatal(err)
		}
		got, more = append(got, tr), tr.More
	}
	// 30 records a call: 45 moves, then 45 prunes.
	want := []state.Trimmed{{Moved: 30, More: true}, {Moved: 15, Pruned: 15, More: true}, {Pruned: 30}}
	if !slices.Equal(got, want) {
		t.Errorf("Trims = %+v, want %+v", got, want)
	}
	if got, err := s.List(state.Filter{Limit: 2}); err != nil || !slices.Equal(ids(got), []job.ID{n - 1, n}) {
		t.Errorf("List newest 2 = %v %v", ids(got), err)
	}
}

// BenchmarkPassReads measures what a pass reads of the state file (its
// active jobs, the ledger since the fair-share horizon, the host records,
// the jobs due for housekeeping) and what gssh ps reads, on a queue with
// 100,000 ended jobs of the last 100 days and 20 active ones: before
// housekeeping (every record in jobs/, every use in the ledger) and
// after it (keep_jobs 90d: their records in history/; the ledger pruned
// to the default 20-day horizon).
//
//	go test -run '^$' -bench PassReads -benchtime 200x ./state/
func BenchmarkPassReads(b *testing.B) {
	const ended, active = 100_000, 20
	now := h0.Add(100 * 24 * time.Hour)
	tmpl := filepath.Join(b.TempDir(), "template.db")
	s, err := state.Open(tmpl, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	jobs := make([]job.Job, 0, ended+active)
	for i := range ended {
		j := endedJob(fmt.Sprintf("user%d", i%20), float64(i)*100*24/ended) // spread over 100 days
		j.Housekept = &job.Housekept{At: j.EndedAt, Removed: 1}             // their directories gone long ago
		jobs = append(jobs, j)
	}
	for range active {
		jobs = append(jobs, job.Job{User: "u", State: job.Running, Spec: jobs[0].Spec, Placement: jobs[0].Placement, StartedAt: now.Add(-time.Hour)})
	}
	if _, err := s.SubmitAll(jobs, nil); err != nil {
		b.Fatal(err)
	}
	copyFile := func(dst string) {
		in, err := os.Open(tmpl)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		out.Close()
	}
	dir := b.TempDir()
	before, after := filepath.Join(dir, "before.db"), filepath.Join(dir, "after.db")
	copyFile(before)
	copyFile(after)
	sa, err := state.Open(after, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var total state.Trimmed
	for more := true; more; {
		got, err := sa.Trim(state.TrimBefore{Jobs: now.Add(-90 * 24 * time.Hour), Uses: now.Add(-20 * 24 * time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		total.Moved, total.Pruned, more = total.Moved+got.Moved, total.Pruned+got.Pruned, got.More
	}
	b.Logf("housekeeping: %d records moved, %d uses pruned in %s", total.Moved, total.Pruned, time.Since(start).Round(time.Millisecond))
	for _, f := range []struct {
		name string
		path string
	}{{"before", before}, {"after", after}} {
		st, err := state.Open(f.path, state.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(f.name+"/pass", func(b *testing.B) { // what every pass reads
			for b.Loop() {
				if act, err := st.Active(); err != nil || len(act) != active {
					b.Fatal(len(act), err)
				}
				if _, err := st.Hosts(); err != nil {
					b.Fatal(err)
				}
				if _, err := st.DirsDue(now.Add(-14*24*time.Hour), 1000); err != nil {
					b.Fatal(err)
				}
				if f.name == "before" {
					continue // no housekeeping then
				}
				if got, err := st.Trim(state.TrimBefore{Jobs: now.Add(-90 * 24 * time.Hour), Uses: now.Add(-20 * 24 * time.Hour)}); err != nil || got != (state.Trimmed{}) {
					b.Fatal(got, err) // nothing left to do: only the look
				}
			}
		})
		b.Run(f.name+"/fairshare", func(b *testing.B) { // a pass with a queued job: the uses of the last 20 days
			for b.Loop() {
				if us, err := st.Uses(now.Add(-20 * 24 * time.Hour)); err != nil || len(us) != ended/5 {
					b.Fatal(len(us), err)
				}
			}
		})
		b.Run(f.name+"/ps", func(b *testing.B) { // gssh ps: the active jobs
			for b.Loop() {
				if _, err := st.List(state.Filter{States: []job.State{job.Queued, job.Running}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(f.name+"/ps-a-since-1d", func(b *testing.B) {
			for b.Loop() {
				if _, err := st.List(state.Filter{Since: now.Add(-24 * time.Hour)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(f.name+"/ps-a", func(b *testing.B) { // every job ever
			for b.Loop() {
				if got, err := st.List(state.Filter{}); err != nil || len(got) != ended+active {
					b.Fatal(len(got), err)
				}
			}
		})
		b.Run(f.name+"/show-oldest", func(b *testing.B) {
			for b.Loop() {
				if _, err := st.Get(1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// gssh state check of a housekept file finds nothing wrong (the history's
// records count, the pruned ledger entries are not missed), and finds a
// job left out of ended/ or jobdirs/, or an entry there of no such job.
func TestCheckHousekept(t *testing.T) {
	s, path := openTemp(t)
	for _, end := range []float64{1, 2, 3} { // jobs 1-3
		if _, err := s.Submit(endedJob("u", end)); err != nil {
			t.Fatal(err)
		}
	}
	run := endedJob("r", 0) // 4: runs, after a first run that ended at +0.5h
	run.State, run.EndedAt = job.Running, time.Time{}
	run.Runs = []job.Use{{User: "r", Started: h0, Ended: h0.Add(30 * time.Minute), Share: 1}}
	if _, err := s.Submit(run); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Trim(state.TrimBefore{Jobs: h0.Add(150 * time.Minute), Uses: h0.Add(90 * time.Minute)}); err != nil || got.Moved != 2 || got.Pruned != 2 {
		t.Fatalf("Trim = %+v %v", got, err)
	}
	if _, err := s.MarkHousekept(map[job.ID]job.Housekept{1: {At: h0, Removed: 1}}); err != nil {
		t.Fatal(err)
	}
	r, err := state.Check(path, state.Options{})
	if err != nil || len(r.Problems) != 0 || r.Jobs != 4 || r.MaxID != 4 || r.Active != 1 {
		t.Fatalf("Check = %+v %v, want no problems, 4 jobs", r, err)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		ended := tx.Bucket([]byte("ended"))
		k, _ := ended.Cursor().First() // job 3's
		if err := ended.Delete(slices.Clone(k)); err != nil {
			return err
		}
		return tx.Bucket([]byte("jobdirs")).Put(append(make([]byte, 8), binary.BigEndian.AppendUint64(nil, 4)...), []byte{})
	})
	r, err = state.Check(path, state.Options{})
	want := []string{
		"job 3 has ended but is not in the index of ended jobs (ended/): it would never move to the history",
		"jobdirs: job 4 is in the housekeeping index (jobdirs/) but has no directories due for removal",
	}
	if err != nil || !slices.Equal(r.Problems, want) {
		t.Errorf("Check of a spoiled file = %q %v, want %q", r.Problems, err, want)
	}
}
