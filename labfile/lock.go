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

// flock is Flock of f's descriptor.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = Flock(fd, how) }); err != nil {
		return err
	}
	return ferr
}

// Flock is flock(2) of fd (syscall.LOCK_SH, LOCK_EX, with LOCK_NB or
// not; LOCK_UN), taken again when a signal interrupted it.
func Flock(fd uintptr, how int) error {
	for {
		if err := syscall.Flock(int(fd), how); err != syscall.EINTR {
			return err
		}
	}
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
