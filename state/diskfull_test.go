package state

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// A full disk or quota is told as such however it reached gssh: the
// OS error of a page write, or bbolt's text of a failed grow ("file
// resize error: ...", which keeps no error value).
func TestDiskFullError(t *testing.T) {
	s := &Bolt{path: "/data/gssh/state.db"}
	for _, tt := range []struct {
		op    string
		err   error
		errno syscall.Errno
		want  string
	}{
		{"write", &fs.PathError{Op: "write", Path: s.path, Err: syscall.ENOSPC}, syscall.ENOSPC,
			"write state /data/gssh/state.db: no space left on device (the disk holding it is full): the change was not stored, and the file holds what it held before; free space on the filesystem of /data/gssh (df -h /data/gssh shows it) and run the command again"},
		{"write", fmt.Errorf("file resize error: %s", syscall.ENOSPC), syscall.ENOSPC,
			"write state /data/gssh/state.db: no space left on device (the disk holding it is full): the change was not stored, and the file holds what it held before; free space on the filesystem of /data/gssh (df -h /data/gssh shows it) and run the command again"},
		{"create", &fs.PathError{Op: "write", Path: "/data/gssh/.state-1.db", Err: syscall.EDQUOT}, syscall.EDQUOT,
			"create state /data/gssh/state.db: disk quota exceeded (your disk quota there is used up): no state file was made; free space on the filesystem of /data/gssh (df -h /data/gssh shows it) and run the command again"},
	} {
		err := s.fail(tt.op, tt.err)
		var fe *FileError
		if !errors.As(err, &fe) || !errors.Is(err, ErrDiskFull) || !errors.Is(err, tt.errno) {
			t.Errorf("%v: %#v, want a *FileError wrapping ErrDiskFull and %v", tt.err, err, tt.errno)
		}
		if err.Error() != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.err, err, tt.want)
		}
	}
	if err := s.fail("write", syscall.EACCES); errors.Is(err, ErrDiskFull) {
		t.Errorf("EACCES taken for a full disk: %v", err)
	}
}
