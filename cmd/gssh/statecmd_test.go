package main

import (
	"encoding/hex"
	"fmt"
	"os"
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

// boltDamageCmd is the script command `boltdamage FILE`: it damages a
// state file as a failing disk would, changing the page id in the header
// of the first page of its jobs/ bucket (bbolt then panics on its own
// assertion as it reads that page).
func boltDamageCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: boltdamage FILE")
	}
	path := ts.MkAbs(args[0])
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	ts.Check(err)
	var off int64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("jobs"))
		if b == nil || b.Root() == 0 {
			return fmt.Errorf("%s: no jobs/ bucket with a page of its own", path)
		}
		off = int64(b.Root()) * int64(db.Info().PageSize)
		return nil
	})
	db.Close()
	ts.Check(err)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	ts.Check(err)
	defer f.Close()
	_, err = f.WriteAt([]byte{0xEE, 0xEE}, off+2) // the id's third and fourth bytes
	ts.Check(err)
}
