package state

/*
The state file is a bbolt database (go.etcd.io/bbolt), schema version 6:

	meta/                   gssh's own metadata
	  version    -> uint64, big-endian: schema version (6)
	  cluster_id -> 32 lowercase hex characters: 16 random bytes made when
	                the file was created; names worker job dirs
	                (~/.gssh/jobs/<cluster-id>-<job-id>.<attempt>)
	  job_seq    -> uint64, big-endian: the last job id handed out (0 = none)
	  history_until -> uint64, big-endian Unix nanoseconds: every job in
	                history/ ended at or before it (absent: history/ is
	                empty)
	  usage_from -> uint64, big-endian Unix nanoseconds: housekeeping
	                may have pruned the usage/ entries of uses that ended
	                before it (absent: none pruned)
	jobs/                   every job but those moved to history/
	  <id>       -> JSON job.Job; <id> is the job id as a big-endian uint64,
	                so cursor order is submit order
	history/                the records of jobs that ended long ago
	                        (housekeeping's keep_jobs: Trim), moved out of
	                        jobs/ and its indexes, never deleted
	  <id>       -> JSON job.Job, as in jobs/
	ended/                  index of the ended jobs in jobs/, by end
	  <end><id>  -> empty; <end> is EndedOf(job) as in usage/: present iff
	                jobs/<id> has State.Terminal()
	jobdirs/                index of the ended jobs (in jobs/ or history/)
	                        whose worker directories housekeeping has not
	                        dealt with yet, by end
	  <end><id>  -> empty; as in ended/: present iff the record is
	                dirsPending (ended, launched, no Housekept)
	active/                 index of the non-terminal jobs
	  <id>       -> empty; present iff jobs/<id> has !State.Terminal()
	hosts/                  what passes learned of each host
	  <name>     -> JSON health.Host: failed contacts in a row, since when,
	                the last error, down since, stray attempts to kill
	drains/                 what administrators asked of each host (gssh drain)
	  <name>     -> JSON sched.Drain: by whom, when, why, from when the host
	                takes no new jobs; absent: not drained (the inventory's
	                drain: true is apart, in the inventory)
	usage/                  the fair-share usage ledger: one entry per job that
	                        ended after it started (job.Job.Use ok and
	                        State.Terminal()), none for the others
	  <end><id>  -> JSON job.Use of jobs/<id>; <end> is the use's Ended as
	                big-endian uint64 Unix nanoseconds (clamped to
	                1970..2262), <id> as in jobs/, so cursor order is end
	                order (then id) and a Seek to <since> finds every job
	                that ended since then

Rules:
  - Open creates a new file whole: buckets and meta keys are written to a
    temporary file in the same directory, which is then linked into place,
    so no process ever sees a half-made state file. A file of 0 bytes, or
    one shorter than its own metadata says (truncated), is an error
    (ErrDamaged), never a fresh queue: bbolt would otherwise start afresh,
    or crash with SIGBUS on pages past the end.
  - Any change of the layout above bumps schemaVersion, and a file with a
    newer version is refused (ErrNewerSchema) rather than misread. An
    older file is read as it is and migrated by the first write
    transaction (migrate).
  - A job record, its active index entry, its usage entry and its ended/
    and jobdirs/ entries change in the same transaction (putJob); a
    record in history/ has only its jobdirs/ entry (putHistory).
  - The hot reads of a pass (Active, Get, Uses since the fair-share
    horizon, job_seq) and List with a Since after history_until never
    read history/; Trim moves records there in transactions of at most
    TrimBatch records.
  - The file is opened for each operation and closed before the method
    returns: bbolt holds an exclusive flock (shared for reads) from its Open
    to its Close, and no lock may span SSH I/O. Bolt takes that flock
    itself, waiting in the kernel's queue (lock.go); an operation granted
    the lock of a file that a restore renamed away opens the new one.
  - backup.go: Backup copies the file in one read transaction; Check only
    reads; Restore renames a copy over the file under its exclusive lock.

Versions:
  1  the first.
  2  job records count launch attempts (job.Job.Attempt) and each attempt
     has its own worker directory <cluster-id>-<job-id>.<attempt>; a record
     of version 1 has none (attempt 0), and its directory keeps the old
     name <cluster-id>-<job-id>. The bump keeps a gssh of version 1, which
     would launch a job again into the old directory and knows nothing of
     abandoned attempts, off a file that a newer one uses.
  3  usage/ is the ledger of ended jobs' GPU uses (Uses reads it, not the
     job records). The bump keeps a gssh of version 2 off the file: it
     would end jobs without writing their ledger entries, and fair-share
     usage would silently miss them. Migration from 1 or 2 builds the
     ledger from every job record; a read of an older file (which cannot
     migrate) computes Uses from the job records instead.
  4  hosts/ holds health.Host records, and jobs may be `unknown` (their
     host is down) with attempts given up recorded as strays there. The
     bump keeps a gssh of version 3 off the file: it knows no `unknown`
     job, and would give a down host's GPUs away while its jobs may
     still run, and never kill the strays. Nothing to rewrite.
  5  drains/ holds the hosts drained with gssh drain (sched.Drain), and
     housekeeping moves the records of jobs that ended keep_jobs ago from
     jobs/ to history/, prunes usage/ entries older than fair-share can
     count, and indexes the ended jobs by end (ended/, jobdirs/). The
     bump keeps a gssh of version 4 off the file: it knows no drains/,
     and would place jobs on hosts drained for maintenance (and run past
     a maintenance window); it would not find the jobs in history/ (gssh
     show, --after of an old job: "no job N"); and it would end jobs
     without their ended/ and jobdirs/ entries, so they would never move
     to the history nor have their worker directories removed. Migration
     from 4 creates the empty drains/ and history/ and builds ended/ and
     jobdirs/ from every job record.
  6  job records write their durations in seconds (job.Seconds): a spec's
     timeout_s and signal_grace_s, a cancel request's grace_s, where
     records of before had nanoseconds under timeout, signal_grace and
     grace_ns. The bump keeps a gssh of version 5 off the file: it would
     read a new record's walltime and preemption grace as none (run a job
     past its --timeout, kill a preempted one at once). Nothing to
     rewrite: job.Spec and job.CancelRequest read both forms (a read does
     not migrate, and the records of history/ are never rewritten), and a
     record is written in seconds whenever it changes.
*/

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/gssh/gssh/job"
)

// schemaVersion is the version of the bucket tree documented above.
const schemaVersion = 6

// historyVersion is the first schema version whose files have history/,
// ended/ and jobdirs/: reads of an older file (not migrated) do without.
const historyVersion = 5

// ledgerVersion is the first schema version whose files keep the usage
// ledger: Uses of an older file (read, not migrated) reads the job records.
const ledgerVersion = 3

// drainsVersion is the first schema version whose files have drains/: a
// read of an older file (not migrated) finds no host drained.
const drainsVersion = 5

// Bucket and key names (see the comment at the top of this file).
const (
	bucketMeta   = "meta"
	bucketJobs   = "jobs"
	bucketActive = "active"
	bucketHosts  = "hosts"
	bucketUsage  = "usage"
	bucketDrains = "drains" // from schema 5
	// From schema 5 too (historyVersion).
	bucketHistory = "history"
	bucketEnded   = "ended"
	bucketJobDirs = "jobdirs"

	keyVersion      = "version"
	keyClusterID    = "cluster_id"
	keyJobSeq       = "job_seq"
	keyHistoryUntil = "history_until"
	keyUsageFrom    = "usage_from"
)

// DefaultTimeout is how long an operation waits for another process's lock
// on the state file before it gives up with ErrBusy (gssh --state-wait).
// A hundred submitters started at once take turns in a few seconds (see
// lock.go); the wait is long so that they all get theirs.
const DefaultTimeout = 30 * time.Second

// Options tune a Bolt store. The zero value is ready to use.
type Options struct {
	// Timeout is how long each operation waits for the file lock held by
	// another process (or another operation in this one). 0 means
	// DefaultTimeout; negative means try once, do not wait. The wait is
	// the kernel's (a blocking flock: see lock.go).
	Timeout time.Duration
	// Cancel, when closed, ends a wait for the lock at once: the
	// operation changes nothing and returns an error wrapping
	// context.Canceled (pass ctx.Done(): Ctrl-C must not wait out the
	// Timeout).
	Cancel <-chan struct{}
	// Trace, when set, is called after each operation with how long it
	// waited for the lock and held it (gssh's $GSSH_STATE_TRACE). It runs
	// after the file was released and must be safe for concurrent use.
	Trace func(Op)
	// Now is the clock Submit uses for a zero SubmittedAt; nil means time.Now.
	Now func() time.Time
	// NoCreate makes Open fail with ErrNoState instead of creating a
	// missing file (read-only commands: a typo in --state must not look
	// like an empty queue).
	NoCreate bool
	// Shared is set in shared-lab mode: the file is the pass account's,
	// kept at mode 0660 in the lab's directory (see openShared), instead
	// of 0600 in a 0700 directory.
	Shared *Shared
}

// Bolt is the Store kept in a bbolt file. It holds no open file between
// calls: each method opens the file, runs one transaction and closes it.
// It is safe for concurrent use by goroutines and processes.
type Bolt struct {
	path      string
	timeout   time.Duration
	now       func() time.Time
	clusterID string
	shared    *Shared
	onOp      func(Op)        // Options.Trace; nil: none
	cancel    <-chan struct{} // Options.Cancel
	damage    damage          // what an operation found damaged (damage.go): no writes then
}

var _ Store = (*Bolt)(nil)

// Open prepares the state file at path for use and returns the store. A
// missing file is created (mode 0600, in a directory made 0700) with the
// buckets, the schema version and a random cluster id, unless
// opt.NoCreate; an existing file with a looser mode is tightened to 0600.
// With opt.Shared (shared-lab mode) the lab's directory and file are
// checked as openShared says.
//
// Errors are *FileError values naming the file, wrapping: ErrNoState (no
// file, with NoCreate); a *BusyError (errors.Is ErrBusy) when another
// process holds the file past opt.Timeout; ErrDamaged when the file is
// empty or truncated; ErrCorrupt when it is not a gssh state file;
// ErrNewerSchema when a newer gssh wrote it; ErrDiskFull (and the errno)
// when a new file cannot be written for want of space or quota; the OS
// error when it cannot be read or written (a directory, no permission).
func Open(path string, opt Options) (*Bolt, error) {
	if path == "" {
		return nil, errors.New("open state: empty path")
	}
	s := &Bolt{path: path, timeout: opt.Timeout, now: opt.Now, onOp: opt.Trace, cancel: opt.Cancel}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.shared = opt.Shared
	if s.shared != nil {
		if err := s.openShared(opt.NoCreate); err != nil {
			return nil, err
		}
	} else if err := s.openPersonal(opt.NoCreate); err != nil {
		return nil, err
	}
	err := s.view(func(tx *bolt.Tx) error {
		s.clusterID = string(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyClusterID)))
		if _, err := hex.DecodeString(s.clusterID); err != nil || len(s.clusterID) != 32 {
			return s.corrupt("bad cluster id %q", s.clusterID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openPersonal checks the state file of personal mode, creating it
// when it is missing (unless noCreate) and tightening a looser mode to
// 0600.
func (s *Bolt) openPersonal(noCreate bool) error {
	path := s.path
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && noCreate:
		return s.fail("open", fmt.Errorf("%w: no such file (check --state and $GSSH_STATE; gssh submit creates it)", ErrNoState))
	case errors.Is(err, fs.ErrNotExist):
		return s.create()
	case err != nil:
		return s.fail("open", err)
	case fi.IsDir():
		return s.fail("open", errors.New("is a directory: give the state file's path, such as "+filepath.Join(path, "state.db")))
	case !fi.Mode().IsRegular():
		return s.fail("open", errors.New("not a regular file"))
	case fi.Mode().Perm()&0o077 != 0:
		if err := os.Chmod(path, 0o600); err != nil {
			return s.fail("open", fmt.Errorf("it may be read by others (mode %04o) and cannot be made private (%w): a personal state file is its owner's alone; chmod 600 it as its owner, or give your own with --state; to share one queue with a lab, set it up with gssh lab init (docs/lab.md)", fi.Mode().Perm(), err))
		}
	}
	return nil
}

// writeSchema writes a new state's buckets, schema version and cluster
// id into the empty file at path; openFile, when set, is bbolt's
// OpenFile hook.
func (s *Bolt) writeSchema(path string, openFile func(string, int, os.FileMode) (*os.File, error)) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: s.timeout, OpenFile: openFile})
	if err != nil {
		return err
	}
	err = db.Update(s.initSchema)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// create makes a new state file at s.path: the schema is written to a
// temporary file beside it, which is then linked into place. When another
// process created the file meanwhile, its file is kept.
func (s *Bolt) create() error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s.fail("create", err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*.db")
	if err != nil {
		return s.fail("create", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := s.writeSchema(tmp.Name(), nil); err != nil {
		return s.fail("create", err)
	}
	err = os.Link(tmp.Name(), s.path)
	switch {
	case err == nil, errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EXDEV):
		// A filesystem without hard links: rename, unless the file
		// appeared meanwhile.
		if _, serr := os.Stat(s.path); serr == nil {
			return nil
		}
		if err := os.Rename(tmp.Name(), s.path); err != nil {
			return s.fail("create", err)
		}
		return nil
	}
	return s.fail("create", err)
}

// FileError is a failure of the state file itself (it cannot be opened,
// read, written or trusted), as opposed to a job the store does not have:
// `gssh` exits 3 for it. Err wraps ErrBusy, ErrNoState, ErrDamaged,
// ErrCorrupt, ErrNewerSchema, ErrDiskFull (a write or a creation that
// found no space: nothing was stored) or the OS error.
type FileError struct {
	Op   string // "open", "create", "read", "write"
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Op + " state " + e.Path + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// fail wraps err as a *FileError of op on s's file; a full disk or
// quota is told as such (see diskFull).
func (s *Bolt) fail(op string, err error) error {
	if errno, ok := noSpace(err); ok {
		err = &diskFull{op: op, dir: filepath.Dir(s.path), errno: errno, err: err}
	}
	return &FileError{Op: op, Path: s.path, Err: err}
}

// noSpace reports whether err is a full disk (ENOSPC) or quota (EDQUOT),
// and which. bbolt wraps the errors of growing its file (truncate, fsync)
// as text ("file resize error: ..."), so the text is read too.
func noSpace(err error) (syscall.Errno, bool) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, errno) || strings.Contains(err.Error(), errno.Error()) {
			return errno, true
		}
	}
	return 0, false
}

// diskFull is a write (or the creation) of the state file that failed for
// want of space: bbolt writes a transaction's pages, then its meta page,
// and rolls back on the first failure, so the file holds what it held
// before (an Open that must write first, or a commit, alike); a file being
// created is removed.
type diskFull struct {
	op    string // as FileError's
	dir   string // the state file's directory
	errno syscall.Errno
	err   error // as the OS or bbolt gave it
}

func (e *diskFull) Error() string {
	why := "the disk holding it is full"
	if e.errno == syscall.EDQUOT {
		why = "your disk quota there is used up"
	}
	kept := "the change was not stored, and the file holds what it held before"
	if e.op == "create" {
		kept = "no state file was made"
	}
	return fmt.Sprintf("%s (%s): %s; free space on the filesystem of %s (df -h %s shows it) and run the command again", e.errno, why, kept, e.dir, e.dir)
}

// Unwrap makes errors.Is match ErrDiskFull, the errno and what the OS or
// bbolt returned.
func (e *diskFull) Unwrap() []error { return []error{ErrDiskFull, e.errno, e.err} }

// Path returns the state file's path.
func (s *Bolt) Path() string { return s.path }

// ClusterID returns the cluster id read when the store was opened.
func (s *Bolt) ClusterID() (string, error) { return s.clusterID, nil }

// Submit implements Store.
func (s *Bolt) Submit(j job.Job) (job.Job, error) {
	out, err := s.SubmitAll([]job.Job{j}, nil)
	if err != nil {
		return job.Job{}, err
	}
	return out[0], nil
}

// SubmitAll implements Store.
func (s *Bolt) SubmitAll(jobs []job.Job, stamp func(job.ID, []job.Job)) ([]job.Job, error) {
	in := make([]job.Job, len(jobs))
	for i, j := range jobs {
		p, err := prepareSubmit(j, s.now)
		if err != nil {
			return nil, err
		}
		in[i] = p
	}
	var out []job.Job
	err := s.update(func(tx *bolt.Tx) error {
		out = make([]job.Job, 0, len(in))
		meta := tx.Bucket([]byte(bucketMeta))
		seq, err := getUint(meta, keyJobSeq)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		js := slices.Clone(in)
		for i := range js {
			js[i].ID = job.ID(seq + 1 + uint64(i))
		}
		if stamp != nil && len(js) > 0 {
			stamp(js[0].ID, js)
		}
		if err := meta.Put([]byte(keyJobSeq), uint64Bytes(seq+uint64(len(js)))); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		for _, j := range js {
			data, back, err := encode(j)
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			if err := putJob(tx, back, data, indexKeys{}); err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			out = append(out, back)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get implements Store.
func (s *Bolt) Get(id job.ID) (job.Job, error) {
	var out job.Job
	err := s.view(func(tx *bolt.Tx) error {
		data, _ := record(tx, id)
		if data == nil {
			return notFound(id)
		}
		j, err := decode(id, data)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		out = j
		return nil
	})
	return out, err
}

// record is job id's record data, from jobs/ or else history/ (then
// inHistory); nil when there is none.
func record(tx *bolt.Tx, id job.ID) (data []byte, inHistory bool) {
	if data = tx.Bucket([]byte(bucketJobs)).Get(idKey(id)); data != nil {
		return data, false
	}
	if h := tx.Bucket([]byte(bucketHistory)); h != nil {
		if data = h.Get(idKey(id)); data != nil {
			return data, true
		}
	}
	return nil, false
}

// Update implements Store.
func (s *Bolt) Update(id job.ID, fn func(*job.Job) error) (job.Job, error) {
	var out job.Job
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		out, err = updateTx(tx, id, fn)
		return err
	})
	return out, err
}

// updateTx is Update in the caller's write transaction. A record in
// history/ is updated there (it has ended: only its fields change).
func updateTx(tx *bolt.Tx, id job.ID, fn func(*job.Job) error) (job.Job, error) {
	data, inHistory := record(tx, id)
	if data == nil {
		return job.Job{}, notFound(id)
	}
	// The wrapper sees the stored record before fn changes it: the index
	// entries it has are the ones to replace.
	var prev indexKeys
	j, newData, err := applyUpdate(id, data, func(cur *job.Job) error {
		prev = keysOf(*cur)
		return fn(cur)
	})
	if err != nil {
		return job.Job{}, err
	}
	put := putJob
	if inHistory {
		put = putHistory
	}
	if err := put(tx, j, newData, prev); err != nil {
		return job.Job{}, fmt.Errorf("update: %w", err)
	}
	return j, nil
}

// Active implements Store. A record that cannot be read is reported like
// List does, with the others returned.
func (s *Bolt) Active() ([]job.Job, error) {
	var out []job.Job
	var errs []error
	err := s.view(func(tx *bolt.Tx) error {
		jobs := tx.Bucket([]byte(bucketJobs))
		c := tx.Bucket([]byte(bucketActive)).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			j, err := activeJob(jobs, k)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, j)
		}
		return nil
	})
	return readResult("active", out, err, errs)
}

// readResult is what a read that skips the records it cannot decode
// returns: err (the file's own) alone, else out, with an error wrapping
// ErrBadRecord under what that names each record skipped (errs).
func readResult[T any](what string, out []T, err error, errs []error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s: %w: %w", what, ErrBadRecord, errors.Join(errs...))
	}
	return out, nil
}

// List implements Store. It walks jobs/ and history/ together from the
// newest job back and stops at f.Limit; a filter on non-terminal states
// only reads the active index, and one with a Since only the active
// index, ended/ from Since on, and history/ when Since reaches back to
// what it holds (see listSince).
func (s *Bolt) List(f Filter) ([]job.Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	l := &listing{f: f}
	err := s.view(func(tx *bolt.Tx) error {
		jobs := tx.Bucket([]byte(bucketJobs))
		if f.activeOnly() {
			c := tx.Bucket([]byte(bucketActive)).Cursor()
			for k, _ := c.Last(); k != nil && !f.full(len(l.out)); k, _ = c.Prev() {
				l.add(activeJob(jobs, k))
			}
			return nil
		}
		if !f.Since.IsZero() && tx.Bucket([]byte(bucketEnded)) != nil {
			listSince(tx, l)
			return nil
		}
		// Newest first over both buckets: a job moved to history/ may be
		// newer than one still in jobs/ (it ended first).
		a := jobs.Cursor()
		ka, va := a.Last()
		var b *bolt.Cursor
		var kb, vb []byte
		if h := tx.Bucket([]byte(bucketHistory)); h != nil {
			b = h.Cursor()
			kb, vb = b.Last()
		}
		for (ka != nil || kb != nil) && !f.full(len(l.out)) {
			var k, v []byte
			if kb == nil || (ka != nil && bytes.Compare(ka, kb) > 0) {
				k, v = ka, va
				ka, va = a.Prev()
			} else {
				k, v = kb, vb
				kb, vb = b.Prev()
			}
			l.add(recordJob(k, v))
		}
		return nil
	})
	slices.Reverse(l.out)
	return readResult("list", l.out, err, l.errs)
}

// listing gathers what List reads: the jobs that match f, and the
// errors of the records it could not read.
type listing struct {
	f    Filter
	out  []job.Job
	errs []error
}

func (l *listing) add(j job.Job, err error) {
	switch {
	case err != nil:
		l.errs = append(l.errs, err)
	case l.f.match(j):
		l.out = append(l.out, j)
	}
}

// listSince fills l for a filter with a Since, newest first as List's
// walk does (List reverses it): the active jobs, the ended ones in jobs/
// that ended since (ended/ from Since on), and, when history_until is at
// or after Since, the matching records of history/ (all read: jobs that
// ended that long ago are the history's).
func listSince(tx *bolt.Tx, l *listing) {
	f := l.f
	jobs := tx.Bucket([]byte(bucketJobs))
	c := tx.Bucket([]byte(bucketActive)).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		l.add(activeJob(jobs, k))
	}
	c = tx.Bucket([]byte(bucketEnded)).Cursor()
	for k, _ := c.Seek(usageKey(f.Since, 0)); k != nil; k, _ = c.Next() {
		if len(k) != usageKeyLen {
			l.errs = append(l.errs, fmt.Errorf("bad ended key %s", keyText(k)))
			continue
		}
		id := idKey(job.ID(binary.BigEndian.Uint64(k[8:])))
		data := jobs.Get(id)
		if data == nil {
			l.errs = append(l.errs, fmt.Errorf("job %d: in the ended index but not stored", binary.BigEndian.Uint64(k[8:])))
			continue
		}
		l.add(recordJob(id, data))
	}
	if until, err := getUint(tx.Bucket([]byte(bucketMeta)), keyHistoryUntil); err == nil && !time.Unix(0, int64(until)).Before(f.Since) {
		c = tx.Bucket([]byte(bucketHistory)).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			l.add(recordJob(k, v))
		}
	}
	slices.SortFunc(l.out, func(a, b job.Job) int { return cmp.Compare(a.ID, b.ID) })
	if f.Limit > 0 && len(l.out) > f.Limit {
		l.out = l.out[len(l.out)-f.Limit:]
	}
	slices.Reverse(l.out) // List reverses what it is given
}

// Uses implements Store. It seeks the usage ledger to since and reads it
// to the end, never the job records; only a file of a schema before the
// ledger (which a read does not migrate) is answered from its job records.
// An entry (or, in an old file, a record) that cannot be read is reported
// like List does, with the others returned.
func (s *Bolt) Uses(since time.Time) ([]job.Use, error) {
	var out []job.Use
	var errs []error
	err := s.view(func(tx *bolt.Tx) error {
		v, err := getUint(tx.Bucket([]byte(bucketMeta)), keyVersion)
		if err != nil { // checkSchema has read it already
			return s.corrupt("%v", err)
		}
		if v < ledgerVersion {
			var set useSet
			c := tx.Bucket([]byte(bucketJobs)).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				j, err := recordJob(k, v)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				set.add(j, since)
			}
			out = set.sorted()
			return nil
		}
		c := tx.Bucket([]byte(bucketUsage)).Cursor()
		for k, v := c.Seek(usageKey(since, 0)); k != nil; k, v = c.Next() {
			u, err := decodeUse(k, v)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if u.Ended.Before(since) { // only where the key was clamped
				continue
			}
			out = append(out, u)
		}
		return nil
	})
	return readResult("uses", out, err, errs)
}

// view runs fn in a read transaction on a freshly opened file, shared-locked.
func (s *Bolt) view(fn func(*bolt.Tx) error) error { return s.do(false, fn) }

// update runs fn in a write transaction on a freshly opened file.
func (s *Bolt) update(fn func(*bolt.Tx) error) error { return s.do(true, fn) }

// do opens the file, checks the schema and runs fn in one transaction, then
// closes the file (and so releases the lock) before it returns. fn's own
// error comes back as it is; any other (a close, the commit of a write on
// a full disk: ErrDiskFull, the transaction rolled back) is a *FileError.
func (s *Bolt) do(write bool, fn func(*bolt.Tx) error) (err error) {
	var lf lockedFile
	if s.onOp != nil {
		defer func() { s.trace(write, lf, err) }()
	}
	op := "read"
	if write {
		op = "write"
		if err := s.refuseWrite(); err != nil {
			return err
		}
	}
	return s.guard(op, func() (err error) {
		db, err := s.openDB(!write, &lf)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := db.Close(); cerr != nil && err == nil {
				err = s.fail(op, cerr)
			}
		}()
		if err := s.walkOnce(); err != nil {
			return err
		}
		run := db.View
		if write {
			run = db.Update
		}
		var fnErr error
		err = run(func(tx *bolt.Tx) error {
			if err := s.checkSchema(tx); err != nil {
				fnErr = err
				return err
			}
			fnErr = fn(tx)
			return fnErr
		})
		if err != nil && err != fnErr {
			return s.fail(op, err)
		}
		return err
	})
}

// openDB opens the bbolt file, taking its lock as openLocked does (lf
// says how that went), and maps its errors to the package's. A damaged
// file that makes bbolt panic or fault while it loads (the freelist) is
// ErrDamaged (guard), its file closed.
func (s *Bolt) openDB(readOnly bool, lf *lockedFile) (db *bolt.DB, err error) {
	if err := s.checkLength(); err != nil {
		return nil, err
	}
	var f *os.File
	open := s.openLocked(lf, !readOnly)
	defer func() {
		if db == nil && f != nil {
			f.Close() // bbolt left it open when it panicked (closing twice is harmless)
		}
	}()
	err = s.guard("open", func() error {
		var err error
		// bbolt's flock of the file openLocked locked succeeds at once.
		db, err = bolt.Open(s.path, 0o600, &bolt.Options{ReadOnly: readOnly, OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			var err error
			f, err = open(name, flag, mode)
			return f, err
		}})
		return err
	})
	var busy *BusyError
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, ErrDamaged): // guard's
		return nil, err
	case errors.As(err, &busy):
		return nil, s.fail("open", busy)
	case errors.Is(err, context.Canceled): // Options.Cancel, while it waited
		return nil, s.fail("open", err)
	case isOSError(err):
		return nil, s.fail("open", err)
	case errors.Is(err, berrors.ErrChecksum):
		return nil, s.fail("open", fmt.Errorf("%w: %w%s", ErrDamaged, err, corruptAdvice))
	default:
		// bbolt's ErrInvalid, ErrVersionMismatch and its unwrapped "file
		// size too small", "mmap too large": what it read is not a bbolt
		// file.
		return nil, s.fail("open", fmt.Errorf("%w: %w%s", ErrCorrupt, err, corruptAdvice))
	}
}

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common/meta.go),
// two copies at pages 0 and 1, native byte order: a 16-byte page header,
// then magic, version, page size, flags (4 bytes each), the root bucket
// (16), the freelist page id, the high-water page id, the txid (8 each)
// and an FNV-64a checksum of the 56 bytes before it.
const (
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	metaOffset   = 16
	metaSumBytes = 56
)

// checkLength refuses a file that is empty or shorter than the pages its
// newest valid meta page says it has: bbolt would start a fresh queue in
// an empty file, and die of SIGBUS (which no recover catches) reading
// pages past the end of a truncated one. A file without a valid meta page
// is left to bbolt to refuse.
func (s *Bolt) checkLength() error {
	f, err := s.openFile(s.path, os.O_RDONLY, 0) // in a lab: not followed, checked (labfile)
	if err != nil {
		return s.fail("open", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s.fail("open", err)
	}
	size := fi.Size()
	if size == 0 {
		return s.fail("open", fmt.Errorf("%w: the file is empty (0 bytes)%s", ErrDamaged, corruptAdvice))
	}
	var best struct{ txid, pages, pageSize uint64 }
	page0 := make([]byte, 4096)
	n, _ := io.ReadFull(f, page0)
	page0 = page0[:n]
	first, ok := readMeta(page0)
	if !ok || first.pageSize < 512 {
		return nil
	}
	for i := range int64(2) {
		buf := make([]byte, metaOffset+metaSumBytes+8)
		if _, err := f.ReadAt(buf, i*int64(first.pageSize)); err != nil {
			continue
		}
		if m, ok := readMeta(buf); ok && m.txid >= best.txid {
			best.txid, best.pages, best.pageSize = m.txid, m.pages, uint64(m.pageSize)
		}
	}
	if need := best.pages * best.pageSize; best.pageSize > 0 && uint64(size) < need {
		return s.fail("open", fmt.Errorf("%w: the file is truncated (%d bytes; its last transaction wrote %d)%s", ErrDamaged, size, need, corruptAdvice))
	}
	return nil
}

type boltMeta struct {
	pageSize    uint32
	pages, txid uint64
}

// readMeta decodes and checks the meta page at the start of b.
func readMeta(b []byte) (boltMeta, bool) {
	if len(b) < metaOffset+metaSumBytes+8 {
		return boltMeta{}, false
	}
	m := b[metaOffset:]
	ne := binary.NativeEndian
	h := fnv.New64a()
	h.Write(m[:metaSumBytes])
	if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion || h.Sum64() != ne.Uint64(m[metaSumBytes:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ne.Uint32(m[8:]), pages: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}, true
}

// isOSError reports whether err came from the OS (open, stat, mmap, I/O)
// rather than from what bbolt read in the file.
func isOSError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// initSchema creates the buckets and meta keys of a new state file with a
// random cluster id.
func (s *Bolt) initSchema(tx *bolt.Tx) error {
	meta, err := tx.CreateBucket([]byte(bucketMeta))
	if err != nil {
		return err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand, Go >= 1.24)
	for _, kv := range [][2][]byte{
		{[]byte(keyVersion), uint64Bytes(schemaVersion)},
		{[]byte(keyClusterID), []byte(hex.EncodeToString(raw[:]))},
		{[]byte(keyJobSeq), uint64Bytes(0)},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	for _, name := range append(append(baseBuckets, bucketDrains), historyBuckets...) {
		if _, err := tx.CreateBucket([]byte(name)); err != nil {
			return err
		}
	}
	return nil
}

// The buckets every schema has, and those from historyVersion on.
var (
	baseBuckets    = []string{bucketJobs, bucketActive, bucketHosts, bucketUsage}
	historyBuckets = []string{bucketHistory, bucketEnded, bucketJobDirs}
)

// checkSchema verifies the schema version and the buckets it promises.
func (s *Bolt) checkSchema(tx *bolt.Tx) error {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return s.corrupt("no %q bucket", bucketMeta)
	}
	v, err := getUint(meta, keyVersion)
	if err != nil {
		return s.corrupt("%v", err)
	}
	switch {
	case v > schemaVersion:
		return s.fail("open", fmt.Errorf("%w (schema %d; this gssh reads up to %d); upgrade gssh", ErrNewerSchema, v, schemaVersion))
	case v < 1:
		return s.corrupt("unknown schema version %d", v)
	}
	// Every version so far has these buckets: check them before a
	// migration relies on them.
	need := baseBuckets
	if v >= historyVersion {
		need = append(slices.Clip(need), historyBuckets...)
	}
	for _, name := range need {
		if tx.Bucket([]byte(name)) == nil {
			return s.corrupt("no %q bucket", name)
		}
	}
	if v >= drainsVersion && tx.Bucket([]byte(bucketDrains)) == nil {
		return s.corrupt("no %q bucket", bucketDrains)
	}
	if _, err := getUint(meta, keyJobSeq); err != nil {
		return s.corrupt("%v", err)
	}
	if v < schemaVersion && tx.Writable() {
		if err := migrate(tx, v); err != nil {
			return s.fail("write", fmt.Errorf("migrate from schema %d: %w", v, err))
		}
	}
	return nil
}

// migrate brings the file from schema version v up to schemaVersion, in
// the caller's write transaction. Reads of an older file are not migrated:
// records of every version so far read as they are (what they lack reads
// as zero), and Uses of a file before the ledger reads the job records.
func migrate(tx *bolt.Tx, v uint64) error {
	for ; v < schemaVersion; v++ {
		switch v {
		case 1:
			// 1 -> 2: records without an attempt count are attempt 0, whose
			// worker directory keeps the old name; nothing to rewrite.
		case 2:
			// 2 -> 3: build the ledger from every job record.
			if err := buildLedger(tx); err != nil {
				return err
			}
		case 3:
			// 3 -> 4: hosts/ existed (reserved, empty); nothing to rewrite.
		case 4:
			// 4 -> 5: no host is drained yet; history/ starts empty;
			// ended/ and jobdirs/ index every ended job record.
			if _, err := tx.CreateBucketIfNotExists([]byte(bucketDrains)); err != nil {
				return err
			}
			if err := buildEndIndexes(tx); err != nil {
				return err
			}
		case 5:
			// 5 -> 6: durations in seconds; records of either form read
			// alike (job/json.go), so nothing to rewrite.
		}
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(keyVersion), uint64Bytes(schemaVersion))
}

// buildLedger fills usage/ afresh from the job records. A schema-2 gssh
// never wrote usage/ (it was reserved); it is emptied all the same, so the
// ledger is exactly what the records say. A record that cannot be decoded
// is skipped: it has no use to read, List and Get report it, and failing
// here would refuse every write to the file.
func buildLedger(tx *bolt.Tx) error {
	if err := tx.DeleteBucket([]byte(bucketUsage)); err != nil {
		return err
	}
	usage, err := tx.CreateBucket([]byte(bucketUsage))
	if err != nil {
		return err
	}
	c := tx.Bucket([]byte(bucketJobs)).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		j, err := recordJob(k, v)
		if err != nil {
			continue
		}
		key, val, err := usageEntry(j)
		if err != nil {
			return err
		}
		if key != nil {
			if err := usage.Put(key, val); err != nil {
				return err
			}
		}
		if err := putRuns(usage, j); err != nil {
			return err
		}
	}
	return nil
}

// buildEndIndexes creates history/ (empty), ended/ and jobdirs/, and
// fills the two indexes from every job record. A record that cannot be
// decoded is skipped, as in buildLedger.
func buildEndIndexes(tx *bolt.Tx) error {
	var bs []*bolt.Bucket
	for _, name := range historyBuckets {
		b, err := tx.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	ended, dirs := bs[1], bs[2]
	c := tx.Bucket([]byte(bucketJobs)).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		j, err := recordJob(k, v)
		if err != nil {
			continue
		}
		keys := keysOf(j)
		if err := replaceKey(ended, nil, keys.ended); err != nil {
			return err
		}
		if err := replaceKey(dirs, nil, keys.dirs); err != nil {
			return err
		}
	}
	return nil
}

// putRuns writes the ledger entries of j's earlier runs (a requeue ended
// them; they never change, so writing them again changes nothing).
func putRuns(usage *bolt.Bucket, j job.Job) error {
	for _, u := range j.Runs {
		if !u.Started.Before(u.Ended) {
			continue
		}
		val, err := json.Marshal(u)
		if err != nil {
			return fmt.Errorf("job %d: encode use: %w", j.ID, err)
		}
		if err := usage.Put(usageKey(u.Ended, j.ID), val); err != nil {
			return err
		}
	}
	return nil
}

// corruptAdvice ends every ErrCorrupt message: what the user can do.
const corruptAdvice = "; restore it from a backup, or move it aside to start an empty queue (jobs it tracked keep running on the workers, untracked)"

// corrupt returns an ErrCorrupt error naming the file and what is wrong.
func (s *Bolt) corrupt(format string, args ...any) error {
	return s.fail("open", fmt.Errorf("%w: %s%s", ErrCorrupt, fmt.Sprintf(format, args...), corruptAdvice))
}

// putJob stores j's record data (j as it reads back) in jobs/ and keeps
// the active index, the usage ledger, ended/ and jobdirs/ in step with
// it. prev are the index keys of the record it replaces (keysOf), zero
// for a new job.
func putJob(tx *bolt.Tx, j job.Job, data []byte, prev indexKeys) error {
	k := idKey(j.ID)
	if err := tx.Bucket([]byte(bucketJobs)).Put(k, data); err != nil {
		return err
	}
	key, val, err := usageEntry(j)
	if err != nil {
		return err
	}
	usage := tx.Bucket([]byte(bucketUsage))
	if prev.usage != nil && !bytes.Equal(prev.usage, key) {
		if err := usage.Delete(prev.usage); err != nil {
			return err
		}
	}
	if key != nil {
		if err := usage.Put(key, val); err != nil {
			return err
		}
	}
	if err := putRuns(usage, j); err != nil {
		return err
	}
	now := keysOf(j)
	if err := replaceKey(tx.Bucket([]byte(bucketEnded)), prev.ended, now.ended); err != nil {
		return err
	}
	if err := replaceKey(tx.Bucket([]byte(bucketJobDirs)), prev.dirs, now.dirs); err != nil {
		return err
	}
	active := tx.Bucket([]byte(bucketActive))
	if j.State.Terminal() {
		return active.Delete(k)
	}
	return active.Put(k, []byte{})
}

// putHistory stores the record data of j, which is in history/, there,
// and keeps its jobdirs/ entry in step (its ledger entries are left as
// they are: the job ended long ago).
func putHistory(tx *bolt.Tx, j job.Job, data []byte, prev indexKeys) error {
	if err := tx.Bucket([]byte(bucketHistory)).Put(idKey(j.ID), data); err != nil {
		return err
	}
	return replaceKey(tx.Bucket([]byte(bucketJobDirs)), prev.dirs, keysOf(j).dirs)
}

// replaceKey makes b hold key now (empty value) instead of key prev;
// nil means none.
func replaceKey(b *bolt.Bucket, prev, now []byte) error {
	if prev != nil && !bytes.Equal(prev, now) {
		if err := b.Delete(prev); err != nil {
			return err
		}
	}
	if now != nil {
		return b.Put(now, []byte{})
	}
	return nil
}

// usageEntry is j's usage ledger entry: its key and the JSON of its use;
// a nil key when j has none (not ended, or never started).
func usageEntry(j job.Job) (key, val []byte, err error) {
	u, ok := endedUse(j)
	if !ok {
		return nil, nil, nil
	}
	val, err = json.Marshal(u)
	if err != nil {
		return nil, nil, fmt.Errorf("job %d: encode use: %w", j.ID, err)
	}
	return usageKey(u.Ended, j.ID), val, nil
}

// usageKeyOf is the usage key of j's entry, nil when it has none.
func usageKeyOf(j job.Job) []byte {
	if u, ok := endedUse(j); ok {
		return usageKey(u.Ended, j.ID)
	}
	return nil
}

// decodeUse decodes a usage ledger entry.
func decodeUse(k, v []byte) (job.Use, error) {
	if len(k) != usageKeyLen {
		return job.Use{}, fmt.Errorf("bad usage key %s", keyText(k))
	}
	var u job.Use
	if err := json.Unmarshal(v, &u); err != nil {
		return job.Use{}, fmt.Errorf("usage entry of job %d: decode: %w", binary.BigEndian.Uint64(k[8:]), err)
	}
	return u, nil
}

// activeJob reads the job an active index key points at.
func activeJob(jobs *bolt.Bucket, k []byte) (job.Job, error) {
	data := jobs.Get(k)
	if data == nil {
		id, _ := keyID(k)
		return job.Job{}, fmt.Errorf("job %d: in the active index but not stored", id)
	}
	return recordJob(k, data)
}

// recordJob decodes a jobs bucket entry.
func recordJob(k, v []byte) (job.Job, error) {
	id, err := keyID(k)
	if err != nil {
		return job.Job{}, err
	}
	return decode(id, v)
}

// idKey is the bucket key of a job id: big-endian, so keys sort by id.
func idKey(id job.ID) []byte { return uint64Bytes(uint64(id)) }

// keyID is the inverse of idKey.
func keyID(k []byte) (job.ID, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("bad job key %s", keyText(k))
	}
	return job.ID(binary.BigEndian.Uint64(k)), nil
}

func uint64Bytes(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// getUint reads a big-endian uint64 value of bucket b.
func getUint(b *bolt.Bucket, key string) (uint64, error) {
	v := b.Get([]byte(key))
	if len(v) != 8 {
		return 0, fmt.Errorf("bad %q value %x", key, v)
	}
	return binary.BigEndian.Uint64(v), nil
}
