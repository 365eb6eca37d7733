package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// localFleet is one local host whose nvidia-smi replays the a100x4 fixture
// (GPUs 0-2 busy with other processes, GPU 3 idle), with its own HOME.
func localFleet(t *testing.T) (*fleet.Fleet, string) {
	t.Helper()
	root, _ := filepath.Abs("..")
	bin := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(bin, 0o755)
	os.Symlink(filepath.Join(root, "probe/testdata/fake-nvidia-smi"), filepath.Join(bin, "nvidia-smi"))
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + filepath.Join(root, "probe/testdata/fleet/a100x4")}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true, ReservePct: 10}}}
	return &fleet.Fleet{Inv: inv, Local: sshexec.Local{Env: env}}, home
}

func submit(t *testing.T, st state.Store, prio int, argv ...string) job.Job {
	t.Helper()
	j, err := st.Submit(job.Job{User: "u", Spec: job.Spec{Argv: argv, Host: "auto", GPUs: 1, Workdir: "~", Priority: prio}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestPassOrderAndPendingReasons(t *testing.T) {
	f, _ := localFleet(t)
	st := state.NewMem()
	a := submit(t, st, 5, "true")
	b := submit(t, st, 0, "true") // first despite its later id
	c := submit(t, st, 5, "true")
	res, err := (&control.Controller{Store: st, Fleet: f, Now: time.Now}).Pass(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Started) != 1 || res.Started[0].ID != b.ID || res.Started[0].Placement.Indexes[0] != 3 {
		t.Fatalf("started %+v", res.Started)
	}
	for _, id := range []job.ID{a.ID, c.ID} {
		j, _ := st.Get(id)
		if j.State != job.Queued || !strings.Contains(j.Reason, "ctl: 0/4 GPUs free") {
			t.Errorf("job %d: %s %q", id, j.State, j.Reason)
		}
	}
	// The started job ends; the next pass records it and starts the next one.
	time.Sleep(300 * time.Millisecond)
	res, err = (&control.Controller{Store: st, Fleet: f, Now: time.Now}).Pass(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Finished) != 1 || res.Finished[0].State != job.Succeeded || len(res.Started) != 1 || res.Started[0].ID != a.ID {
		t.Errorf("second pass: finished %+v started %+v", res.Finished, res.Started)
	}
}

// A job claimed (launching) whose launch never reached the worker is queued
// again and started by the same pass.
func TestPassRequeuesLostClaim(t *testing.T) {
	f, _ := localFleet(t)
	st := state.NewMem()
	j := submit(t, st, 5, "sleep", "2")
	st.Update(j.ID, func(x *job.Job) error {
		x.State, x.Placement = job.Launching, job.Placement{Host: "ctl", GPUs: []string{"GPU-00000000-0000-0000-0000-000000000003"}, Indexes: []int{3}}
		return nil
	})
	res, err := (&control.Controller{Store: st, Fleet: f, Now: time.Now}).Pass(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Started) != 1 || res.Started[0].ID != j.ID || res.Started[0].State != job.Running {
		t.Fatalf("started %+v, errors %v", res.Started, res.Errors)
	}
}

func TestLockPass(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db.pass.lock")
	unlock, err := control.LockPass(context.Background(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := control.LockPass(context.Background(), path, 200*time.Millisecond); !errors.Is(err, control.ErrPassBusy) {
		t.Errorf("second lock: %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("waited %v", d)
	}
	unlock()
	unlock2, err := control.LockPass(context.Background(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

// A launch that fails on the worker (home not writable, disk full) puts the
// job back in the queue with the reason; nothing is left in launching.
func TestPassLaunchFailureRequeues(t *testing.T) {
	f, _ := localFleet(t)
	l := f.Local.(sshexec.Local)
	for i, kv := range l.Env {
		if strings.HasPrefix(kv, "HOME=") {
			l.Env[i] = "HOME=/dev/null/home"
		}
	}
	st := state.NewMem()
	j := submit(t, st, 5, "true")
	res, err := (&control.Controller{Store: st, Fleet: f, Now: time.Now}).Pass(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(j.ID)
	if len(res.Started) != 0 || len(res.Errors) != 1 || got.State != job.Queued || !strings.Contains(got.Reason, "launch failed: launch on ctl") {
		t.Errorf("state %s reason %q, errors %v", got.State, got.Reason, res.Errors)
	}
}
