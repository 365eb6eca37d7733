package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
)

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
