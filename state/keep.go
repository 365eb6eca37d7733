package state

import (
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Keep keeps a state file open between the operations of one process
// that is its main user (gssh serve), for as long as operations come
// less than Idle apart: an operation then finds the file open and locked
// already, instead of opening, locking and mapping it anew, and
// concurrent writes are committed together (bbolt's Batch: one commit,
// one fsync, for a burst of submits). Once Idle passes with no operation
// the file is closed, so that other processes (a cron pass, gssh state
// backup) get it; while it is open they wait for it as for any
// operation (Options.Timeout). Share one Keep among the Opens of one file
// in a process (Options.Keep); the zero Keep is ready, with DefaultIdle.
type Keep struct {
	// Idle is how long the file stays open after the last operation
	// ended (0: DefaultIdle).
	Idle time.Duration

	// decoded is the active jobs' records as last decoded (Bolt.Active).
	decoded decodeCache

	mu    sync.Mutex
	db    *bolt.DB
	file  os.FileInfo // the file the kept db has open (locked exclusively)
	path  string
	users int
	timer *time.Timer
}

// DefaultIdle is Keep's Idle when none is given.
const DefaultIdle = 100 * time.Millisecond

// batchDelay is how long a kept file's write waits for others to join
// its commit (bbolt's MaxBatchDelay: 10 ms by default).
const batchDelay = 2 * time.Millisecond

// acquire is the kept db of s's file, opened (exclusively locked) when
// it is not open, or when the file at the path is no longer the one open
// (gssh state restore renamed another over it); release, when done with
// it, broken when the operation failed other than by its own function
// (the file is then closed, and opened afresh by the next). The wait for
// the lock of a file it opens is in lf.
func (k *Keep) acquire(s *Bolt, lf *lockedFile) (db *bolt.DB, release func(broken bool), err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if k.db != nil && k.users == 0 && (k.path != s.path || !k.same(s.path)) {
		k.closeLocked()
	}
	if k.db == nil {
		db, err := s.openDB(false, lf)
		if err != nil {
			return nil, nil, err
		}
		// Its pages walked once, now, under its lock: while it is kept
		// open only this process writes it, so the walk holds until it
		// is closed (a walk beside this process's own writes would read
		// pages half written).
		if err := s.walkOnce(); err != nil {
			db.Close()
			return nil, nil, err
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			db.Close()
			return nil, nil, s.fail("open", err)
		}
		db.MaxBatchDelay = batchDelay
		k.db, k.file, k.path = db, fi, s.path
	} else {
		lf.at = time.Now()
	}
	k.users++
	db = k.db
	return db, func(broken bool) { k.release(db, broken) }, nil
}

// release ends one operation's use of db; the file is closed once Idle
// passes with none (at once when broken).
func (k *Keep) release(db *bolt.DB, broken bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.users--
	if k.db != db {
		return // closed and opened again since (broken)
	}
	if broken {
		if k.users == 0 {
			k.closeLocked()
		}
		return
	}
	if k.users == 0 {
		idle := k.Idle
		if idle <= 0 {
			idle = DefaultIdle
		}
		k.timer = time.AfterFunc(idle, func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.users == 0 && k.db == db {
				k.closeLocked()
			}
		})
	}
}

// same reports whether path is still the file the kept db has open.
func (k *Keep) same(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, k.file)
}

func (k *Keep) closeLocked() {
	if k.db != nil {
		k.db.Close()
	}
	k.db, k.file = nil, nil
}

// Close closes the kept file, if it is open and no operation uses it.
func (k *Keep) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if k.users == 0 {
		k.closeLocked()
	}
}
