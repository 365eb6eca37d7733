// Package state stores the job queue: the storage contract (Store), a bbolt
// implementation for the CLI and the daemon (Bolt, see bolt.go for the file
// layout) and an in-memory one with the same semantics for tests (Mem).
//
// Bolt opens the file for each operation and closes it before returning, so
// no lock is ever held across SSH I/O: a caller reads what it needs, closes,
// talks to hosts, and writes the outcome with Update.
package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
)

// Store is the storage contract of the job queue. Every method is one short
// atomic operation; jobs are returned as copies the caller may modify.
type Store interface {
	// ClusterID returns the id made when the store was created: 32 lowercase
	// hex characters (16 random bytes). It names worker job dirs
	// (~/.gssh/jobs/<cluster-id>-<job-id>) and never changes.
	ClusterID() (string, error)
	// Submit assigns the next id (a sequence starting at 1, so ids sort in
	// submit order), sets SubmittedAt to now if zero and State to queued if
	// empty, stores and indexes the job, and returns it as stored. j.ID must
	// be zero.
	Submit(j job.Job) (job.Job, error)
	// SubmitAll submits jobs as Submit does, in one transaction, under
	// consecutive ids in their order: all or none. stamp, when not nil, is
	// called with the first id and the jobs (ids set) before they are
	// written, to record what depends on the ids (a job array's id is its
	// first task's); it must only change fields.
	SubmitAll(jobs []job.Job, stamp func(first job.ID, jobs []job.Job)) ([]job.Job, error)
	// Get returns job id, or an error wrapping ErrNotFound ("no job N").
	Get(id job.ID) (job.Job, error)
	// Update loads job id, calls fn on a copy and stores the result
	// atomically, returning it. fn runs while the store is locked: it must
	// only change fields, never do I/O. fn returning an error aborts the
	// update and Update returns that error unchanged. fn may not change the
	// ID nor empty the State. The active index follows State.Terminal(). A
	// change of State out of a terminal state is refused with an error
	// wrapping ErrTerminal; other fields of an ended job may still change.
	// A missing job gives an error wrapping ErrNotFound.
	Update(id job.ID, fn func(*job.Job) error) (job.Job, error)
	// Active returns the non-terminal jobs (queued, launching, running, ...)
	// in id order, read from the active index. Like List, it returns the
	// jobs it could read with an error wrapping ErrBadRecord for the others.
	Active() ([]job.Job, error)
	// List returns the jobs matching f in id order (newest last). If a
	// record cannot be decoded, List returns the others together with an
	// error wrapping ErrBadRecord that names each bad record.
	List(f Filter) ([]job.Job, error)
	// Uses returns the GPU uses of the jobs that ended at or after since
	// (job.Use, ended ones only), oldest end first (jobs that ended at the
	// same time in id order). A job that never started used nothing and has
	// none; non-terminal jobs have none either: a caller reads the running
	// ones from Active. Like List, it returns the uses it could read with an
	// error wrapping ErrBadRecord for the others.
	Uses(since time.Time) ([]job.Use, error)
}

// Filter selects jobs for List. The zero Filter selects every job, the
// history's included.
type Filter struct {
	User   string      // "" = any user
	States []job.State // empty = any state; otherwise any of these
	Limit  int         // 0 = all; N > 0 = the newest N matching jobs; negative is an error
	// First, when N > 0, keeps the oldest N matching jobs instead (a page
	// of an API's listing; not with Limit). After keeps the jobs whose
	// ids are greater (0: all): the next page after one that ended there.
	First int
	After job.ID
	// Since, when not zero, keeps the jobs active at some time since
	// then: not ended, or ended at or after it (EndedOf). Bolt answers
	// it from the index of ended jobs, reading the history only when
	// Since reaches back into it.
	Since time.Time
}

// Keeper is a Store that housekeeping trims (Bolt and Mem are ones): the
// records of jobs ended long ago move out of the queue's hot structures
// into its history (Get and List still find them there), the usage
// ledger forgets uses older than fair-share can count, and the ended
// jobs whose directories on the workers are due for removal are found
// without reading the others.
type Keeper interface {
	Store
	// Trim moves the records of the jobs that ended before b.Jobs into
	// the history and prunes the ledger's uses that ended before b.Uses
	// (a zero time: nothing of that kind), oldest first, in short
	// transactions (Bolt: at most TrimBatch records each). More says it
	// stopped with work left, for the next call.
	Trim(b TrimBefore) (Trimmed, error)
	// DirsDue returns up to limit ended jobs, oldest end first (then by
	// id), that ended before before and whose worker directories
	// housekeeping has not dealt with (no Housekept; launched at least
	// once), wherever their records are. Like List, it returns what it
	// could read with an error wrapping ErrBadRecord for the rest.
	DirsDue(before time.Time, limit int) ([]job.Job, error)
	// MarkHousekept records what housekeeping did with each job's
	// directories, in one transaction, and returns the jobs as recorded.
	// A job not ended, or marked already, keeps its record and is left
	// out; a missing one is an error wrapping ErrNotFound, and nothing is
	// written.
	MarkHousekept(marks map[job.ID]job.Housekept) ([]job.Job, error)
}

// TrimBefore are Trim's cutoffs.
type TrimBefore struct {
	Jobs time.Time // records of jobs that ended before this move to the history
	Uses time.Time // the ledger's uses that ended before this are pruned
}

// Trimmed says what Trim did.
type Trimmed struct {
	Moved  int  // job records moved into the history
	Pruned int  // usage ledger entries removed
	More   bool // it stopped with more to do (see TrimBatch)
}

// TrimBatch is the most records (moved, or pruned) one transaction of
// Trim touches, and MaxTrimBatches how many transactions one Trim runs:
// each stays short, and a pass after months without housekeeping moves
// its backlog over several passes.
const (
	TrimBatch      = 1000
	MaxTrimBatches = 16
)

// EndedOf is when ended job j ended, for housekeeping and Filter.Since:
// its EndedAt, or its SubmittedAt in a record without an end.
func EndedOf(j job.Job) time.Time {
	if j.EndedAt.IsZero() {
		return j.SubmittedAt
	}
	return j.EndedAt
}

// dirsPending reports whether j ended and may have directories on its
// workers that housekeeping has not dealt with: it was launched (an
// attempt, or a recorded directory) and has no Housekept.
func dirsPending(j job.Job) bool {
	return j.State.Terminal() && j.Housekept == nil && (j.Attempt > 0 || j.Remote.Dir != "")
}

// Errors of the Store. Match them with errors.Is.
var (
	// ErrNotFound: there is no job with that id. Its message is "no job N".
	ErrNotFound = errors.New("no job")
	// ErrTerminal: Update tried to move an ended job to another state.
	ErrTerminal = errors.New("job has already ended")
	// ErrBusy: another process held the state file past Options.Timeout.
	// Bolt returns it as a *BusyError naming the holder's pid.
	ErrBusy = errors.New("state is busy")
	// ErrCorrupt: the file is not a gssh state file (garbage, a foreign
	// bbolt file, damaged metadata). The message names the file.
	ErrCorrupt = errors.New("not a gssh state file")
	// ErrNewerSchema: the file was written by a newer gssh.
	ErrNewerSchema = errors.New("state file was written by a newer gssh")
	// ErrNoState: Open with NoCreate found no file.
	ErrNoState = errors.New("no state file")
	// ErrDamaged: the state file is empty or truncated, its pages fail
	// their checksums, or its page tree is damaged (found by the walk of
	// its pages a Bolt makes once, or by bbolt panicking or faulting on
	// it: see damage.go): it was a gssh state file, but cannot be trusted
	// now. A Bolt that met it refuses every write after.
	ErrDamaged = errors.New("state file is damaged")
	// ErrBadRecord: Active or List could not decode some job records; they
	// return the others, and the error names each bad one.
	ErrBadRecord = errors.New("unreadable job records")
	// ErrDiskFull: the state file could not be written (or made) for want
	// of space on its filesystem (ENOSPC) or of the owner's quota
	// (EDQUOT). The transaction was rolled back: the file holds what it
	// held before. Bolt returns it inside a *FileError whose message says
	// so and what to do; errors.Is also matches the errno.
	ErrDiskFull = errors.New("no space for the state file")
)

// DefaultPath returns the default state file: $XDG_STATE_HOME/gssh/state.db,
// or home/.local/state/gssh/state.db when xdgStateHome is empty or not
// absolute (the XDG spec says to ignore relative paths). The caller passes
// the environment's values: DefaultPath(home, os.Getenv("XDG_STATE_HOME")).
func DefaultPath(home, xdgStateHome string) string {
	base := xdgStateHome
	if base == "" || !filepath.IsAbs(base) {
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "gssh", "state.db")
}

// notFound returns the ErrNotFound error for id: "no job N".
func notFound(id job.ID) error { return fmt.Errorf("%w %d", ErrNotFound, id) }

// prepareSubmit checks a job given to Submit and fills its defaults.
func prepareSubmit(j job.Job, now func() time.Time) (job.Job, error) {
	if j.ID != 0 {
		return job.Job{}, fmt.Errorf("submit: job already has id %d", j.ID)
	}
	if j.SubmittedAt.IsZero() {
		j.SubmittedAt = now().UTC()
	}
	if j.State == "" {
		j.State = job.Queued
	}
	return j, nil
}

// encode marshals j and returns the bytes and j as it will read back, so
// that what Submit and Update return equals what Get returns later.
func encode(j job.Job) ([]byte, job.Job, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return nil, job.Job{}, fmt.Errorf("job %d: encode: %w", j.ID, err)
	}
	back, err := decode(j.ID, data)
	if err != nil {
		return nil, job.Job{}, err
	}
	return data, back, nil
}

// decode unmarshals the record stored under id. The key is the truth for
// the id.
func decode(id job.ID, data []byte) (job.Job, error) {
	var j job.Job
	if err := json.Unmarshal(data, &j); err != nil {
		return job.Job{}, fmt.Errorf("job %d: decode: %w", id, err)
	}
	j.ID = id
	return j, nil
}

// applyUpdate runs fn on a copy of the record data of job id and checks the
// result. It returns the new job (as it will read back) and its encoding.
func applyUpdate(id job.ID, data []byte, fn func(*job.Job) error) (job.Job, []byte, error) {
	cur, err := decode(id, data)
	if err != nil {
		return job.Job{}, nil, fmt.Errorf("update: %w", err)
	}
	old := cur.State
	if err := fn(&cur); err != nil {
		return job.Job{}, nil, err
	}
	switch {
	case cur.ID != id:
		return job.Job{}, nil, fmt.Errorf("update: job %d: id changed to %d", id, cur.ID)
	case cur.State == "":
		return job.Job{}, nil, fmt.Errorf("update: job %d: empty state", id)
	case old.Terminal() && cur.State != old:
		return job.Job{}, nil, fmt.Errorf("update: job %d: %s -> %s: %w", id, old, cur.State, ErrTerminal)
	}
	newData, back, err := encode(cur)
	if err != nil {
		return job.Job{}, nil, fmt.Errorf("update: %w", err)
	}
	return back, newData, nil
}

// check validates a Filter.
func (f Filter) check() error {
	switch {
	case f.Limit < 0:
		return fmt.Errorf("list: negative limit %d", f.Limit)
	case f.First < 0:
		return fmt.Errorf("list: negative first %d", f.First)
	case f.First > 0 && f.Limit > 0:
		return errors.New("list: a limit of the newest and of the oldest jobs both: give one")
	}
	return nil
}

// match reports whether j passes f (the limit aside).
func (f Filter) match(j job.Job) bool {
	if j.ID <= f.After || f.User != "" && j.User != f.User {
		return false
	}
	if !f.Since.IsZero() && j.State.Terminal() && EndedOf(j).Before(f.Since) {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if j.State == s {
			return true
		}
	}
	return false
}

// activeOnly reports whether f can only match non-terminal jobs, so the
// active index is enough to answer it.
func (f Filter) activeOnly() bool {
	if len(f.States) == 0 {
		return false
	}
	for _, s := range f.States {
		if s.Terminal() {
			return false
		}
	}
	return true
}

// full reports whether n matches fill f's limit.
func (f Filter) full(n int) bool { return f.Limit > 0 && n >= f.Limit || f.First > 0 && n >= f.First }

// endedUse is the use j has in the usage ledger: j.Use() of a terminal job
// that started.
func endedUse(j job.Job) (job.Use, bool) {
	if !j.State.Terminal() {
		return job.Use{}, false
	}
	return j.Use()
}

// usageKeyLen is the length of a usage key: end time and job id.
const usageKeyLen = 16

// Bounds of the times a usage key can tell apart: int64 Unix nanoseconds
// from the epoch on.
var (
	usageFirst = time.Unix(0, 0)
	usageLast  = time.Unix(0, math.MaxInt64)
)

// usageKey is the key of job id's use that ended at ended: the end time as
// big-endian Unix nanoseconds, then the id as big-endian, so keys sort by
// end, then id. Ends outside 1970..2262 (which UnixNano cannot give, or
// that would not sort as unsigned) are clamped to the first or last key
// time; Uses checks the use's own Ended for those.
func usageKey(ended time.Time, id job.ID) []byte {
	var ns uint64
	switch {
	case ended.Before(usageFirst):
		ns = 0
	case ended.After(usageLast):
		ns = math.MaxInt64
	default:
		ns = uint64(ended.UnixNano())
	}
	k := binary.BigEndian.AppendUint64(make([]byte, 0, usageKeyLen), ns)
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

// endKey is ended job j's key in the ended/ and jobdirs/ indexes: its end
// (EndedOf) and id, as usageKey makes them, so cursor order is end order.
func endKey(j job.Job) []byte { return usageKey(EndedOf(j), j.ID) }

// keyEnd is the end time a usage or end key sorts by (Unix nanoseconds).
func keyEnd(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[:8])) }

// indexKeys are the keys a job record has in the indexes beside it:
// its usage ledger entry, its ended/ and its jobdirs/ entries (nil: none).
type indexKeys struct{ usage, ended, dirs []byte }

// keysOf is j's indexKeys.
func keysOf(j job.Job) indexKeys {
	k := indexKeys{usage: usageKeyOf(j)}
	if j.State.Terminal() {
		k.ended = endKey(j)
		if dirsPending(j) {
			k.dirs = k.ended
		}
	}
	return k
}

// useSet gathers the uses of job records in the ledger's order, for the
// stores that answer Uses from the records (Mem, and Bolt on a file of a
// schema before the ledger).
type useSet []keyedUse

type keyedUse struct {
	key []byte
	use job.Use
}

// add adds j's use if it ended at or after since.
func (s *useSet) add(j job.Job, since time.Time) {
	if u, ok := endedUse(j); ok && !u.Ended.Before(since) {
		*s = append(*s, keyedUse{usageKey(u.Ended, j.ID), u})
	}
	for _, u := range j.Runs {
		if u.Started.Before(u.Ended) && !u.Ended.Before(since) {
			*s = append(*s, keyedUse{usageKey(u.Ended, j.ID), u})
		}
	}
}

// sorted returns the uses in key order.
func (s useSet) sorted() []job.Use {
	if len(s) == 0 {
		return nil
	}
	slices.SortFunc(s, func(a, b keyedUse) int { return bytes.Compare(a.key, b.key) })
	out := make([]job.Use, len(s))
	for i, e := range s {
		out[i] = e.use
	}
	return out
}
