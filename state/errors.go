package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
)

// FileError is a failure of the state file itself (it cannot be opened,
// read, written or trusted), as opposed to a job the store does not have:
// `gssh` exits 3 for it. Err wraps ErrBusy, ErrNoState, ErrDamaged,
// ErrCorrupt, ErrNewerSchema, ErrDiskFull (a write or a creation that
// found no space: nothing was stored) or the OS error.
type FileError struct {
	Op   string // "open", "create", "read", "write"
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Op + " state " + e.Path + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// fail wraps err as a *FileError of op on s's file; a full disk or
// quota is told as such (see diskFull).
func (s *Bolt) fail(op string, err error) error {
	if errno, ok := noSpace(err); ok {
		err = &diskFull{op: op, dir: filepath.Dir(s.path), errno: errno, err: err}
	}
	return &FileError{Op: op, Path: s.path, Err: err}
}

// noSpace reports whether err is a full disk (ENOSPC) or quota (EDQUOT),
// and which. bbolt wraps the errors of growing its file (truncate, fsync)
// as text ("file resize error: ..."), so the text is read too.
func noSpace(err error) (syscall.Errno, bool) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, errno) || strings.Contains(err.Error(), errno.Error()) {
			return errno, true
		}
	}
	return 0, false
}

// diskFull is a write (or the creation) of the state file that failed for
// want of space: bbolt writes a transaction's pages, then its meta page,
// and rolls back on the first failure, so the file holds what it held
// before (an Open that must write first, or a commit, alike); a file being
// created is removed.
type diskFull struct {
	op    string // as FileError's
	dir   string // the state file's directory
	errno syscall.Errno
	err   error // as the OS or bbolt gave it
}

func (e *diskFull) Error() string {
	why := "the disk holding it is full"
	if e.errno == syscall.EDQUOT {
		why = "your disk quota there is used up"
	}
	kept := "the change was not stored, and the file holds what it held before"
	if e.op == "create" {
		kept = "no state file was made"
	}
	return fmt.Sprintf("%s (%s): %s; free space on the filesystem of %s (df -h %s shows it) and run the command again", e.errno, why, kept, e.dir, e.dir)
}

// Unwrap makes errors.Is match ErrDiskFull, the errno and what the OS or
// bbolt returned.
func (e *diskFull) Unwrap() []error { return []error{ErrDiskFull, e.errno, e.err} }

// isOSError reports whether err came from the OS (open, stat, mmap, I/O)
// rather than from what bbolt read in the file.
func isOSError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// corruptAdvice ends every ErrCorrupt message: what the user can do.
const corruptAdvice = "; restore it from a backup, or move it aside to start an empty queue (jobs it tracked keep running on the workers, untracked)"

// corrupt returns an ErrCorrupt error naming the file and what is wrong.
func (s *Bolt) corrupt(format string, args ...any) error {
	return s.fail("open", fmt.Errorf("%w: %s%s", ErrCorrupt, fmt.Sprintf(format, args...), corruptAdvice))
}
