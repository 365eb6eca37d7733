package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
)

var _ Keeper = (*Bolt)(nil)

// trimBatch and maxTrimBatches are TrimBatch and MaxTrimBatches (tests
// make them small).
var trimBatch, maxTrimBatches = TrimBatch, MaxTrimBatches

// Trim implements Keeper. A read transaction first looks whether
// anything is due (most passes: nothing, and no write); then each write
// transaction moves or prunes at most TrimBatch records, oldest first,
// up to MaxTrimBatches of them.
func (s *Bolt) Trim(b TrimBefore) (Trimmed, error) {
	var out Trimmed
	due := false
	err := s.view(func(tx *bolt.Tx) error {
		due = trimDue(tx, b)
		return nil
	})
	if err != nil || !due {
		return out, err
	}
	for range maxTrimBatches {
		var moved, pruned int
		var more bool
		err := s.update(func(tx *bolt.Tx) error {
			var err error
			moved, pruned, more = 0, 0, false
			if !b.Jobs.IsZero() {
				if moved, more, err = moveHistory(tx, b.Jobs, trimBatch); err != nil {
					return fmt.Errorf("trim: %w", err)
				}
			}
			if !b.Uses.IsZero() && moved < trimBatch {
				var left bool
				if pruned, left, err = pruneUses(tx, b.Uses, trimBatch-moved); err != nil {
					return fmt.Errorf("trim: %w", err)
				}
				more = more || left
			} else if !b.Uses.IsZero() {
				more = true // the moves took the batch: the next looks at the ledger
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		out.Moved += moved
		out.Pruned += pruned
		out.More = more
		if !more {
			break
		}
	}
	return out, nil
}

// trimDue reports whether Trim has anything to do: a job in ended/ that
// ended before b.Jobs, or a use in usage/ that ended before b.Uses (or
// a file of an older schema, which the first write migrates).
func trimDue(tx *bolt.Tx, b TrimBefore) bool {
	ended := tx.Bucket([]byte(bucketEnded))
	if ended == nil {
		return true
	}
	first := func(bk *bolt.Bucket, before time.Time) bool {
		k, _ := bk.Cursor().First()
		return !before.IsZero() && k != nil && bytes.Compare(k, usageKey(before, 0)) < 0
	}
	return first(ended, b.Jobs) || first(tx.Bucket([]byte(bucketUsage)), b.Uses)
}

// firstKeys are up to n keys of b, from its first, that sort before cut
// (copied: the caller changes b), and whether more such keys follow.
func firstKeys(b *bolt.Bucket, cut []byte, n int) (keys [][]byte, more bool) {
	c := b.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, cut) < 0; k, _ = c.Next() {
		if len(keys) == n {
			return keys, true
		}
		keys = append(keys, bytes.Clone(k))
	}
	return keys, false
}

// moveHistory moves the records of up to n jobs that ended before before
// (the oldest first, by ended/) from jobs/ to history/, drops their
// ended/ entries and raises history_until to the latest end moved.
// Their jobdirs/ entries stay: DirsDue finds the records in history/.
func moveHistory(tx *bolt.Tx, before time.Time, n int) (moved int, more bool, err error) {
	ended := tx.Bucket([]byte(bucketEnded))
	jobs, hist := tx.Bucket([]byte(bucketJobs)), tx.Bucket([]byte(bucketHistory))
	keys, more := firstKeys(ended, usageKey(before, 0), n)
	if len(keys) == 0 {
		return 0, false, nil
	}
	meta := tx.Bucket([]byte(bucketMeta))
	until, err := getUint(meta, keyHistoryUntil)
	if err != nil {
		until = 0 // none yet
	}
	for _, k := range keys {
		if err := ended.Delete(k); err != nil {
			return moved, more, err
		}
		if len(k) != usageKeyLen {
			continue // a bad key: dropped from the index, nothing to move
		}
		id := k[8:]
		data := jobs.Get(id)
		if data == nil {
			continue // not in jobs/ (a stale entry): nothing to move
		}
		if err := hist.Put(id, bytes.Clone(data)); err != nil {
			return moved, more, err
		}
		if err := jobs.Delete(id); err != nil {
			return moved, more, err
		}
		until = max(until, uint64(keyEnd(k)))
		moved++
	}
	return moved, more, meta.Put([]byte(keyHistoryUntil), uint64Bytes(until))
}

// pruneUses removes up to n usage/ entries of uses that ended before
// before, the oldest first, and, when it removed some, raises usage_from
// to before (state check then misses no entry that ended before it).
func pruneUses(tx *bolt.Tx, before time.Time, n int) (pruned int, more bool, err error) {
	usage := tx.Bucket([]byte(bucketUsage))
	keys, more := firstKeys(usage, usageKey(before, 0), n)
	if len(keys) == 0 {
		return 0, more, nil
	}
	for _, k := range keys {
		if err := usage.Delete(k); err != nil {
			return pruned, more, err
		}
		pruned++
	}
	meta := tx.Bucket([]byte(bucketMeta))
	from, _ := getUint(meta, keyUsageFrom) // 0: none pruned yet
	from = max(from, uint64(keyEnd(usageKey(before, 0))))
	return pruned, more, meta.Put([]byte(keyUsageFrom), uint64Bytes(from))
}

// maxJobID is the highest id of a job record, in jobs/ or history/ (0:
// none).
func maxJobID(tx *bolt.Tx) job.ID {
	var top job.ID
	for _, name := range []string{bucketJobs, bucketHistory} {
		if b := tx.Bucket([]byte(name)); b != nil {
			if k, _ := b.Cursor().Last(); k != nil {
				id, _ := keyID(k)
				top = max(top, id)
			}
		}
	}
	return top
}

// DirsDue implements Keeper, from jobdirs/: the jobs due are its first
// entries, whatever the size of the history.
func (s *Bolt) DirsDue(before time.Time, limit int) ([]job.Job, error) {
	var out []job.Job
	var errs []error
	err := s.view(func(tx *bolt.Tx) error {
		dirs := tx.Bucket([]byte(bucketJobDirs))
		if dirs == nil {
			return nil // a file of an older schema: the first write migrates it
		}
		cut := usageKey(before, 0)
		c := dirs.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, cut) < 0 && len(out) < limit; k, _ = c.Next() {
			if len(k) != usageKeyLen {
				errs = append(errs, fmt.Errorf("bad jobdirs key %s", keyText(k)))
				continue
			}
			id, _ := keyID(k[8:])
			data, _ := record(tx, id)
			if data == nil {
				errs = append(errs, fmt.Errorf("job %d: in the jobdirs index but not stored", id))
				continue
			}
			j, err := decode(id, data)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, j)
		}
		return nil
	})
	return readResult("jobs due for housekeeping", out, err, errs)
}

// errMarked skips a job MarkHousekept leaves as it is.
var errMarked = errors.New("marked already")

// MarkHousekept implements Keeper, in one write transaction.
func (s *Bolt) MarkHousekept(marks map[job.ID]job.Housekept) ([]job.Job, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	var out []job.Job
	err := s.update(func(tx *bolt.Tx) error {
		out = nil
		for _, id := range slices.Sorted(maps.Keys(marks)) {
			j, err := updateTx(tx, id, func(x *job.Job) error { return markHousekept(x, marks[id]) })
			switch {
			case errors.Is(err, errMarked):
				continue
			case err != nil:
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// markHousekept records m in x, or returns errMarked when x has not
// ended or is marked already.
func markHousekept(x *job.Job, m job.Housekept) error {
	if !x.State.Terminal() || x.Housekept != nil {
		return errMarked
	}
	x.Housekept = &m
	return nil
}
