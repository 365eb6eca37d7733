package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SkewedClock returns the session environment (for SSHDOptions.SetEnv)
// that shifts a fleet host's clock by offset ("+5h", "-3h": libfaketime's
// FAKETIME syntax) for everything its sessions run: Debian's libfaketime
// (package faketime) preloaded. The test is skipped when libfaketime is
// missing, except under CI=true (.ci/run installs it), where it fails.
//
// libfaketime 0.9.10 keeps a semaphore and a shared memory segment for a
// process and its children (FAKETIME_SHARED), which the first process of
// a tree creates and removes when it exits: a detached child that
// outlives it (a job's run.sh) then dies in its own start-up, failing to
// open them. SkewedClock therefore creates the pair once, in a process
// that execs away before its exit handler can remove it, hands it to
// every session in FAKETIME_SHARED, and removes it at Cleanup.
func SkewedClock(tb testing.TB, offset string) map[string]string {
	tb.Helper()
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(libs) == 0 {
		if os.Getenv("CI") == "true" {
			tb.Fatal("sshtest: libfaketime not found (CI=true, so no skip): apt-get install -y faketime")
		}
		tb.Skip("sshtest: libfaketime not found; apt-get install -y faketime to run this test (with CI=true this fails instead)")
	}
	cmd := exec.Command("/bin/sh", "-c", `printf '%s' "$FAKETIME_SHARED"; exec /bin/true`)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=" + libs[0], "FAKETIME=" + offset}
	out, err := cmd.Output()
	shared := strings.Fields(string(out))
	if err != nil || len(shared) != 2 {
		tb.Fatalf("sshtest: libfaketime's shared memory: %q, %v", out, err)
	}
	tb.Cleanup(func() {
		os.Remove("/dev/shm/sem." + strings.TrimPrefix(shared[0], "/"))
		os.Remove("/dev/shm/" + strings.TrimPrefix(shared[1], "/"))
	})
	return map[string]string{"LD_PRELOAD": libs[0], "FAKETIME": offset, "FAKETIME_SHARED": shared[0] + " " + shared[1]}
}
