package fleet_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
)

// A stream that ends before its first frame is followed by a probe that
// fixes what it can: here an R418 nvidia-smi rejects a field of the
// stream's query, the probe learns the fields it knows, and the stream
// started again gives frames.
func TestWatchOldDriver(t *testing.T) {
	dir := t.TempDir()
	bin := t.TempDir()
	for target, as := range map[string]string{"fake-nvidia-smi": "nvidia-smi", "fake-ps": "ps"} {
		abs, _ := filepath.Abs("../probe/testdata/" + target)
		if err := os.Symlink(abs, filepath.Join(bin, as)); err != nil {
			t.Fatal(err)
		}
	}
	fixture, _ := filepath.Abs("../probe/testdata/fleet/v100-r418")
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true}}}
	f := newFleet(t, fleet.Options{Inventory: inv, SSH: fakeResolver{}, HelperPath: filepath.Join(bin, "no-helper"), CacheDir: dir,
		Environ: []string{"PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + fixture, "GSSH_FAKE_SMI_DRIVER=418"}})
	stop := f.Watch(context.Background(), 100*time.Millisecond, nil)
	defer stop()
	if !waitFor(10*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Second); return ok }) {
		t.Fatal("no frame within 10s: the probe after the rejected field did not learn the fields")
	}
	snap, _, _ := f.Streamed("ctl", time.Second)
	if len(snap.GPUs) == 0 || !slices.Equal(snap.MissingFields, []string{"mig.mode.current"}) {
		t.Errorf("frame %+v", snap)
	}
}

// streamHost is a fleet of one local host whose nvidia-smi is the fake
// replaying a copy of fixture a100x4 (in the returned directory), with no
// helper: it streams nvidia-smi.
func streamHost(t *testing.T) (*fleet.Fleet, string) {
	t.Helper()
	dir := t.TempDir()
	src, _ := filepath.Abs("../probe/testdata/fleet/a100x4")
	if out, err := exec.Command("cp", "-r", src+"/.", dir).CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	bin := t.TempDir()
	for target, as := range map[string]string{"fake-nvidia-smi": "nvidia-smi", "fake-ps": "ps"} {
		abs, _ := filepath.Abs("../probe/testdata/" + target)
		if err := os.Symlink(abs, filepath.Join(bin, as)); err != nil {
			t.Fatal(err)
		}
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true}}}
	f := newFleet(t, fleet.Options{Inventory: inv, SSH: fakeResolver{}, HelperPath: filepath.Join(bin, "no-helper"),
		Environ: []string{"PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + dir}})
	return f, dir
}

// waitFor polls cond every 20ms for up to d: whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestWatch: a watched host is answered from its stream, without a probe;
// a stream that stalls (nvidia-smi hangs) stops standing for the host
// within two intervals (at least a second), and is started again.
func TestWatch(t *testing.T) {
	f, dir := streamHost(t)
	var mu sync.Mutex
	var told []string
	stop := f.Watch(context.Background(), 100*time.Millisecond, func(problem bool, text string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, fmt.Sprint(problem, " ", text))
	})
	defer stop()
	if !waitFor(10*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Second); return ok }) {
		t.Fatal("no frame within 10s")
	}
	h, _ := f.Lookup("ctl")
	r := f.Probe(context.Background(), []inventory.Host{h}, fleet.ProbeOptions{MaxAge: time.Second})[0]
	if !r.Streamed || len(r.Snapshot.GPUs) != 4 || r.Snapshot.Host != "ctl" || !strings.Contains(r.Snapshot.SourceWhy, "no-helper") || time.Since(r.At) > 10*time.Second {
		t.Fatalf("report %+v", r)
	}
	if r := f.Probe(context.Background(), []inventory.Host{h}, fleet.ProbeOptions{})[0]; r.Streamed || len(r.Snapshot.GPUs) != 4 {
		t.Errorf("MaxAge 0 is a probe: %+v", r)
	}

	// nvidia-smi hangs for 3s: the stream is stalled after a second
	// without a frame, its last frame no longer stands for the host, and
	// frames come again once nvidia-smi answers.
	// (On a loaded machine the stream may itself have stalled a moment:
	// wait for a frame to count from.)
	var last time.Time
	if !waitFor(10*time.Second, func() bool { _, at, ok := f.Streamed("ctl", time.Second); last = at; return ok }) {
		t.Fatal("no frame within 10s after the probe")
	}
	mu.Lock()
	mark := len(told)
	mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "delay"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hung := time.Now()
	if !waitFor(5*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Minute); return !ok }) {
		t.Fatal("the stalled stream still stands for the host after 5s")
	}
	// The watchdog counts from the last frame, which came before the hang.
	if took := time.Since(last); took < time.Second || took > 10*time.Second {
		t.Errorf("stall noticed %v after the last frame; want about 1s", took)
	}
	os.Remove(filepath.Join(dir, "delay"))
	if !waitFor(15*time.Second, func() bool { _, at, ok := f.Streamed("ctl", time.Second); return ok && at.After(hung) }) {
		t.Fatal("no frame within 15s of the hang's end")
	}
	stop()
	if _, _, ok := f.Streamed("ctl", time.Minute); ok {
		t.Error("a frame stands after the streams stopped")
	}
	// The log says each stall once, then the stream's return: the hang
	// gave one such pair (a loaded machine may add pairs of its own).
	mu.Lock()
	defer mu.Unlock()
	if len(told) < mark+2 || len(told)%2 != 0 {
		t.Fatalf("log %q: want pairs of a stall and a return, one after the hang", told)
	}
	for i := 0; i < len(told); i += 2 {
		if !strings.HasPrefix(told[i], "true ctl: the GPU stream stalled: no frame for 1s after ") ||
			!strings.HasSuffix(told[i], "; each pass probes the host until it streams again") || told[i+1] != "false ctl: the GPU stream runs again" {
			t.Errorf("log %q", told)
		}
	}
}

// TestWatchHungProbe: on a watched host whose stream stalled, a probe
// that hangs stands for the host until a frame comes again: the next
// probe asking for MaxAge gets its report without a command run, a
// probe asking for none (--fresh) probes.
func TestWatchHungProbe(t *testing.T) {
	f, dir := streamHost(t)
	stop := f.Watch(context.Background(), 100*time.Millisecond, nil)
	defer stop()
	if !waitFor(10*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Second); return ok }) {
		t.Fatal("no frame within 10s")
	}
	if err := os.WriteFile(filepath.Join(dir, "delay"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Minute); return !ok }) {
		t.Fatal("the stalled stream still stands for the host after 5s")
	}
	h, _ := f.Lookup("ctl")
	opt := fleet.ProbeOptions{MaxAge: time.Second, Timeout: 300 * time.Millisecond}
	first := f.Probe(context.Background(), []inventory.Host{h}, opt)[0]
	if first.Snapshot.State != "timeout" || !strings.Contains(first.Snapshot.Error, "the GPU probe did not finish within 300ms") || !first.Reached {
		t.Fatalf("the hung probe: %+v", first)
	}
	if again := f.Probe(context.Background(), []inventory.Host{h}, opt)[0]; !again.At.Equal(first.At) || again.Snapshot.State != "timeout" {
		t.Errorf("the next probe ran again: %+v", again)
	}
	if fresh := f.Probe(context.Background(), []inventory.Host{h}, fleet.ProbeOptions{Timeout: 300 * time.Millisecond})[0]; fresh.At.Equal(first.At) {
		t.Error("a probe with MaxAge 0 was answered from the hung one")
	}
	os.Remove(filepath.Join(dir, "delay"))
	if !waitFor(15*time.Second, func() bool { _, _, ok := f.Streamed("ctl", time.Second); return ok }) {
		t.Fatal("no frame within 15s of the hang's end")
	}
	if r := f.Probe(context.Background(), []inventory.Host{h}, opt)[0]; !r.Streamed || len(r.Snapshot.GPUs) != 4 {
		t.Errorf("after the stream's return: %+v", r)
	}
}
