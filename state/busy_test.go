package state

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseLocks(t *testing.T) {
	const locks = `1: POSIX  ADVISORY  WRITE 100 fe:00:9977885 0 EOF
2: -> FLOCK  ADVISORY  WRITE 200 fe:00:9977885 0 EOF
3: FLOCK  ADVISORY  WRITE 300 fe:01:9977885 0 EOF
4: FLOCK  ADVISORY  READ  400 103:1f:9977885 0 EOF
5: FLOCK  ADVISORY  WRITE 500 fe:00:9977885 0 EOF
6: OFDLCK ADVISORY  READ  -1 00:06:9 0 EOF
garbage
`
	for _, tc := range []struct {
		f    fileID
		want int
	}{
		{fileID{0xfe, 0, 9977885}, 500}, // POSIX lock and waiter skipped
		{fileID{0xfe, 1, 9977885}, 300},
		{fileID{0x103, 0x1f, 9977885}, 400},
		{fileID{0xfe, 0, 1}, 0},
		{fileID{0, 6, 9}, 0},
	} {
		if got := parseLocks(strings.NewReader(locks), tc.f); got != tc.want {
			t.Errorf("parseLocks(%+v) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

func TestBusyError(t *testing.T) {
	err := error(&BusyError{Path: "/x", PID: 42, Waited: 2 * time.Second})
	if !errors.Is(err, ErrBusy) {
		t.Error("BusyError is not ErrBusy")
	}
	if got, want := err.Error(), "state is busy (held by pid 42); gave up after 2s: nothing was stored; run it again, or wait longer with --state-wait (such as --state-wait 2m)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&BusyError{Path: "/x"}).Error(); !strings.HasPrefix(got, "state is busy (held by another gssh): nothing was stored") {
		t.Errorf("unknown holder: Error() = %q", got)
	}
}
