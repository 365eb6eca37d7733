package state

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// BusyError is the error a Bolt operation returns (wrapped) when another
// process held the state file's lock for longer than Options.Timeout: the
// operation changed nothing. errors.Is(err, ErrBusy) is true for it.
type BusyError struct {
	Path   string        // the state file
	PID    int           // the lock holder as /proc/locks names it; 0 = unknown
	Waited time.Duration // how long the operation waited
}

// Error says "state is busy (held by pid N)", or "(held by another gssh)"
// when the holder is unknown, how long it waited, that nothing was stored,
// and that gssh --state-wait sets the wait.
func (e *BusyError) Error() string {
	who := "another gssh"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
	}
	msg := fmt.Sprintf("state is busy (held by %s)", who)
	if e.Waited > 0 {
		msg += fmt.Sprintf("; gave up after %s", e.Waited)
	}
	return msg + ": nothing was stored; run it again, or wait longer with --state-wait (such as --state-wait 2m)"
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// fileID is a file's device and inode as /proc/locks prints them.
type fileID struct {
	major, minor uint64
	ino          uint64
}

// parseLocks returns the pid of the first holder (not a waiter, "->") of a
// FLOCK lock on f in r, in the format of /proc/locks:
//
//	1: FLOCK  ADVISORY  WRITE 22850 fe:00:9977885 0 EOF
//	1: -> FLOCK  ADVISORY  WRITE 22851 fe:00:9977885 0 EOF
//
// (major and minor in hex, inode in decimal). It returns 0 when none.
func parseLocks(r io.Reader, f fileID) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue
		}
		parts := strings.Split(fields[5], ":")
		if len(parts) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(parts[0], 16, 64)
		minor, err2 := strconv.ParseUint(parts[1], 16, 64)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if (fileID{major, minor, ino}) == f {
			return pid
		}
	}
	return 0
}
