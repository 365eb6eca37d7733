package state

import (
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// Walks remembers the state file whose page walk (walkOnce) passed last,
// by its identity and its last change: a caller that opens the store
// again and again (a gssh run or logs -f polling every few seconds, each
// poll a new Bolt) walks the file once per change, not once per open.
// Give the same *Walks to every Open of one process (Options.Walks); the
// zero value is ready for use, and it is safe for concurrent use.
type Walks struct {
	mu   sync.Mutex
	last walkKey // the file whose walk passed; zero: none yet
}

// walkKey is a file as a walk saw it: a write changes its size or mtime,
// a replacement its inode.
type walkKey struct {
	dev, ino     uint64
	size, mtimeN int64
}

// keyOf is fi's walkKey; ok false where the system gives no inode.
func keyOf(fi fs.FileInfo) (walkKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return walkKey{}, false
	}
	return walkKey{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtimeN: fi.ModTime().UnixNano()}, true
}

// passed reports whether the file k was walked already and passed.
func (w *Walks) passed(k walkKey) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last == k
}

// record remembers that the walk of file k passed.
func (w *Walks) record(k walkKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.last = k
	w.mu.Unlock()
}

// recordPath remembers the file at path, as it is now, as one whose walk
// passed: after a write of this process to a file it walked (the kept
// file of Keep, which no other process writes meanwhile).
func (w *Walks) recordPath(path string) {
	if w == nil {
		return
	}
	if fi, err := os.Stat(path); err == nil {
		if k, ok := keyOf(fi); ok {
			w.record(k)
		}
	}
}
