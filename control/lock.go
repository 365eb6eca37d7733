package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/labfile"
)

// ErrPassBusy means another pass holds the pass lock.
var ErrPassBusy = errors.New("another scheduling pass is running")

// LockPass takes the pass lock at path, waiting up to wait (at least one
// try). It returns the release function, or an error wrapping ErrPassBusy.
func LockPass(ctx context.Context, path string, wait time.Duration) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("pass lock: %w", err)
	}
	return lockPass(ctx, path, wait, 0o600)
}

// LockPassShared is LockPass in shared-lab mode, for the lab's
// directory lab: the lock is the pass account's file there, opened and
// checked as labfile.Dir.OpenFix does (no path a member controls is
// followed; an entry that is not gssh's is replaced, as the pass account
// or root, and report is told), and locked through that descriptor.
func LockPassShared(lab labfile.Dir, report func(labfile.Replaced)) func(context.Context, string, time.Duration) (func(), error) {
	return func(ctx context.Context, path string, wait time.Duration) (func(), error) {
		f, err := lab.OpenLock(path, report)
		if err != nil {
			return nil, fmt.Errorf("pass lock: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		switch err := labfile.Lock(wctx, f, syscall.LOCK_EX, 50*time.Millisecond); {
		case err == nil:
			return func() { f.Close() }, nil
		case errors.Is(err, labfile.ErrLocked) && ctx.Err() == nil:
			f.Close()
			if wait <= 0 {
				return nil, fmt.Errorf("%w (lock %s held)", ErrPassBusy, path)
			}
			return nil, fmt.Errorf("%w (lock %s held for more than %s)", ErrPassBusy, path, wait)
		default:
			f.Close()
			return nil, fmt.Errorf("pass lock %s: %w", path, cmp.Or(ctx.Err(), err))
		}
	}
}

func lockPass(ctx context.Context, path string, wait time.Duration, perm os.FileMode) (func(), error) {
	l := flock.New(path, flock.SetPermissions(perm))
	ok, err := l.TryLock()
	if err == nil && !ok && wait > 0 {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		ok, err = l.TryLockContext(ctx, 50*time.Millisecond)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("pass lock %s: %w", path, err)
	}
	if !ok && wait == 0 {
		return nil, fmt.Errorf("%w (lock %s held)", ErrPassBusy, path)
	}
	if !ok {
		return nil, fmt.Errorf("%w (lock %s held for more than %s)", ErrPassBusy, path, wait)
	}
	return func() { l.Unlock() }, nil
}
