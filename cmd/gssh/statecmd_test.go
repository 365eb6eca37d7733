package main

import (
	"encoding/hex"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	bolt "go.etcd.io/bbolt"
)

// boltPutCmd is the script command `boltput FILE BUCKET KEY HEXVALUE`: it
// puts one key into a bbolt file (made when missing), so that scripts can
// make another program's bbolt file or a state file of a newer schema.
func boltPutCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: boltput FILE BUCKET KEY HEXVALUE")
	}
	val, err := hex.DecodeString(args[3])
	ts.Check(err)
	db, err := bolt.Open(ts.MkAbs(args[0]), 0o600, &bolt.Options{Timeout: time.Second})
	ts.Check(err)
	defer db.Close()
	ts.Check(db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(args[1]))
		if err != nil {
			return err
		}
		return b.Put([]byte(args[2]), val)
	}))
}
