package labfile

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// ErrLocked means the lock was still held by another process when the
// wait ended.
var ErrLocked = errors.New("held by another process")

// Lock takes flock how (syscall.LOCK_EX or LOCK_SH) of f, an open file
// Open checked, trying every poll until ctx ends (a done ctx: one try).
// Errors: ErrLocked when the wait ended first; the OS error of flock.
func Lock(ctx context.Context, f *os.File, how int, poll time.Duration) error {
	for {
		err := flock(f, how|syscall.LOCK_NB)
		if err != syscall.EWOULDBLOCK {
			return err
		}
		select {
		case <-ctx.Done():
			return ErrLocked
		case <-time.After(poll):
		}
	}
}

// flock is flock(2) of f, taken again when a signal interrupted it.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), how); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// TryLock takes flock how of f if it is free: false when another
// process holds it.
func TryLock(f *os.File, how int) (bool, error) {
	switch err := flock(f, how|syscall.LOCK_NB); err {
	case nil:
		return true, nil
	case syscall.EWOULDBLOCK:
		return false, nil
	default:
		return false, err
	}
}
