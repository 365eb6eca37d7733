package probe

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec"
)

// buildFakeHelper compiles testdata/fakehelper once per test binary.
var fakeHelperOnce struct {
	sync.Once
	path string
	err  error
}

func fakeHelper(t *testing.T) *HelperBinary {
	t.Helper()
	fakeHelperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gssh-fakehelper")
		if err != nil {
			fakeHelperOnce.err = err
			return
		}
		p := filepath.Join(dir, "gssh-helper")
		cmd := exec.Command("go", "build", "-o", p, "./testdata/fakehelper")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeHelperOnce.err = errors.New(string(out))
			return
		}
		fakeHelperOnce.path = p
	})
	if fakeHelperOnce.err != nil {
		t.Fatalf("build fake helper: %v", fakeHelperOnce.err)
	}
	bin, err := LoadHelperBinary(fakeHelperOnce.path)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// countingRunner is the local runner with its own HOME, counting pushes
// (the runs that write a copy) and runs.
type countingRunner struct {
	sshexec.Local
	mu           sync.Mutex
	runs, pushes int
}

func (c *countingRunner) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	c.mu.Lock()
	c.runs++
	if strings.Contains(cmd, "/.helper-XXXXXX") {
		c.pushes++
	}
	c.mu.Unlock()
	return c.Local.Run(ctx, host, cmd, stdin)
}

func newHost(t *testing.T, home string, mode string) *countingRunner {
	return &countingRunner{Local: sshexec.Local{Env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "FAKE_HELPER_MODE=" + mode}}}
}

type mapMemo map[string]string

func (m mapMemo) Get(host, sha string) (string, bool)           { r, ok := m[host+" "+sha]; return r, ok }
func (m mapMemo) Put(host, sha, reason string, _ time.Duration) { m[host+" "+sha] = reason }

// staticSource answers with a fixed snapshot (nvidia-smi's stand-in).
type staticSource Snapshot

func (s staticSource) Snapshot(context.Context) (Snapshot, error) { return Snapshot(s), nil }

func TestHelperPushOnceThenReuse(t *testing.T) {
	bin := fakeHelper(t)
	home := t.TempDir()
	run := newHost(t, home, "")
	src := Helper(run, "h", bin, mapMemo{}, false)
	s, err := src.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourceNVML || s.State != HostOK || len(s.GPUs) != 1 || *s.GPUs[0].MemTotal != 80<<30 || s.Driver != "535.161.08" {
		t.Fatalf("snapshot %+v", s)
	}
	if h := s.HostInfo; h == nil || !eqInt(h.CPUs, 3) || len(h.CPUIDs) != 3 || h.CPUIDs[2] != 5 || !eqU64(h.MemTotal, 64<<30) || !eqU64(h.MemAvailable, 60<<30) {
		t.Errorf("host facts %+v, want the helper's", h)
	}
	path := filepath.Join(home, ".cache", "gssh", "helper-"+bin.SHA256)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("pushed copy: %v %v", fi, err)
	}
	if run.pushes != 1 {
		t.Errorf("pushes = %d, want 1", run.pushes)
	}
	if _, err := src.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if run.pushes != 1 || run.runs != 4 {
		t.Errorf("second probe: pushes %d runs %d; want 1 push, 4 runs (missing, push, run; then run)", run.pushes, run.runs)
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".cache", "gssh", ".helper-*")); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

// A copy truncated on the worker fails to start; its hash differs, so it is
// pushed again.
func TestHelperTruncatedIsPushedAgain(t *testing.T) {
	bin := fakeHelper(t)
	home := t.TempDir()
	run := newHost(t, home, "")
	src := Helper(run, "h", bin, mapMemo{}, false)
	if _, err := src.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ".cache", "gssh", "helper-"+bin.SHA256)
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	s, err := src.Snapshot(context.Background())
	if err != nil || s.Source != SourceNVML {
		t.Fatalf("after truncation: %+v %v", s, err)
	}
	if run.pushes != 2 {
		t.Errorf("pushes = %d, want 2", run.pushes)
	}
}

// Two controllers pushing at once: both succeed and the copy is whole.
func TestHelperConcurrentPush(t *testing.T) {
	bin := fakeHelper(t)
	home := t.TempDir()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Helper(newHost(t, home, ""), "h", bin, nil, false).Snapshot(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(home, ".cache", "gssh", "helper-"+bin.SHA256))
	if err != nil || len(b) != len(bin.Data) {
		t.Errorf("copy: %d bytes, %v", len(b), err)
	}
}

func TestHelperFallbacks(t *testing.T) {
	bin := fakeHelper(t)
	smi := staticSource{Host: "h", State: HostDriverNotLoaded, Source: SourceSMI, Error: "NVIDIA-SMI has failed", GPUs: []GPU{}}
	cases := []struct {
		name, mode, home string
		arch             string
		want             string
		remembered       bool
	}{
		{name: "other arch", arch: "aarch64", want: "the host is x86_64; this gssh-helper is built for aarch64", remembered: true},
		{name: "no NVML", mode: "nolib", want: "NVML not found on the host", remembered: true},
		{name: "glibc too old", mode: "glibc", want: "glibc is too old", remembered: true},
		{name: "garbage", mode: "garbage", want: "not a gssh.helper/v1 document", remembered: true},
		{name: "home not writable", home: "/dev/null/home", want: "cannot write the helper to ~/.cache/gssh on the host", remembered: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := *bin
			if c.arch != "" {
				b.Arch = c.arch
			}
			home := c.home
			if home == "" {
				home = t.TempDir()
			}
			memo := mapMemo{}
			run := newHost(t, home, c.mode)
			src := Fallback(Helper(run, "h", &b, memo, false), smi)
			s, err := src.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Source != SourceSMI || s.State != HostDriverNotLoaded || !strings.Contains(s.SourceWhy, c.want) {
				t.Fatalf("snapshot source %q why %q state %q; want nvidia-smi because %q", s.Source, s.SourceWhy, s.State, c.want)
			}
			runs := run.runs
			s, _ = src.Snapshot(context.Background())
			if _, ok := memo.Get("h", b.SHA256); ok != c.remembered || (c.remembered && run.runs != runs) {
				t.Errorf("remembered %v, runs %d then %d: the reason must be kept, not retried", ok, runs, run.runs)
			}
			if !strings.Contains(s.SourceWhy, c.want) {
				t.Errorf("second probe why %q", s.SourceWhy)
			}
		})
	}
}

func TestHelperBogusProcessesFromSMI(t *testing.T) {
	bin := fakeHelper(t)
	used := uint64(1 << 30)
	smi := staticSource{Host: "h", State: HostOK, Source: SourceSMI, GPUs: []GPU{{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000",
		Health: HealthOK, ProcsKnown: true, Procs: []Proc{{PID: 27513, Name: "python3", UsedBytes: &used}}}}}
	s, err := Fallback(Helper(newHost(t, t.TempDir(), "bogus"), "h", bin, nil, false), smi).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourceNVML || !s.GPUs[0].ProcsKnown || len(s.GPUs[0].Procs) != 1 || s.GPUs[0].Procs[0].PID != 27513 ||
		!strings.Contains(s.SourceWhy, "bogus") {
		t.Errorf("snapshot %+v", s)
	}
}

// The local host runs the helper where it lies, without pushing.
func TestHelperLocal(t *testing.T) {
	bin := fakeHelper(t)
	home := t.TempDir()
	run := newHost(t, home, "")
	s, err := Helper(run, "ctl", bin, nil, true).Snapshot(context.Background())
	if err != nil || s.Source != SourceNVML {
		t.Fatalf("%+v %v", s, err)
	}
	if run.pushes != 0 {
		t.Errorf("pushed %d times", run.pushes)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache")); err == nil {
		t.Error("local run wrote a cache")
	}
}

func TestLoadHelperBinary(t *testing.T) {
	bin := fakeHelper(t)
	if bin.Arch != "x86_64" && bin.Arch != "aarch64" || len(bin.SHA256) != 64 {
		t.Errorf("%+v", bin.Arch)
	}
	if _, err := LoadHelperBinary("testdata/fake-nvidia-smi"); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a shell script: %v", err)
	}
}
