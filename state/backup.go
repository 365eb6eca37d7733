package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
)

// Backup, check and restore of state files (gssh state backup, check,
// restore). A backup is bbolt's own copy of the file (Tx.WriteTo) taken
// in one read transaction: consistent while other gssh processes run,
// which wait only for the copy (a shared lock: reads go on).

// Summary says what a state file holds.
type Summary struct {
	Path      string `json:"path"`
	Schema    uint64 `json:"schema"`
	ClusterID string `json:"cluster_id"`
	// JobSeq is the last job id handed out (meta job_seq); MaxID the
	// highest id of a job record.
	JobSeq uint64 `json:"job_seq"`
	MaxID  job.ID `json:"max_job_id"`
	Jobs   int    `json:"jobs"`
	Active int    `json:"active"` // non-terminal jobs
	Bytes  int64  `json:"bytes"`
}

// Backup writes a consistent copy of the state file to dest, mode 0600:
// to a temporary file in dest's directory, synced, then renamed over
// dest (a file there already is replaced whole, never half-written). It
// returns what the copy holds.
//
// Errors: dest is the live state file (the same path, or a link to the
// same file); dest's directory does not exist or is no directory; dest
// is a directory (give a file name); the state file's own errors (busy,
// damaged) as *FileError values; the OS error of writing the copy.
func (s *Bolt) Backup(dest string) (Summary, error) {
	if err := s.checkDest(dest); err != nil {
		return Summary{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".gssh-backup-*.db")
	if err != nil {
		return Summary{}, fmt.Errorf("backup to %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	defer tmp.Close()
	if err := tmp.Chmod(0o600); err != nil {
		return Summary{}, fmt.Errorf("backup to %s: %w", dest, err)
	}
	var sum Summary
	err = s.view(func(tx *bolt.Tx) error {
		var err error
		if sum, err = summarize(tx); err != nil {
			return err
		}
		sum.Bytes, err = tx.WriteTo(tmp)
		if err != nil {
			return fmt.Errorf("backup to %s: %w", dest, err)
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	sum.Path = dest
	if err := tmp.Sync(); err != nil {
		return Summary{}, fmt.Errorf("backup to %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return Summary{}, fmt.Errorf("backup to %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return Summary{}, fmt.Errorf("backup to %s: %w", dest, err)
	}
	syncDir(filepath.Dir(dest))
	return sum, nil
}

// checkDest refuses a backup destination that is the live state file, a
// directory, or in a directory that does not exist.
func (s *Bolt) checkDest(dest string) error {
	if dest == "" {
		return errors.New("backup: give the file to write, such as ~/backups/gssh.db")
	}
	live, _ := filepath.Abs(s.path)
	abs, _ := filepath.Abs(dest)
	if abs == live {
		return fmt.Errorf("backup to %s: that is the live state file itself; give another file, such as %s", dest, filepath.Join(filepath.Dir(live), "backup.db"))
	}
	dir := filepath.Dir(abs)
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("backup to %s: directory %s does not exist: make it first (mkdir -p %s) or give a file in another", dest, dir, dir)
	case err != nil:
		return fmt.Errorf("backup to %s: %w", dest, err)
	case !fi.IsDir():
		return fmt.Errorf("backup to %s: %s is not a directory", dest, dir)
	}
	fi, err := os.Stat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("backup to %s: %w", dest, err)
	case fi.IsDir():
		return fmt.Errorf("backup to %s: is a directory: give a file name, such as %s", dest, filepath.Join(dest, "gssh-backup.db"))
	case !fi.Mode().IsRegular():
		return fmt.Errorf("backup to %s: not a regular file", dest)
	}
	if lfi, err := os.Stat(s.path); err == nil && os.SameFile(fi, lfi) {
		return fmt.Errorf("backup to %s: that is the live state file %s itself (another name for it); give another file", dest, s.path)
	}
	// Replacing a file is for an older backup: anything else there (the
	// event log, the pass lock beside the state file, a file of the
	// user's) would be lost, and a lock replaced no longer keeps a
	// second pass out.
	if !isBoltFile(dest) {
		return fmt.Errorf("backup to %s: the file exists and is no bbolt file (no older backup) that a backup may replace; give a new file name, or remove it first", dest)
	}
	return nil
}

// isBoltFile reports whether path starts with a valid bbolt meta page.
func isBoltFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := io.ReadFull(f, b)
	_, ok := readMeta(b[:n])
	return ok
}

// Report is what Check found in a state file: what it holds, and each
// problem as a sentence naming the job, bucket or key.
type Report struct {
	Summary
	Problems []string `json:"problems"`
	// ActiveJobs are the non-terminal jobs, by id (those whose records
	// could be read).
	ActiveJobs []job.Job `json:"-"`
}

// Check verifies the state file at path without changing it (opened
// read-only, a shared lock, waiting for it as opt.Timeout and opt.Cancel
// say): bbolt's consistency check (every page reachable once, none both
// free and in use, keys in order) and gssh's own: the meta keys (schema
// version, cluster id, job_seq) present and well-formed, job_seq at or
// past the highest job id, every job record readable, every active index
// entry a job that has not ended and every job that has not ended in the
// index, the usage ledger exactly what the job records say (schema 3
// on; entries housekeeping pruned, before usage_from, aside), the
// history's records all ended and in no other bucket, the indexes of
// ended jobs and of the jobs whose worker directories are due (ended/,
// jobdirs/) exactly what the records say (schema 5 on), and every host
// and drain record readable. Problems are in the Report; the
// error is for a file that cannot be checked: missing (ErrNoState),
// empty or truncated (ErrDamaged), not a gssh state file (ErrCorrupt: not
// bbolt, or bbolt without gssh's metadata), of a newer schema
// (ErrNewerSchema), or busy, all as *FileError values naming it.
func Check(path string, opt Options) (Report, error) {
	s := &Bolt{path: path, timeout: cmpDuration(opt.Timeout, DefaultTimeout), cancel: opt.Cancel, shared: opt.Shared} // a lab's file: opened unfollowed, checked (labfile)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Report{}, s.fail("check", fmt.Errorf("%w: no such file", ErrNoState))
	case err != nil:
		return Report{}, s.fail("check", err)
	case fi.IsDir():
		return Report{}, s.fail("check", errors.New("is a directory: give a state file's path"))
	}
	var lf lockedFile
	db, err := s.openDB(true, &lf)
	if err != nil {
		return Report{}, err
	}
	defer db.Close()
	var r Report
	// The pages first, from a copy read under the lock db holds: bbolt's
	// check reads them in a goroutine where a fault is fatal (damage.go).
	if r.Problems, _, err = s.walkPages(); err != nil {
		return Report{}, err
	}
	if len(r.Problems) > 0 {
		r.Problems = append(r.Problems, "the rest of the file was not checked: its pages are damaged")
	} else {
		err = s.guard("check", func() error {
			return db.View(func(tx *bolt.Tx) error { return s.check(tx, &r) })
		})
		if fe := (*FileError)(nil); errors.Is(err, ErrDamaged) && errors.As(err, &fe) {
			// What was read is in r; the rest could not be.
			why, _, _ := strings.Cut(fe.Err.Error(), damagedAdvice)
			r.Problems = append(r.Problems, why+": the rest of the file was not checked")
			err = nil
		}
	}
	r.Path, r.Bytes = path, fi.Size()
	return r, err
}

// cmpDuration is d, or def when d is 0.
func cmpDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// check is Check's work in read transaction tx, filling r (what it
// read, when a damaged page stops it).
func (s *Bolt) check(tx *bolt.Tx, r *Report) error {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return s.corrupt("no %q bucket (another program's bbolt file?)", bucketMeta)
	}
	v, verr := getUint(meta, keyVersion)
	switch {
	case verr != nil:
		return s.corrupt("%v", verr)
	case v > schemaVersion:
		return s.fail("check", fmt.Errorf("%w (schema %d; this gssh reads up to %d); upgrade gssh to check it", ErrNewerSchema, v, schemaVersion))
	case v < 1:
		return s.corrupt("unknown schema version %d", v)
	}
	r.Schema = v
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	for err := range tx.Check() { // its own panics come as errors
		problem("bbolt: %v", err)
	}

	r.ClusterID = string(meta.Get([]byte(keyClusterID)))
	if _, err := hex.DecodeString(r.ClusterID); err != nil || len(r.ClusterID) != 32 {
		problem("meta: cluster_id %q is not 32 hex characters", r.ClusterID)
	}
	seq, serr := getUint(meta, keyJobSeq)
	if serr != nil {
		problem("meta: %v", serr)
	}
	r.JobSeq = seq
	buckets := map[string]*bolt.Bucket{}
	for _, name := range []string{bucketJobs, bucketActive, bucketHosts, bucketUsage} {
		if buckets[name] = tx.Bucket([]byte(name)); buckets[name] == nil {
			problem("no %q bucket", name)
		}
	}
	jobs, active, usage := buckets[bucketJobs], buckets[bucketActive], buckets[bucketUsage]
	if jobs == nil {
		return nil
	}
	ledger := map[string][]byte{} // what usage/ should hold, from the records
	// What ended/ and jobdirs/ should hold (schema 5 on), from the records.
	ended, dirs := map[string]job.ID{}, map[string]job.ID{}
	hist := tx.Bucket([]byte(bucketHistory))
	for _, b := range []struct {
		name string
		b    *bolt.Bucket
	}{{bucketJobs, jobs}, {bucketHistory, hist}} {
		if b.b == nil {
			continue
		}
		c := b.b.Cursor()
		for k, data := c.First(); k != nil; k, data = c.Next() {
			r.Jobs++
			id, err := keyID(k)
			if err != nil {
				problem("%s: %v", b.name, err)
				continue
			}
			r.MaxID = max(r.MaxID, id) // handed out, readable or not
			if id == 0 {
				problem("%s: a job with id 0", b.name)
			}
			inHistory := b.name == bucketHistory
			if inHistory && jobs.Get(k) != nil {
				problem("history: job %d is in jobs/ too: which record holds is not known", id)
			}
			j, err := decode(id, data)
			if err != nil {
				problem("%s: %v", b.name, err)
				continue
			}
			keys := keysOf(j)
			switch {
			case inHistory && !j.State.Terminal():
				problem("history: job %d is %s, but only ended jobs move to the history: passes would never see it", j.ID, j.State)
			case inHistory:
			case !j.State.Terminal():
				r.Active++
				r.ActiveJobs = append(r.ActiveJobs, j)
				if active != nil && active.Get(k) == nil {
					problem("job %d is %s but not in the active index: passes would never see it", j.ID, j.State)
				}
			default:
				ended[string(keys.ended)] = j.ID
			}
			if keys.dirs != nil {
				dirs[string(keys.dirs)] = j.ID
			}
			if key, val, err := usageEntry(j); err == nil && key != nil {
				ledger[string(key)] = val
			}
			for _, u := range j.Runs {
				if u.Started.Before(u.Ended) {
					if val, err := json.Marshal(u); err == nil {
						ledger[string(usageKey(u.Ended, j.ID))] = val
					}
				}
			}
		}
	}
	if serr == nil && uint64(r.MaxID) > seq {
		problem("meta: job_seq %d is below the highest job id %d: the next submit would reuse an id", seq, r.MaxID)
	}
	if active != nil {
		ac := active.Cursor()
		for k, _ := ac.First(); k != nil; k, _ = ac.Next() {
			id, err := keyID(k)
			if err != nil {
				problem("active: %v", err)
				continue
			}
			data := jobs.Get(k)
			if data == nil {
				problem("active: job %d is in the active index but not stored", id)
				continue
			}
			if j, err := decode(id, data); err == nil && j.State.Terminal() {
				problem("active: job %d is in the active index but has ended (%s)", id, j.State)
			}
		}
	}
	if usage != nil && v >= ledgerVersion {
		uc := usage.Cursor()
		for k, val := uc.First(); k != nil; k, val = uc.Next() {
			want, ok := ledger[string(k)]
			switch {
			case len(k) != usageKeyLen:
				problem("usage: bad key %s", keyText(k))
			case !ok:
				problem("usage: an entry for job %d that its record does not have (fair-share counts a use that is not there)", binary.BigEndian.Uint64(k[8:]))
			case !sameUse(val, want):
				problem("usage: the entry for job %d differs from its record", binary.BigEndian.Uint64(k[8:]))
			}
			delete(ledger, string(k))
		}
		from, _ := getUint(meta, keyUsageFrom) // housekeeping pruned what ended before
		for k := range ledger {
			if uint64(keyEnd([]byte(k))) < from {
				continue
			}
			problem("usage: job %d has no ledger entry for its use ended at key %x (fair-share misses it)", binary.BigEndian.Uint64([]byte(k)[8:]), k[:8])
		}
	}
	if v >= historyVersion {
		for _, name := range historyBuckets {
			if tx.Bucket([]byte(name)) == nil {
				problem("no %q bucket", name)
			}
		}
		checkEndIndex(tx, bucketEnded, ended, problem, "has ended but is not in the index of ended jobs (ended/): it would never move to the history",
			"is in the index of ended jobs (ended/) but is no ended job of jobs/")
		checkEndIndex(tx, bucketJobDirs, dirs, problem, "ended, with directories on its workers, but is not in the housekeeping index (jobdirs/): they would never be removed",
			"is in the housekeeping index (jobdirs/) but has no directories due for removal")
	}
	if drains := tx.Bucket([]byte(bucketDrains)); drains != nil {
		if _, bad := readDrains(drains); len(bad) > 0 {
			problem("drains: the records of %v cannot be decoded (those hosts count as drained until gssh drain or gssh resume writes them)", bad)
		}
	} else if v >= drainsVersion {
		problem("no %q bucket", bucketDrains)
	}
	if hosts := buckets[bucketHosts]; hosts != nil {
		hosts.ForEach(func(k, v []byte) error {
			var h health.Host
			if err := json.Unmarshal(v, &h); err != nil {
				problem("hosts: the record of %s cannot be decoded: %v", k, err)
			}
			return nil
		})
	}
	return nil
}

// checkEndIndex compares the index bucket name (ended/, jobdirs/) with
// want, its keys as the records say (to their job ids), reporting each
// job missing (missing) and each entry that should not be there (extra).
func checkEndIndex(tx *bolt.Tx, name string, want map[string]job.ID, problem func(string, ...any), missing, extra string) {
	b := tx.Bucket([]byte(name))
	if b == nil {
		return // the missing bucket is told elsewhere
	}
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != usageKeyLen {
			problem("%s: bad key %s", name, keyText(k))
			continue
		}
		if _, ok := want[string(k)]; !ok {
			problem("%s: job %d %s", name, binary.BigEndian.Uint64(k[8:]), extra)
		}
		delete(want, string(k))
	}
	for _, id := range slices.Sorted(maps.Values(want)) {
		problem("job %d %s", id, missing)
	}
}

// sameUse reports whether two ledger values hold the same use.
func sameUse(a, b []byte) bool {
	var ua, ub job.Use
	if json.Unmarshal(a, &ua) != nil || json.Unmarshal(b, &ub) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(ua)
	jb, _ := json.Marshal(ub)
	return bytes.Equal(ja, jb)
}

// summarize is what the state in tx holds (Backup's Summary; Check says
// more).
func summarize(tx *bolt.Tx) (Summary, error) {
	meta := tx.Bucket([]byte(bucketMeta))
	var sum Summary
	sum.Schema, _ = getUint(meta, keyVersion)
	sum.JobSeq, _ = getUint(meta, keyJobSeq)
	sum.ClusterID = string(meta.Get([]byte(keyClusterID)))
	sum.Jobs = tx.Bucket([]byte(bucketJobs)).Stats().KeyN
	if h := tx.Bucket([]byte(bucketHistory)); h != nil {
		sum.Jobs += h.Stats().KeyN
	}
	sum.Active = tx.Bucket([]byte(bucketActive)).Stats().KeyN
	sum.MaxID = maxJobID(tx)
	return sum, nil
}

// Restored is what Restore did.
type Restored struct {
	Summary        // the state file now
	Before  string // where the state file it replaced was kept ("": there was none)
}

// Restore puts a copy of backup in place of the state file at live, with
// job_seq raised to at least minSeq and past every id the file it
// replaces handed out, so that no job id is ever handed out twice; the
// cluster id stays the backup's (restored jobs still running carry it).
// The copy is made next to live (bbolt's own copy, in a read transaction
// of backup), then, under the exclusive lock of the file it replaces
// (which waits for every operation on it to end; the operations waiting
// for it then find the new file, see openLocked), that file is kept as
// live+".before-restore" (or ".before-restore.N", the first free) and the
// copy renamed over it. A live file that does not exist is simply made;
// one that cannot be read is kept aside all the same (its ids then come
// from minSeq alone).
//
// The caller checks backup first (Check) and keeps passes off meanwhile
// (the pass lock). Errors: backup's as Check's; the OS errors of the
// copy, the link and the rename (the state file is then unchanged).
func Restore(backup, live string, minSeq uint64, opt Options) (Restored, error) {
	src := &Bolt{path: backup, timeout: cmpDuration(opt.Timeout, DefaultTimeout), cancel: opt.Cancel}
	dst := &Bolt{path: live, timeout: src.timeout, cancel: opt.Cancel, shared: opt.Shared}
	if dst.shared != nil && !dst.shared.Lab.Privileged() {
		return Restored{}, dst.fail("restore", fmt.Errorf("a lab's state is restored by its pass account %s or root (the new file must be theirs): ask them", dst.shared.Lab.PassUser))
	}
	dir := filepath.Dir(live)
	if dst.shared == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Restored{}, dst.fail("restore", err)
		}
	}
	tmp, err := dst.restoreTemp(dir)
	if err != nil {
		return Restored{}, dst.fail("restore", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	defer tmp.Close()
	var lf lockedFile
	db, err := src.openDB(true, &lf)
	if err != nil {
		return Restored{}, err
	}
	err = src.guard("read", func() error {
		return db.View(func(tx *bolt.Tx) error {
			_, err := tx.WriteTo(tmp)
			return err
		})
	})
	db.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, ErrDamaged) {
		return Restored{}, err
	}
	if err != nil {
		return Restored{}, dst.fail("restore", fmt.Errorf("copy %s: %w", backup, err))
	}

	var out Restored
	swap := func(liveSeq uint64) error {
		var sum Summary
		err := src.guard("read", func() (err error) {
			sum, err = raiseSeq(tmp.Name(), max(minSeq, liveSeq))
			return err
		})
		if errors.Is(err, ErrDamaged) {
			return err
		}
		if err != nil {
			return dst.fail("restore", fmt.Errorf("the copy of %s: %w", backup, err))
		}
		out.Summary = sum
		if _, err := os.Stat(live); err == nil {
			if out.Before, err = dst.keepAside(live); err != nil {
				return dst.fail("restore", err)
			}
		}
		if err := os.Rename(tmp.Name(), live); err != nil {
			return dst.fail("restore", err)
		}
		syncDir(dir)
		return nil
	}
	errRolledBack := errors.New("rolled back")
	var swapErr error
	_, statErr := os.Stat(live)
	if statErr != nil {
		swapErr = swap(0)
	} else {
		// Under the exclusive lock of the file replaced, in a write
		// transaction that writes nothing to it (rolled back).
		err := dst.update(func(tx *bolt.Tx) error {
			seq, _ := getUint(tx.Bucket([]byte(bucketMeta)), keyJobSeq)
			seq = max(seq, uint64(maxJobID(tx)))
			swapErr = swap(seq)
			return errRolledBack
		})
		var busy *BusyError
		switch {
		case errors.Is(err, errRolledBack):
		case errors.As(err, &busy), errors.Is(err, context.Canceled):
			return Restored{}, err
		default:
			// Unreadable: nothing can use it; put it aside all the same.
			swapErr = swap(0)
		}
	}
	if swapErr != nil {
		return Restored{}, swapErr
	}
	out.Path = live
	return out, nil
}

// raiseSeq sets job_seq of the bbolt file at path to at least seq (and
// at least its highest job id), in one write transaction, and says what
// the file holds then.
func raiseSeq(path string, seq uint64) (Summary, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		cur, err := getUint(meta, keyJobSeq)
		if err != nil {
			return err
		}
		seq = max(seq, uint64(maxJobID(tx)))
		if seq > cur {
			if err := meta.Put([]byte(keyJobSeq), uint64Bytes(seq)); err != nil {
				return err
			}
		}
		sum, err = summarize(tx)
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if fi, serr := os.Stat(path); serr == nil {
		sum.Bytes = fi.Size()
	}
	return sum, err
}

// restoreTemp is the new file a restore copies the backup into, in dir
// beside the state: the state's mode (0600; in shared-lab mode
// labfile.Dir.Create's, the pass account's).
func (s *Bolt) restoreTemp(dir string) (*os.File, error) {
	if s.shared != nil {
		return s.shared.Lab.CreateTemp(".state-restore-")
	}
	tmp, err := os.CreateTemp(dir, ".state-restore-*.db")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// keepAside links live to live.before-restore, or .before-restore.N for
// the first N free, and returns that name: the file stays where it is
// until the rename replaces it.
func (s *Bolt) keepAside(live string) (string, error) {
	if s.shared != nil {
		return s.keepAsideLab(live)
	}
	for n := 1; ; n++ {
		name := live + ".before-restore"
		if n > 1 {
			name += "." + strconv.Itoa(n)
		}
		err := os.Link(live, name)
		switch {
		case err == nil:
			return name, nil
		case errors.Is(err, fs.ErrExist):
			continue
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EXDEV):
			// No hard links here: copy it.
			if _, serr := os.Stat(name); serr == nil {
				continue
			}
			data, rerr := os.ReadFile(live)
			if rerr != nil {
				return "", rerr
			}
			if werr := os.WriteFile(name, data, 0o600); werr != nil {
				return "", werr
			}
			return name, nil
		default:
			return "", err
		}
	}
}

// syncDir makes a rename in dir durable (best effort: some filesystems
// cannot sync a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
