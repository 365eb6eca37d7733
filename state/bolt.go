package state

/*
The state file is a bbolt database (go.etcd.io/bbolt), schema version 1:

	meta/                   gssh's own metadata
	  version    -> uint64, big-endian: schema version (1)
	  cluster_id -> 32 lowercase hex characters: 16 random bytes made when
	                the file was created; names worker job dirs
	                (~/.gssh/jobs/<cluster-id>-<job-id>)
	  job_seq    -> uint64, big-endian: the last job id handed out (0 = none)
	jobs/                   every job, never deleted
	  <id>       -> JSON job.Job; <id> is the job id as a big-endian uint64,
	                so cursor order is submit order
	active/                 index of the non-terminal jobs
	  <id>       -> empty; present iff jobs/<id> has !State.Terminal()
	hosts/                  reserved (later: host name -> JSON host status)
	usage/                  reserved (later: user -> JSON fair-share usage)

Rules:
  - Open creates all buckets and the meta keys on an empty file; any change
    of the layout above bumps schemaVersion, and a file with a newer version
    is refused (ErrNewerSchema) rather than misread.
  - A job record and its active index entry change in the same transaction.
  - The file is opened for each operation and closed before the method
    returns: bbolt holds an exclusive flock (shared for reads) from its Open
    to its Close, and no lock may span SSH I/O.
*/

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/gssh/gssh/job"
)

// schemaVersion is the version of the bucket tree documented above.
const schemaVersion = 1

// Bucket and key names (see the comment at the top of this file).
const (
	bucketMeta   = "meta"
	bucketJobs   = "jobs"
	bucketActive = "active"
	bucketHosts  = "hosts"
	bucketUsage  = "usage"

	keyVersion   = "version"
	keyClusterID = "cluster_id"
	keyJobSeq    = "job_seq"
)

// DefaultTimeout is how long an operation waits for another process's lock
// on the state file before it gives up with ErrBusy.
const DefaultTimeout = 2 * time.Second

// Options tune a Bolt store. The zero value is ready to use.
type Options struct {
	// Timeout is how long each operation waits for the file lock held by
	// another process (or another operation in this one). 0 means
	// DefaultTimeout; negative means try once, do not wait.
	Timeout time.Duration
	// Now is the clock Submit uses for a zero SubmittedAt; nil means time.Now.
	Now func() time.Time
}

// Bolt is the Store kept in a bbolt file. It holds no open file between
// calls: each method opens the file, runs one transaction and closes it.
// It is safe for concurrent use by goroutines and processes.
type Bolt struct {
	path      string
	timeout   time.Duration
	now       func() time.Time
	clusterID string
}

var _ Store = (*Bolt)(nil)

// Open prepares the state file at path for use and returns the store. It
// creates the parent directory (mode 0700) and the file (mode 0600) when
// missing, tightens an existing file with a looser mode to 0600, and on a
// new file creates the buckets, the schema version and a random cluster id.
//
// Errors: a *BusyError (errors.Is ErrBusy) when another process holds the
// file past opt.Timeout; ErrCorrupt when the file is not a gssh state file;
// ErrNewerSchema when a newer gssh wrote it. All name the file.
func Open(path string, opt Options) (*Bolt, error) {
	if path == "" {
		return nil, errors.New("open state: empty path")
	}
	s := &Bolt{path: path, timeout: opt.Timeout, now: opt.Now}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("open state %s: not a regular file", path)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return nil, fmt.Errorf("open state %s: make it private: %w", path, err)
			}
		}
	}
	db, err := s.openDB(false)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		id, err := s.initSchema(tx)
		s.clusterID = id
		return err
	})
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close state %s: %w", path, cerr)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the state file's path.
func (s *Bolt) Path() string { return s.path }

// ClusterID returns the cluster id read when the store was opened.
func (s *Bolt) ClusterID() (string, error) { return s.clusterID, nil }

// Submit implements Store.
func (s *Bolt) Submit(j job.Job) (job.Job, error) {
	j, err := prepareSubmit(j, s.now)
	if err != nil {
		return job.Job{}, err
	}
	var out job.Job
	err = s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		seq, err := getUint(meta, keyJobSeq)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		j.ID = job.ID(seq + 1)
		if err := meta.Put([]byte(keyJobSeq), uint64Bytes(seq+1)); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		data, back, err := encode(j)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		if err := putJob(tx, j.ID, data, back.State); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		out = back
		return nil
	})
	return out, err
}

// Get implements Store.
func (s *Bolt) Get(id job.ID) (job.Job, error) {
	var out job.Job
	err := s.view(func(tx *bolt.Tx) error {
		data := tx.Bucket([]byte(bucketJobs)).Get(idKey(id))
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

// Update implements Store.
func (s *Bolt) Update(id job.ID, fn func(*job.Job) error) (job.Job, error) {
	var out job.Job
	err := s.update(func(tx *bolt.Tx) error {
		data := tx.Bucket([]byte(bucketJobs)).Get(idKey(id))
		if data == nil {
			return notFound(id)
		}
		j, newData, err := applyUpdate(id, data, fn)
		if err != nil {
			return err
		}
		if err := putJob(tx, id, newData, j.State); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		out = j
		return nil
	})
	return out, err
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
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("active: %w", errors.Join(errs...))
	}
	return out, nil
}

// List implements Store. It walks from the newest job back and stops at
// f.Limit; a filter on non-terminal states only reads the active index.
func (s *Bolt) List(f Filter) ([]job.Job, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var out []job.Job
	var errs []error
	err := s.view(func(tx *bolt.Tx) error {
		jobs := tx.Bucket([]byte(bucketJobs))
		c := jobs.Cursor()
		if f.activeOnly() {
			c = tx.Bucket([]byte(bucketActive)).Cursor()
		}
		for k, v := c.Last(); k != nil && !f.full(len(out)); k, v = c.Prev() {
			var j job.Job
			var err error
			if f.activeOnly() {
				j, err = activeJob(jobs, k)
			} else {
				j, err = recordJob(k, v)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if f.match(j) {
				out = append(out, j)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	reverse(out)
	if len(errs) > 0 {
		return out, fmt.Errorf("list: %w", errors.Join(errs...))
	}
	return out, nil
}

// view runs fn in a read transaction on a freshly opened file, shared-locked.
func (s *Bolt) view(fn func(*bolt.Tx) error) error { return s.do(false, fn) }

// update runs fn in a write transaction on a freshly opened file.
func (s *Bolt) update(fn func(*bolt.Tx) error) error { return s.do(true, fn) }

// do opens the file, checks the schema and runs fn in one transaction, then
// closes the file (and so releases the lock) before it returns.
func (s *Bolt) do(write bool, fn func(*bolt.Tx) error) (err error) {
	db, err := s.openDB(!write)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close state %s: %w", s.path, cerr)
		}
	}()
	run := db.View
	if write {
		run = db.Update
	}
	return run(func(tx *bolt.Tx) error {
		if err := s.checkSchema(tx); err != nil {
			return err
		}
		return fn(tx)
	})
}

// openDB opens the bbolt file and maps its errors to the package's.
func (s *Bolt) openDB(readOnly bool) (db *bolt.DB, err error) {
	// A damaged file can make bbolt panic while it loads the freelist:
	// report it as the corrupt file it is.
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("open state %s: %w: %v%s", s.path, ErrCorrupt, r, corruptAdvice)
		}
	}()
	db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.timeout, ReadOnly: readOnly})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open state %s: %w", s.path, &BusyError{Path: s.path, PID: lockHolder(s.path), Waited: s.timeout})
	case isOSError(err):
		return nil, fmt.Errorf("open state %s: %w", s.path, err)
	default:
		// bbolt's ErrInvalid, ErrChecksum, ErrVersionMismatch and its
		// unwrapped "file size too small", "mmap too large": what it read
		// is not a bbolt file.
		return nil, fmt.Errorf("open state %s: %w: %w%s", s.path, ErrCorrupt, err, corruptAdvice)
	}
}

// isOSError reports whether err came from the OS (open, stat, mmap, I/O)
// rather than from what bbolt read in the file.
func isOSError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// initSchema creates the buckets and meta keys on a new (empty) file, or
// checks an existing one, and returns the cluster id.
func (s *Bolt) initSchema(tx *bolt.Tx) (string, error) {
	if tx.Bucket([]byte(bucketMeta)) == nil {
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return "", s.corrupt("no %q bucket", bucketMeta)
		}
		meta, err := tx.CreateBucket([]byte(bucketMeta))
		if err != nil {
			return "", fmt.Errorf("create state %s: %w", s.path, err)
		}
		var raw [16]byte
		_, _ = rand.Read(raw[:]) // never fails (crypto/rand, Go >= 1.24)
		id := hex.EncodeToString(raw[:])
		for _, kv := range [][2][]byte{
			{[]byte(keyVersion), uint64Bytes(schemaVersion)},
			{[]byte(keyClusterID), []byte(id)},
			{[]byte(keyJobSeq), uint64Bytes(0)},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return "", fmt.Errorf("create state %s: %w", s.path, err)
			}
		}
		for _, name := range []string{bucketJobs, bucketActive, bucketHosts, bucketUsage} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return "", fmt.Errorf("create state %s: %w", s.path, err)
			}
		}
	}
	if err := s.checkSchema(tx); err != nil {
		return "", err
	}
	id := string(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyClusterID)))
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return "", s.corrupt("bad cluster id %q", id)
	}
	return id, nil
}

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
		return fmt.Errorf("open state %s: %w (schema %d); upgrade gssh", s.path, ErrNewerSchema, v)
	case v < schemaVersion:
		// No older schema exists yet; migrations go here.
		return s.corrupt("unknown schema version %d", v)
	}
	for _, name := range []string{bucketJobs, bucketActive, bucketHosts, bucketUsage} {
		if tx.Bucket([]byte(name)) == nil {
			return s.corrupt("no %q bucket", name)
		}
	}
	if _, err := getUint(meta, keyJobSeq); err != nil {
		return s.corrupt("%v", err)
	}
	return nil
}

// corruptAdvice ends every ErrCorrupt message: what the user can do.
const corruptAdvice = "; restore it from a backup, or move it aside to start an empty queue (jobs it tracked keep running on the workers, untracked)"

// corrupt returns an ErrCorrupt error naming the file and what is wrong.
func (s *Bolt) corrupt(format string, args ...any) error {
	return fmt.Errorf("open state %s: %w: %s%s", s.path, ErrCorrupt, fmt.Sprintf(format, args...), corruptAdvice)
}

// putJob stores a job record and keeps the active index in step with state.
func putJob(tx *bolt.Tx, id job.ID, data []byte, st job.State) error {
	k := idKey(id)
	if err := tx.Bucket([]byte(bucketJobs)).Put(k, data); err != nil {
		return err
	}
	active := tx.Bucket([]byte(bucketActive))
	if st.Terminal() {
		return active.Delete(k)
	}
	return active.Put(k, []byte{})
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
		return 0, fmt.Errorf("bad job key %x", k)
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
