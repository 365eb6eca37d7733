package probe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec"
)

// collectFrames runs s until n frames came (then stops it) or it ended,
// and returns the frames and its error.
func collectFrames(t *testing.T, s Streamer, every time.Duration, n int, after func(int)) ([]Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []Snapshot
	err := s.Stream(ctx, every, func(snap Snapshot) {
		got = append(got, snap)
		if after != nil {
			after(len(got))
		}
		if len(got) == n {
			cancel()
		}
	})
	return got, err
}

// TestSMIStream: each frame of nvidia-smi's stream is the snapshot a
// probe of the host gives, and stopping the stream stops its shell.
func TestSMIStream(t *testing.T) {
	host := fleetHost(t, "a100x4")
	want, err := SMI(host, "h").Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := collectFrames(t, SMIStream(sshexec.Local{Env: host.env}, "h", nil, "no helper"), 100*time.Millisecond, 3, nil)
	if !errors.Is(err, context.Canceled) || len(got) != 3 {
		t.Fatalf("%d frames, error %v; want 3 and the stop", len(got), err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("3 frames 100ms apart in %v", took)
	}
	for i, s := range got {
		if s.SourceWhy != "no helper" {
			t.Errorf("frame %d: SourceWhy %q", i, s.SourceWhy)
		}
		s.SourceWhy = ""
		if s.State != want.State || len(s.GPUs) != len(want.GPUs) || *s.GPUs[0].MemUsed != *want.GPUs[0].MemUsed || len(s.GPUs[1].Procs) != 2 || s.HostInfo == nil {
			t.Errorf("frame %d: %+v\nwant %+v", i, s, want)
		}
	}
}

// TestSMIStreamStall: a stream whose nvidia-smi hangs after its first
// frame is called stalled after two intervals (at least a second), and
// the hung nvidia-smi ends with the stream; so does a probe's, cut at its
// deadline.
func TestSMIStreamStall(t *testing.T) {
	dir := t.TempDir()
	src, _ := filepath.Abs("testdata/fleet/a100x4")
	if out, err := exec.Command("cp", "-r", src+"/.", dir).CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	host := fakeHost(t, dir)
	var stalledAt time.Time
	got, err := collectFrames(t, SMIStream(sshexec.Local{Env: host.env}, "h", nil, ""), 100*time.Millisecond, 100, func(n int) {
		if n == 1 {
			os.WriteFile(filepath.Join(dir, "delay"), []byte("31.7\n"), 0o644)
			stalledAt = time.Now()
		}
	})
	took := time.Since(stalledAt)
	if !errors.Is(err, ErrStalled) || len(got) < 1 || len(got) > 2 {
		t.Fatalf("%d frames, error %v; want 1 or 2 and a stall", len(got), err)
	}
	// The watchdog counts from the last frame, which came a moment before
	// the callback wrote the delay (on a loaded machine, more than one).
	if took < 500*time.Millisecond || took > 15*time.Second {
		t.Errorf("stall found %v after the hang (want 1s, StallAfter)", took)
	}
	if !strings.Contains(err.Error(), "h: the GPU stream stalled: no frame for 1s after") {
		t.Errorf("error %q", err)
	}
	waitGone(t, "sleep 31.7")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := SMI(sshexec.Local{Env: host.env}, "h").Snapshot(ctx); err == nil {
		t.Fatal("a probe of a hung nvidia-smi answered")
	}
	waitGone(t, "sleep 31.7")
}

// waitGone waits up to 10 s for the processes whose command line is args
// to end, and fails the test if they do not.
func waitGone(t *testing.T, args string) {
	t.Helper()
	for range 200 {
		if exec.Command("pgrep", "-x", "-f", args).Run() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("%q still runs", args)
}

// TestSMIStreamRejected: a frame in which nvidia-smi rejects a field ends
// the stream with the rejection, for a probe to learn the fields.
func TestSMIStreamRejected(t *testing.T) {
	host := fleetHost(t, "a100x4")
	env := append(host.env, "GSSH_FAKE_SMI_DRIVER=418")
	_, err := collectFrames(t, SMIStream(sshexec.Local{Env: env}, "h", nil, ""), 100*time.Millisecond, 3, nil)
	var rej *RejectedFieldError
	if !errors.As(err, &rej) || rej.Field != "mig.mode.current" {
		t.Fatalf("error %v; want the rejected field", err)
	}
	memo := &fieldMemo{}
	memo.PutFields("h", SMIFields{Driver: "418.87.01", Missing: []string{"mig.mode.current"}}, time.Hour)
	got, err := collectFrames(t, SMIStream(sshexec.Local{Env: env}, "h", memo, ""), 100*time.Millisecond, 2, nil)
	if !errors.Is(err, context.Canceled) || len(got) != 2 || strings.Join(got[0].MissingFields, ",") != "mig.mode.current" {
		t.Fatalf("with the fields learnt: %d frames, error %v", len(got), err)
	}
}

// TestHelperStream: the helper's documents, one per line, are the
// frames; a host without the copy and a helper that stalls are told.
func TestHelperStream(t *testing.T) {
	bin := fakeHelper(t)
	run := func(mode string) sshexec.Local {
		return sshexec.Local{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "FAKE_HELPER_MODE=" + mode}}
	}
	got, err := collectFrames(t, HelperStream(run("ok"), "h", bin, nil, true), 100*time.Millisecond, 3, nil)
	if !errors.Is(err, context.Canceled) || len(got) != 3 {
		t.Fatalf("%d frames, error %v", len(got), err)
	}
	if g := got[2]; g.State != HostOK || g.Source != SourceNVML || len(g.GPUs) != 1 || g.HostInfo == nil {
		t.Errorf("frame: %+v", g)
	}
	if _, err := collectFrames(t, HelperStream(run("ok"), "h", bin, nil, false), 100*time.Millisecond, 3, nil); !errors.Is(err, ErrHelperMissing) {
		t.Errorf("no copy on the host: %v", err)
	}
	// The copy pushed to the host's cache runs there with -watch.
	pushed := run("ok")
	home := strings.TrimPrefix(pushed.Env[1], "HOME=")
	if err := os.MkdirAll(filepath.Join(home, ".cache", "gssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", bin.Path, filepath.Join(home, ".cache", "gssh", "helper-"+bin.SHA256)).CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	if got, err := collectFrames(t, HelperStream(pushed, "h", bin, nil, false), 100*time.Millisecond, 2, nil); !errors.Is(err, context.Canceled) || len(got) != 2 {
		t.Errorf("the host's copy: %d frames, %v", len(got), err)
	}
	var hu *HelperUnusable
	if _, err := collectFrames(t, HelperStream(run("nolib"), "h", bin, nil, true), 100*time.Millisecond, 3, nil); !errors.As(err, &hu) || !strings.Contains(hu.Reason, "NVML not found") {
		t.Errorf("no NVML: %v", err)
	}
	if _, err := collectFrames(t, HelperStream(run("bogus"), "h", bin, nil, true), 100*time.Millisecond, 3, nil); !errors.Is(err, ErrProcsBogus) {
		t.Errorf("bogus records: %v", err)
	}
	got, err = collectFrames(t, HelperStream(run("stall"), "h", bin, nil, true), 100*time.Millisecond, 3, nil)
	if !errors.Is(err, ErrStalled) || len(got) != 1 {
		t.Errorf("stalled helper: %d frames, %v", len(got), err)
	}
}
