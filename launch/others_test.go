package launch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
)

// OtherQueues over real sshd: another queue's running job is listed with
// its placement and user, this queue's own jobs and ended ones are not,
// nor a claimed directory placed on another host (seen through a shared
// home).
func TestOtherQueues(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	ctx := context.Background()
	mine := start(t, p, newJob(80, "sleep", "300")) // this queue (cluster)
	theirs := newJob(7, "sleep", "300")
	theirs.User = "bob"
	theirs.Placement.GPUs = []string{"GPU-b"}
	const queue = "3f2a9c0000000000"
	if _, err := launch.Start(ctx, p, "w", queue, theirs); err != nil {
		t.Fatal(err)
	}
	done := newJob(8, "true")
	done.Placement.GPUs = []string{"GPU-c"}
	r, err := launch.Start(ctx, p, "w", queue, done)
	if err != nil {
		t.Fatal(err)
	}
	done.Remote = r
	waitEnd(t, p, done)
	// A directory claimed on another host, as a shared home shows it.
	elsewhere := filepath.Join(w.sshd.Home, ".gssh/jobs", queue+"-9.1")
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(elsewhere, "spec.json"), []byte(`{"id":9,"user":"bob","placement":{"host":"gpu09","gpus":["GPU-a"]}}`+"\n"), 0o600)

	got, err := launch.OtherQueues(ctx, p, "w", cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Queue != queue || got[0].Job.ID != 7 || got[0].Job.User != "bob" || got[0].Job.Placement.GPUs[0] != "GPU-b" {
		t.Fatalf("other queues from %s: %+v", cluster, got)
	}
	// Seen from the other queue: this queue's running job.
	got, err = launch.OtherQueues(ctx, p, "w", queue)
	if err != nil || len(got) != 1 || got[0].Queue != cluster || got[0].Job.ID != mine.ID {
		t.Fatalf("other queues from %s: %+v %v", queue, got, err)
	}
	// A claimed directory placed on this host, no pid yet: starting, listed.
	claimed := filepath.Join(w.sshd.Home, ".gssh/jobs", queue+"-10.1")
	os.MkdirAll(claimed, 0o700)
	os.WriteFile(filepath.Join(claimed, "spec.json"), []byte(`{"id":10,"user":"bob","placement":{"host":"w","gpus":["GPU-d"]}}`+"\n"), 0o600)
	got, _ = launch.OtherQueues(ctx, p, "w", cluster)
	var ids []string
	for _, o := range got {
		ids = append(ids, o.Job.Placement.GPUs[0])
	}
	if slices.Sort(ids); strings.Join(ids, ",") != "GPU-b,GPU-d" {
		t.Errorf("with a claim starting here: %v", ids)
	}
}

// At launch the worker refuses a GPU another queue's live job holds: an
// exclusive job any GPU it lists, a shared one a GPU it holds whole; the
// refusal is definite (nothing ran, the attempt is abandoned). Two shared
// jobs may share a GPU: memory is the planner's to count.
func TestLaunchClaim(t *testing.T) {
	w := startWorker(t, nil)
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
}
