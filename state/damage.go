package state

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// A damaged state file (bytes flipped by a failing disk, a bad copy, a
// crash of the filesystem) is met by bbolt as pages that do not say what
// they should: it panics on its own assertions ("page expected to be 9,
// but self identifies as 137", "invalid page type"), indexes past a
// slice, or reads its memory map at an address the file does not back
// (a page id past the end: SIGBUS or SIGSEGV, fatal to the process unless
// the goroutine asked for a panic instead, debug.SetPanicOnFault). guard
// turns each of them into a *FileError wrapping ErrDamaged, and the Bolt
// then refuses every write: nothing is written to a file a read found
// damaged (a write could spread the damage into pages still good, and a
// pass must not launch jobs from a queue it cannot read whole).
//
// bbolt reads the map in the caller's goroutine (Open, a transaction, its
// commit, Close), except Tx.Check, which walks the pages in a goroutine
// of its own: it recovers its own panics, but a fault there would end
// the process. Check (backup.go) therefore first walks the file's pages
// itself (pages.go), from a copy in memory, and runs bbolt's check only
// when every page it would read lies inside the file.

// damage is what a Bolt remembers of the damage an operation found.
type damage struct {
	mu     sync.Mutex
	err    error // the first *FileError wrapping ErrDamaged; nil: none found
	walked bool  // the pages were walked (walkOnce)
}

// found records err when it is the first damage found.
func (d *damage) found(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil && errors.Is(err, ErrDamaged) {
		d.err = err
	}
}

// seen is the first damage found, nil when none was.
func (d *damage) seen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// damagedAdvice ends every message of a file found damaged: what to do.
const damagedAdvice = "; nothing was written to it. gssh state check says what is damaged; restore a backup with gssh state restore BACKUP, or move the file aside to start an empty queue (jobs it tracked keep running on the workers, untracked)"

// guard runs fn, which uses the bbolt file, in this goroutine with
// faults made panics; a panic of bbolt's, or a fault, becomes a
// *FileError of op wrapping ErrDamaged that names the file, and is
// remembered (refuseWrite). A panic of any other code is not the file's:
// it goes on.
func (s *Bolt) guard(op string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		what, ok := fromDamage(r)
		if !ok {
			panic(r)
		}
		err = s.fail(op, fmt.Errorf("%w: %s%s", ErrDamaged, what, damagedAdvice))
		s.damage.found(err)
	}()
	err = fn()
	s.damage.found(err)
	return err
}

// walkOnce walks the pages of s's file (checkPages) on the first
// operation of s, under its lock: a damaged page tree is found before
// anything reads it (a loop of pages would make bbolt's cursors descend
// forever) or a write carries it on (an element whose size is garbage
// would be copied, or grow the file by gigabytes). It costs a read of
// each page's header and elements once per store, and with
// Options.Walks once per change of the file in a process.
func (s *Bolt) walkOnce() error {
	s.damage.mu.Lock()
	walked := s.damage.walked
	s.damage.mu.Unlock()
	if walked {
		return nil
	}
	problems, key, err := s.walkPages()
	if err != nil {
		return err
	}
	s.damage.mu.Lock()
	s.damage.walked = true
	s.damage.mu.Unlock()
	if len(problems) == 0 {
		s.walks.record(key)
		return nil
	}
	more := ""
	if n := len(problems) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	err = s.fail("open", fmt.Errorf("%w: %s%s%s", ErrDamaged, strings.TrimPrefix(problems[0], "pages: "), more, damagedAdvice))
	s.damage.found(err)
	return err
}

// walkPages is checkPages of s's file, opened afresh (the caller holds
// its lock), with the file's walkKey; nothing is read when s.walks saw
// the file unchanged pass already.
func (s *Bolt) walkPages() ([]string, walkKey, error) {
	f, err := s.openFile(s.path, os.O_RDONLY, 0) // in a lab: not followed, checked (labfile)
	if err != nil {
		return nil, walkKey{}, s.fail("open", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, walkKey{}, s.fail("open", err)
	}
	key, ok := keyOf(fi)
	if ok && s.walks.passed(key) {
		return nil, key, nil
	}
	return checkPages(f, fi.Size()), key, nil
}

// refuseWrite is the error of a write to a file an earlier operation of
// s found damaged; nil when none did.
func (s *Bolt) refuseWrite() error {
	seen := s.damage.seen()
	if seen == nil {
		return nil
	}
	var fe *FileError
	why := seen.Error()
	if errors.As(seen, &fe) {
		why = fe.Err.Error()
	}
	why, _, _ = strings.Cut(why, damagedAdvice)
	return s.fail("write", fmt.Errorf("%w: refused to write, a read found it damaged (%s)%s", ErrDamaged,
		strings.TrimPrefix(why, ErrDamaged.Error()+": "), damagedAdvice))
}

// fromDamage reports whether r, a recovered panic, came from the file: a
// fault of the memory map (a runtime.Error with an Addr, from
// SetPanicOnFault), or a panic raised in bbolt's own code (its
// assertions, an index past one of its slices). It also says what in
// words.
func fromDamage(r any) (string, bool) {
	if f, ok := r.(interface {
		runtime.Error
		Addr() uintptr
	}); ok {
		return fmt.Sprintf("reading it faulted at %#x: a page points past the end of the file", f.Addr()), true
	}
	if panickedIn("go.etcd.io/bbolt") {
		return fmt.Sprintf("bbolt: %v", r), true
	}
	return "", false
}

// panickedIn reports whether the function that panicked (the first frame
// below runtime.gopanic that is not the runtime's) is in package pkg or
// one of its own. Called from a deferred function while the panic runs,
// the stack still holds the frames that panicked.
func panickedIn(pkg string) bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	inPanic := false
	for {
		fr, more := frames.Next()
		switch {
		case fr.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && strings.HasPrefix(fr.Function, "runtime."):
			// runtime.goPanicIndex and the like: the runtime raising it
		case inPanic:
			return strings.HasPrefix(fr.Function, pkg+".") || strings.HasPrefix(fr.Function, pkg+"/")
		}
		if !more {
			return false
		}
	}
}

// keyText is key k in hex for a message, its first 16 bytes and its
// length when longer: a damaged page can make a key megabytes long.
func keyText(k []byte) string {
	if len(k) <= 16 {
		return fmt.Sprintf("%x", k)
	}
	return fmt.Sprintf("%x… (%d bytes)", k[:16], len(k))
}
