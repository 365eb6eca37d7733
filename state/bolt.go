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
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

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
	// Walks, when set, is shared by the Opens of one process: the page
	// walk before a store's first use is skipped for a file unchanged
	// since a walk that passed (see Walks).
	Walks *Walks
	// Keep, when set, is shared by the Opens of one process that is the
	// file's main user (gssh serve): the file stays open between
	// operations that come close together, and concurrent writes share
	// a commit (see Keep).
	Keep *Keep
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
	walks     *Walks          // Options.Walks; nil: none
	keep      *Keep           // Options.Keep; nil: none
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
	s := &Bolt{path: path, timeout: opt.Timeout, now: opt.Now, onOp: opt.Trace, cancel: opt.Cancel, walks: opt.Walks, keep: opt.Keep}
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
	err := s.batchUpdate(func(tx *bolt.Tx) error { // it may run twice: it sets out afresh
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

// UpdateEach is Update of each job of ids, fn given the job's index in
// ids, in one write transaction (one commit, one fsync: a pass writing
// the pending reasons of many jobs). Each job's result and error are at
// its index: a job fn refuses (or that is not there) is left as it was,
// the others are written all the same. err is the transaction's own
// (nothing was written then).
func (s *Bolt) UpdateEach(ids []job.ID, fn func(i int, x *job.Job) error) (out []job.Job, errs []error, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		out, errs = make([]job.Job, len(ids)), make([]error, len(ids))
		for i, id := range ids {
			out[i], errs[i] = updateTx(tx, id, func(x *job.Job) error { return fn(i, x) })
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, errs, nil
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
	var seen map[job.ID]bool
	if s.keep != nil {
		seen = map[job.ID]bool{}
	}
	err := s.view(func(tx *bolt.Tx) error {
		jobs := tx.Bucket([]byte(bucketJobs))
		c := tx.Bucket([]byte(bucketActive)).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			var j job.Job
			var err error
			id, kerr := keyID(k)
			if v := jobs.Get(k); seen != nil && kerr == nil && v != nil {
				j, err = s.keep.decoded.get(id, v, seen) // gssh serve: unchanged records are not decoded again
			} else {
				j, err = activeJob(jobs, k)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, j)
		}
		return nil
	})
	if seen != nil && err == nil {
		s.keep.decoded.sweep(seen)
	}
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
	if f.First > 0 && f.Since.IsZero() {
		err := s.view(func(tx *bolt.Tx) error { listFirst(tx, l); return nil })
		return readResult("list", l.out, err, l.errs)
	}
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
		walkRecords(tx, l, nil, true)
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
	switch {
	case f.Limit > 0 && len(l.out) > f.Limit:
		l.out = l.out[len(l.out)-f.Limit:]
	case f.First > 0 && len(l.out) > f.First:
		l.out = l.out[:f.First]
	}
	slices.Reverse(l.out) // List reverses what it is given
}

// listFirst fills l for a filter with First (and no Since), oldest
// first from After on: over the active index alone when the filter
// keeps active jobs only, else over jobs/ and history/ merged by id.
// It reads no more records than the page needs past the ones that do
// not match.
func listFirst(tx *bolt.Tx, l *listing) {
	f := l.f
	from := idKey(f.After + 1)
	jobs := tx.Bucket([]byte(bucketJobs))
	if f.activeOnly() {
		c := tx.Bucket([]byte(bucketActive)).Cursor()
		for k, _ := c.Seek(from); k != nil && !f.full(len(l.out)); k, _ = c.Next() {
			l.add(activeJob(jobs, k))
		}
		return
	}
	walkRecords(tx, l, from, false)
}

// walkRecords adds to l the job records of jobs/ and history/ merged by
// id (a job is in one of them), until l's filter is full: newest first
// from the last id when back, else oldest first from the key from on.
func walkRecords(tx *bolt.Tx, l *listing, from []byte, back bool) {
	open := func(name string) (c *bolt.Cursor, k, v []byte) {
		b := tx.Bucket([]byte(name))
		if b == nil {
			return nil, nil, nil
		}
		c = b.Cursor()
		if back {
			k, v = c.Last()
		} else {
			k, v = c.Seek(from)
		}
		return c, k, v
	}
	step := func(c *bolt.Cursor) ([]byte, []byte) {
		if back {
			return c.Prev()
		}
		return c.Next()
	}
	a, ka, va := open(bucketJobs)
	b, kb, vb := open(bucketHistory)
	for (ka != nil || kb != nil) && !l.f.full(len(l.out)) {
		cmp := 0
		if ka != nil && kb != nil {
			cmp = bytes.Compare(ka, kb)
		}
		if kb == nil || (ka != nil && (back && cmp > 0 || !back && cmp < 0)) {
			l.add(recordJob(ka, va))
			ka, va = step(a)
		} else {
			l.add(recordJob(kb, vb))
			kb, vb = step(b)
		}
	}
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
