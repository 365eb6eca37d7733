package state

import (
	"encoding/json"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The small buckets of records by id (tokens/, cron/): JSON values whose
// id is their key. These are their reads and removals, one for every
// kind.

// listRecords returns every record of bucket, by key, and the keys whose
// values cannot be decoded (or whose id is not their key).
func listRecords[T any](s *Bolt, bucket string, id func(T) string) (out []T, bad []string, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r T
			if err := json.Unmarshal(v, &r); err != nil || id(r) != string(k) {
				bad = append(bad, string(k))
				return nil
			}
			out = append(out, r)
			return nil
		})
	})
	return out, bad, err
}

// removeRecords deletes the records of ids in bucket that remove says to
// (it sees each as stored; an undecodable one as blank(id)), in one
// transaction, and returns the records removed. An id with no record is
// left out of them.
func removeRecords[T any](s *Bolt, bucket string, ids []string, blank func(id string) T, remove func(T) bool) ([]T, error) {
	var gone []T
	err := s.update(func(tx *bolt.Tx) error {
		gone = nil
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			r := blank(id)
			json.Unmarshal(v, &r) // an undecodable record: its id alone
			if !remove(r) {
				continue
			}
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
			gone = append(gone, r)
		}
		return nil
	})
	return gone, err
}
