package state

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gssh/gssh/labfile"
)

// Op is one operation of a Bolt store as Options.Trace sees it, once
// the operation has released the file.
type Op struct {
	// Name is the Bolt method that ran it ("Submit", "Update", "Active",
	// "Open", ...).
	Name  string
	Write bool // a write transaction (exclusive lock); else a read (shared)
	// Waited is the time spent waiting for the file lock held by others;
	// Held the time from taking it to releasing it: bbolt's open (map,
	// freelist), the transaction, its commit (two fdatasyncs for a
	// write) and the close.
	Waited, Held time.Duration
	// Err is what the operation returned (nil: it succeeded); a
	// *BusyError when it gave up waiting.
	Err error
}

// Waiting for the lock. bbolt's own wait (its Options.Timeout) tries the
// flock every 50 ms: a waiting process misses every release that the
// holder follows with a new lock within 50 ms, which a pass's series of
// short transactions does (measured: a second process waited 0.4 s on
// the median and up to 3 s beside a loop of updates; a jittered backoff
// from 1 to 20 ms still waited 0.1-0.4 s, up to 1.2 s). Bolt takes the
// lock itself instead (bbolt's OpenFile hook: bbolt's own flock of the
// same open file then succeeds at once), with a blocking flock: the
// kernel wakes the waiters as the lock is released, so a waiter gets it
// at the next release (0.45 ms on the median, at most 18 ms, beside the
// same loop), and waiting costs no CPU. The blocking call runs in a
// goroutine of its own, so that the wait can end (Options.Timeout,
// Options.Cancel) while the call is still blocked: the file is then
// closed once it returns, releasing what it took.

// lockedFile says how taking the lock of an operation's file went.
type lockedFile struct {
	waited time.Duration
	at     time.Time // when the lock was taken; zero: never
}

// openLocked is bbolt's OpenFile hook: it opens name as bbolt asks (flag,
// mode) and takes its flock, exclusive or shared, waiting for it as
// waitLock does. It records in lf what the wait took.
func (s *Bolt) openLocked(lf *lockedFile, exclusive bool) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, mode os.FileMode) (*os.File, error) {
		how := syscall.LOCK_SH
		if exclusive {
			how = syscall.LOCK_EX
		}
		for {
			f, err := s.openFile(name, flag, mode)
			if err != nil {
				return nil, err
			}
			if err := s.waitLock(f, how, lf); err != nil {
				return nil, err
			}
			// gssh state restore renames a new file over the one this
			// waited for: the lock of the old one guards nothing now.
			if replaced(f, name) {
				f.Close()
				continue
			}
			return f, nil
		}
	}
}

// replaced reports whether name is no longer the file f has open.
func replaced(f *os.File, name string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(name)
	return err == nil && !os.SameFile(fi, now)
}

// waitLock takes flock how (LOCK_SH or LOCK_EX) of f, waiting for it up
// to s.timeout (negative: one try) or until s.cancel closes. Unless it
// returns nil, it has closed f (or f is closed as the blocked flock
// returns). Errors: a *BusyError when the lock was still held by another
// process at the end of the wait; an error wrapping context.Canceled when
// s.cancel closed first; the OS error of flock.
func (s *Bolt) waitLock(f *os.File, how int, lf *lockedFile) error {
	start := time.Now()
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = flock(fd, how|syscall.LOCK_NB) }); err != nil {
		f.Close()
		return err
	}
	switch {
	case ferr == nil:
		lf.at = time.Now()
		return nil
	case ferr != syscall.EWOULDBLOCK:
		f.Close()
		return &os.PathError{Op: "flock", Path: s.path, Err: ferr}
	case s.timeout < 0:
		lf.waited = time.Since(start)
		f.Close()
		return &BusyError{Path: s.path, PID: lockHolder(s.path)}
	}
	got := make(chan error, 1)
	go func() {
		var ferr error
		err := rc.Control(func(fd uintptr) { ferr = flock(fd, how) })
		got <- cmpErr(err, ferr)
	}()
	timer := time.NewTimer(s.timeout - time.Since(start))
	defer timer.Stop()
	select {
	case err := <-got:
		lf.waited = time.Since(start)
		if err != nil {
			f.Close()
			return &os.PathError{Op: "flock", Path: s.path, Err: err}
		}
		lf.at = time.Now()
		return nil
	case <-timer.C:
		lf.waited = time.Since(start)
		f.Close() // really closed as the blocked flock returns: what it took is released then
		return &BusyError{Path: s.path, PID: lockHolder(s.path), Waited: s.timeout}
	case <-s.cancel:
		lf.waited = time.Since(start)
		f.Close()
		return fmt.Errorf("interrupted while waiting for the lock (nothing was stored): %w", context.Canceled)
	}
}

// flock is flock(2) of fd, taken again when a signal interrupted it.
func flock(fd uintptr, how int) error { return labfile.Flock(fd, how) }

// cmpErr is the first error that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// trace reports one operation to the Options.Trace hook.
func (s *Bolt) trace(write bool, lf lockedFile, err error) {
	op := Op{Name: callerName(), Write: write, Waited: lf.waited, Err: err}
	if !lf.at.IsZero() {
		op.Held = time.Since(lf.at)
	}
	s.onOp(op)
}

// callerName is the name of the exported Bolt method (or Open) on the
// stack: the operation a trace is of, or "?".
func callerName() string {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if i := strings.Index(fr.Function, "state.(*Bolt)."); i >= 0 {
			name := fr.Function[i+len("state.(*Bolt)."):]
			if name != "" && name[0] >= 'A' && name[0] <= 'Z' {
				return name
			}
		}
		if strings.HasSuffix(fr.Function, "/state.Open") {
			return "Open"
		}
		if !more {
			return "?"
		}
	}
}
