package nvmlfake

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// BuildHelper compiles the real gssh-helper (cgo, go-nvml) once per test
// binary, as `make helper` does, and returns its path. Run it with
// LD_LIBRARY_PATH=Build(tb) and GSSH_FAKE_SMI_DIR set to serve a fixture.
func BuildHelper(tb testing.TB) string {
	tb.Helper()
	Build(tb) // the same toolchain needs: gcc
	helperOnce.Do(func() {
		src, err := sourcePath()
		if err != nil {
			helperErr = err
			return
		}
		root := filepath.Join(filepath.Dir(src), "..", "..", "..")
		dir, err := os.MkdirTemp("", "gssh-helper-test")
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(dir, "gssh-helper")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", helperPath, "./cmd/gssh-helper")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("build gssh-helper: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		tb.Fatalf("nvmlfake: %v", helperErr)
	}
	return helperPath
}
