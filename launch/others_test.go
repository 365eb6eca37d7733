package launch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
)

// OtherQueues over real sshd: another queue's running job is listed with
// its GPUs, user and booking, also when it is another login's (another
// home, the one registry of the host); this queue's own jobs and ended
// ones are not, and dead claims of this login are removed.
func TestOtherQueues(t *testing.T) {
	claims := t.TempDir()
	os.Chmod(claims, 0o1777)
	env := func() map[string]string { return map[string]string{launch.ClaimsDirEnv: claims} }
	w := startWorker(t, env())
	other := startWorker(t, env()) // another login of the same host: another home
	p, po := w.pool(t), other.pool(t)
	ctx := context.Background()
	mine := newJob(80, "sleep", "300")
	mine.User = "ann"
	start(t, p, mine)
	const queue = "3f2a9c0000000000"
	theirs := newJob(7, "sleep", "300")
	theirs.User, theirs.Placement.GPUs, theirs.Spec.MemPerGPU = "bob", []string{"GPU-b"}, 8<<30
	if _, err := launch.Start(ctx, po, "w", queue, theirs); err != nil {
		t.Fatal(err)
	}
	done := newJob(8, "true")
	done.Placement.GPUs = []string{"GPU-c"}
	r, err := launch.Start(ctx, po, "w", queue, done)
	if err != nil {
		t.Fatal(err)
	}
	done.Remote = r
	waitEnd(t, po, done)

	got, err := launch.OtherQueues(ctx, p, "w", cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Queue != queue || got[0].Job.ID != 7 || got[0].Job.User != "bob" || got[0].Job.Spec.MemPerGPU != 8<<30 ||
		!slices.Equal(got[0].Job.Placement.GPUs, []string{"GPU-b"}) || got[0].Job.Placement.Host != "w" {
		t.Fatalf("other queues seen from %s: %+v", cluster, got)
	}
	// Seen from the other queue: this queue's running job, exclusive.
	got, err = launch.OtherQueues(ctx, po, "w", queue)
	if err != nil || len(got) != 1 || got[0].Queue != cluster || got[0].Job.ID != mine.ID || got[0].Job.User != "ann" || got[0].Job.Spec.MemPerGPU != 0 {
		t.Fatalf("other queues seen from %s: %+v %v", queue, got, err)
	}
	// The ended job's claim is gone: its own login removed it.
	if _, err := os.Stat(filepath.Join(claims, queue+"-8.1")); !os.IsNotExist(err) {
		t.Errorf("a dead claim was kept: %v", err)
	}
}

// At launch the worker refuses a GPU another queue's live job holds: an
// exclusive job any GPU it lists, a shared one a GPU it holds whole; the
// refusal is definite (nothing ran, the attempt is abandoned). Two shared
// jobs may share a GPU: memory is the planner's to count.
func TestLaunchClaim(t *testing.T) {
	claims := t.TempDir()
	w := startWorker(t, map[string]string{launch.ClaimsDirEnv: claims})
	p := w.pool(t)
	ctx := context.Background()
	const queue = "3f2a9c0000000000"
	theirs := newJob(7, "sleep", "300") // exclusive on GPU-a
	if _, err := launch.Start(ctx, p, "w", queue, theirs); err != nil {
		t.Fatal(err)
	}
	theirsShared := newJob(8, "sleep", "300")
	theirsShared.Placement.GPUs, theirsShared.Spec.MemPerGPU = []string{"GPU-b"}, 1<<30
	if _, err := launch.Start(ctx, p, "w", queue, theirsShared); err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, c := range []struct {
		gpu  string
		mem  uint64
		fail bool
	}{
		{"GPU-a", 0, true}, {"GPU-a", 1 << 30, true}, // theirs is exclusive
		{"GPU-b", 0, true}, {"GPU-b", 1 << 30, false}, // theirs is shared
		{"GPU-z", 0, false},
	} {
		i++
		j := newJob(job.ID(90+i), "true")
		j.Placement.GPUs, j.Spec.MemPerGPU = []string{c.gpu}, c.mem
		_, err := launch.Start(ctx, p, "w", cluster, j)
		var se *launch.StepError
		switch {
		case c.fail && (!errors.As(err, &se) || errors.Is(err, job.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "held by a job of another gssh queue")):
			t.Errorf("%s, mem %d: %v, want a definite refusal", c.gpu, c.mem, err)
		case c.fail:
			if m, _ := launch.Poll(ctx, p, "w", cluster, []job.Job{j}); !m[j.ID].Abandoned {
				t.Errorf("%s, mem %d: refused but not abandoned: %+v", c.gpu, c.mem, m[j.ID])
			}
		case err != nil:
			t.Errorf("%s, mem %d: %v, want it launched", c.gpu, c.mem, err)
		}
	}
	// A claim still starting (no pid yet: a launch of another queue at
	// this moment) holds its GPUs too.
	if err := os.WriteFile(filepath.Join(claims, queue+"-9.1"), []byte("v1 - - "+nowEpoch()+" bob 1 0 GPU-y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := newJob(99, "true")
	j.Placement.GPUs = []string{"GPU-y"}
	if _, err := launch.Start(ctx, p, "w", cluster, j); err == nil || !strings.Contains(err.Error(), "GPU-y (3f2a9c0000000000-9.1, user bob)") {
		t.Errorf("beside a claim starting: %v", err)
	}
}

func nowEpoch() string { return strconv.FormatInt(time.Now().Unix(), 10) }

// A registry this login cannot write to: the launch fails definitely,
// saying how to mend it, rather than start a job unclaimed.
func TestLaunchClaimRegistryBroken(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "claims")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, map[string]string{launch.ClaimsDirEnv: notDir})
	p := w.pool(t)
	j := newJob(70, "true")
	_, err := launch.Start(context.Background(), p, "w", cluster, j)
	var se *launch.StepError
	if !errors.As(err, &se) || errors.Is(err, job.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "the GPU claims registry "+notDir+" cannot be written") {
		t.Fatalf("launch with a broken registry: %v", err)
	}
	if m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j}); !m[j.ID].Abandoned {
		t.Errorf("after the refusal: %+v, want abandoned", m[j.ID])
	}
}
