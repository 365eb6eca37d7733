package state

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

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

// The buckets every schema has, and those from historyVersion on.
var (
	baseBuckets    = []string{bucketJobs, bucketActive, bucketHosts, bucketUsage}
	historyBuckets = []string{bucketHistory, bucketEnded, bucketJobDirs}
)
