// Package testenv is what tests share about the machine they run on.
package testenv

import (
	"os"
	"testing"
)

// Need skips t for want of what format says (root, a tool), except under
// CI=true, where what is missing is a missing install step in .ci/run:
// there it fails t instead.
func Need(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true, so no skip)", args...)
	}
	t.Skipf(format, args...)
}

// NeedRoot is Need for a test that must run as root (it chowns files to
// other uids, or makes files only root may own).
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Need(t, "%s: run it as root", why)
	}
}
