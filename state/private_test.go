package state_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/gssh/gssh/testenv"

	"github.com/gssh/gssh/state"
)

// TestLooseStateNotOurs: a state file others may read that this process
// cannot make private (another's) is refused, saying what to do: chmod
// it, give one's own, or share one queue as a lab does (gssh lab init).
func TestLooseStateNotOurs(t *testing.T) {
	testenv.NeedRoot(t, "the test plays another user (setfsuid)")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "state.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, memberUID, memberUID); err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		// This thread only, which ends with the goroutine (still locked).
		runtime.LockOSThread()
		syscall.Setfsuid(passUID)
		_, err := state.Open(path, state.Options{})
		got <- err
	}()
	err := <-got
	if err == nil || !strings.Contains(err.Error(), "may be read by others (mode 0644) and cannot be made private") ||
		!strings.Contains(err.Error(), "gssh lab init (docs/lab.md)") || strings.Contains(err.Error(), "comes later") {
		t.Errorf("Open: %v", err)
	}
}
