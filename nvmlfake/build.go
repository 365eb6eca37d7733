// Package nvmlfake builds the fake libnvidia-ml.so.1 of
// probe/testdata/fakenvml/fakenvml.c for tests. The fake answers through the
// NVML C ABI from the fleet fixture named by GSSH_FAKE_SMI_DIR, the same
// files the fake nvidia-smi replays, so code that dlopens NVML (go-nvml,
// gssh-helper) runs end to end without a GPU.
//
// A process binds NVML's symbols to the first copy of the library it loads
// and keeps that copy (go-nvml calls NVML through lazily bound symbols of
// the test binary), so load one path per process and switch fixtures by
// setting GSSH_FAKE_SMI_DIR before each Init: the fake reads the directory
// again at every nvmlInit that follows a full nvmlShutdown.
package nvmlfake

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// LibName is the file Build writes: the soname go-nvml dlopens by default.
const LibName = "libnvidia-ml.so.1"

// EnvFixtureDir names the fleet fixture directory the fake reads at nvmlInit.
const EnvFixtureDir = "GSSH_FAKE_SMI_DIR"

// Source is the fake's C source, relative to the module root.
const Source = "probe/testdata/fakenvml/fakenvml.c"

var cflags = []string{"-shared", "-fPIC", "-O2"}

var (
	once     sync.Once
	builtDir string
	buildErr error
)

// Build compiles the fake with gcc (once per test binary) and returns the
// directory holding LibName: put it on LD_LIBRARY_PATH of a child process,
// or pass filepath.Join(dir, LibName) to nvml.WithLibraryPath. Every call
// in a process returns the same directory. Without gcc the test is skipped,
// or fails when CI=true.
func Build(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("nvmlfake: gcc is needed to build the fake libnvidia-ml.so.1: %v", err)
		}
		tb.Skipf("nvmlfake: no gcc to build the fake libnvidia-ml.so.1: %v", err)
	}
	once.Do(func() { builtDir, buildErr = build() })
	if buildErr != nil {
		tb.Fatalf("nvmlfake: %v", buildErr)
	}
	return builtDir
}

// build writes the library under the temp directory, in a folder named by
// the source's hash: a path that outlives any one test (the library stays
// mapped), is shared by concurrent test binaries and changes with the source.
func build() (string, error) {
	src, err := sourcePath()
	if err != nil {
		return "", err
	}
	code, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.Join(cflags, " ") + "\x00" + string(code)))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("gssh-fakenvml-%d-%s", os.Getuid(), hex.EncodeToString(sum[:8])))
	lib := filepath.Join(dir, LibName)
	if _, err := os.Stat(lib); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, LibName+".*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append(append([]string{}, cflags...), "-o", tmp.Name(), src)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// Rename is atomic: a concurrent test binary sees no half-written file.
	if err := os.Rename(tmp.Name(), lib); err != nil {
		return "", err
	}
	return dir, nil
}

// SourcePath returns the absolute path of fakenvml.c.
func SourcePath(tb testing.TB) string {
	tb.Helper()
	p, err := sourcePath()
	if err != nil {
		tb.Fatalf("nvmlfake: %v", err)
	}
	return p
}

// sourcePath finds fakenvml.c next to this file, or (under -trimpath) in
// the module root above the working directory.
func sourcePath() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", Source)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, Source)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find " + Source + " above the working directory")
		}
		dir = parent
	}
}
