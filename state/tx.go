package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// view runs fn in a read transaction on a freshly opened file, shared-locked.
func (s *Bolt) view(fn func(*bolt.Tx) error) error { return s.do(false, fn) }

// update runs fn in a write transaction on a freshly opened file.
func (s *Bolt) update(fn func(*bolt.Tx) error) error { return s.do(true, fn) }

// do opens the file, checks the schema and runs fn in one transaction, then
// closes the file (and so releases the lock) before it returns. fn's own
// error comes back as it is; any other (a close, the commit of a write on
// a full disk: ErrDiskFull, the transaction rolled back) is a *FileError.
// With s.keep the file is the one it keeps open (doKept).
func (s *Bolt) do(write bool, fn func(*bolt.Tx) error) error { return s.run(write, false, fn) }

// run is do, a write with batch committed with the concurrent ones on a
// kept file (see batchUpdate).
func (s *Bolt) run(write, batch bool, fn func(*bolt.Tx) error) (err error) {
	var lf lockedFile
	if s.onOp != nil {
		defer func() { s.trace(write, lf, err) }()
	}
	op := "read"
	if write {
		op = "write"
		if err := s.refuseWrite(); err != nil {
			return err
		}
	}
	if s.keep != nil {
		return s.guard(op, func() error { return s.doKept(op, write, batch, &lf, fn) })
	}
	return s.guard(op, func() (err error) {
		db, err := s.openDB(!write, &lf)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := db.Close(); cerr != nil && err == nil {
				err = s.fail(op, cerr)
			}
		}()
		if err := s.walkOnce(); err != nil {
			return err
		}
		run := db.View
		if write {
			run = db.Update
		}
		var fnErr error
		err = run(func(tx *bolt.Tx) error {
			if err := s.checkSchema(tx); err != nil {
				fnErr = err
				return err
			}
			fnErr = fn(tx)
			return fnErr
		})
		if err != nil && err != fnErr {
			return s.fail(op, err)
		}
		return err
	})
}

// batchUpdate is update of a fn that may run more than once (it does
// nothing outside its transaction but set its results afresh): on a file
// s.keep keeps open it shares a commit with the concurrent ones (bbolt's
// Batch, which runs fn again alone when one of them fails).
func (s *Bolt) batchUpdate(fn func(*bolt.Tx) error) error { return s.run(true, true, fn) }

// doKept is do on the file s.keep keeps open, a write with batch
// committed with the concurrent ones (see batchUpdate). A failure other
// than fn's own closes the kept file.
func (s *Bolt) doKept(op string, write, batch bool, lf *lockedFile, fn func(*bolt.Tx) error) (err error) {
	db, release, err := s.keep.acquire(s, lf)
	if err != nil {
		return err
	}
	var fnErr error
	defer func() { release(err != nil && err != fnErr) }()
	run := db.View
	switch {
	case batch:
		run = db.Batch
	case write:
		run = db.Update
	}
	err = run(func(tx *bolt.Tx) error {
		if err := s.checkSchema(tx); err != nil {
			fnErr = err
			return err
		}
		fnErr = fn(tx)
		return fnErr
	})
	if err != nil && err != fnErr {
		return s.fail(op, err)
	}
	if write && err == nil {
		s.walks.recordPath(s.path) // its own write: the file is as walked
	}
	return err
}

// openDB opens the bbolt file, taking its lock as openLocked does (lf
// says how that went), and maps its errors to the package's. A damaged
// file that makes bbolt panic or fault while it loads (the freelist) is
// ErrDamaged (guard), its file closed.
func (s *Bolt) openDB(readOnly bool, lf *lockedFile) (db *bolt.DB, err error) {
	if err := s.checkLength(); err != nil {
		return nil, err
	}
	var f *os.File
	open := s.openLocked(lf, !readOnly)
	defer func() {
		if db == nil && f != nil {
			f.Close() // bbolt left it open when it panicked (closing twice is harmless)
		}
	}()
	err = s.guard("open", func() error {
		var err error
		// bbolt's flock of the file openLocked locked succeeds at once.
		db, err = bolt.Open(s.path, 0o600, &bolt.Options{ReadOnly: readOnly, OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			var err error
			f, err = open(name, flag, mode)
			return f, err
		}})
		return err
	})
	var busy *BusyError
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, ErrDamaged): // guard's
		return nil, err
	case errors.As(err, &busy):
		return nil, s.fail("open", busy)
	case errors.Is(err, context.Canceled): // Options.Cancel, while it waited
		return nil, s.fail("open", err)
	case isOSError(err):
		return nil, s.fail("open", err)
	case errors.Is(err, berrors.ErrChecksum):
		return nil, s.fail("open", fmt.Errorf("%w: %w%s", ErrDamaged, err, corruptAdvice))
	default:
		// bbolt's ErrInvalid, ErrVersionMismatch and its unwrapped "file
		// size too small", "mmap too large": what it read is not a bbolt
		// file.
		return nil, s.fail("open", fmt.Errorf("%w: %w%s", ErrCorrupt, err, corruptAdvice))
	}
}

// checkLength refuses a file that is empty or shorter than the pages its
// newest valid meta page says it has: bbolt would start a fresh queue in
// an empty file, and die of SIGBUS (which no recover catches) reading
// pages past the end of a truncated one. A file without a valid meta page
// is left to bbolt to refuse.
func (s *Bolt) checkLength() error {
	f, err := s.openFile(s.path, os.O_RDONLY, 0) // in a lab: not followed, checked (labfile)
	if err != nil {
		return s.fail("open", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return s.fail("open", err)
	}
	size := fi.Size()
	if size == 0 {
		return s.fail("open", fmt.Errorf("%w: the file is empty (0 bytes)%s", ErrDamaged, corruptAdvice))
	}
	var best struct{ txid, pages, pageSize uint64 }
	page0 := make([]byte, 4096)
	n, _ := io.ReadFull(f, page0)
	page0 = page0[:n]
	first, ok := readMeta(page0)
	if !ok || first.pageSize < 512 {
		return nil
	}
	for i := range int64(2) {
		buf := make([]byte, metaOffset+metaSumBytes+8)
		if _, err := f.ReadAt(buf, i*int64(first.pageSize)); err != nil {
			continue
		}
		if m, ok := readMeta(buf); ok && m.txid >= best.txid {
			best.txid, best.pages, best.pageSize = m.txid, m.pages, uint64(m.pageSize)
		}
	}
	if need := best.pages * best.pageSize; best.pageSize > 0 && uint64(size) < need {
		return s.fail("open", fmt.Errorf("%w: the file is truncated (%d bytes; its last transaction wrote %d)%s", ErrDamaged, size, need, corruptAdvice))
	}
	return nil
}

type boltMeta struct {
	pageSize    uint32
	pages, txid uint64
}

// readMeta decodes and checks the meta page at the start of b.
func readMeta(b []byte) (boltMeta, bool) {
	if len(b) < metaOffset+metaSumBytes+8 {
		return boltMeta{}, false
	}
	m := b[metaOffset:]
	ne := binary.NativeEndian
	h := fnv.New64a()
	h.Write(m[:metaSumBytes])
	if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion || h.Sum64() != ne.Uint64(m[metaSumBytes:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ne.Uint32(m[8:]), pages: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}, true
}

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common/meta.go),
// two copies at pages 0 and 1, native byte order: a 16-byte page header,
// then magic, version, page size, flags (4 bytes each), the root bucket
// (16), the freelist page id, the high-water page id, the txid (8 each)
// and an FNV-64a checksum of the 56 bytes before it.
const (
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	metaOffset   = 16
	metaSumBytes = 56
)
