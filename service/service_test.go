package service_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// lab is a service over the local host "ctl", whose nvidia-smi replays
// the a100x4 fixture (GPUs 0-2 busy with other people's processes, GPU 3
// idle), and, with down, an SSH host nothing answers for.
type lab struct {
	svc   *service.Local
	state string
	home  string
}

type resolver map[string]sshconfig.Settings

func (r resolver) Resolve(alias string, _ sshconfig.Overrides) (sshconfig.Settings, error) {
	return r[alias], nil
}

func newLab(t *testing.T, down bool, mod ...func(*service.Options)) *lab {
	t.Helper()
	root, _ := filepath.Abs("..")
	bin := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(bin, 0o755)
	os.Symlink(filepath.Join(root, "probe/testdata/fake-nvidia-smi"), filepath.Join(bin, "nvidia-smi"))
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + filepath.Join(root, "probe/testdata/fleet/a100x4"),
		launch.ClaimsDirEnv + "=" + filepath.Join(home, "claims")} // the test's own GPU claims, not the machine's
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true, ReservePct: 10, Labels: []string{"a100"}}}}
	if down {
		inv.Hosts = append(inv.Hosts, inventory.Host{Name: "down", ReservePct: 10})
	}
	l := &lab{state: filepath.Join(t.TempDir(), "state", "state.db"), home: home}
	opt := service.Options{
		Fleet: fleet.Options{
			Inventory: inv, Home: home, Environ: env, ConnectTimeout: 2 * time.Second,
			SSH: resolver{"down": {Alias: "down", HostName: "127.0.0.1", Port: 1, User: "u"}},
		},
		StatePath: l.state, StateExplicit: true, User: "ann", Owner: "ann", // personal mode, as cmd/gssh runs it
	}
	for _, m := range mod {
		m(&opt)
	}
	l.svc = service.New(opt)
	t.Cleanup(func() { l.svc.Close() })
	return l
}

func spec(argv ...string) job.Spec {
	return job.Spec{Argv: argv, GPUs: 1, Workdir: "~", Priority: 5}
}

func (l *lab) submit(t *testing.T, s job.Spec) service.SubmitResult {
	t.Helper()
	res, err := l.svc.Submit(context.Background(), service.SubmitRequest{Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitEnd runs passes until job id ends (a real process on the local host).
func (l *lab) waitEnd(t *testing.T, id job.ID) job.Job {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := l.svc.Schedule(context.Background(), service.ScheduleRequest{}); err != nil {
			t.Fatal(err)
		}
		j, err := l.svc.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Terminal() {
			return j
		}
	}
	t.Fatalf("job %d did not end", id)
	return job.Job{}
}

// Submit validates, stores, runs its pass and returns the job running;
// a pass records its end; Logs returns what it wrote.
func TestSubmitRunsLogsAndEnds(t *testing.T) {
	l := newLab(t, false)
	s := spec("sh", "-c", "echo out; echo err >&2; exit 3")
	s.MemPerGPU = 1 << 30
	res := l.submit(t, s)
	if j := res.Job; j.ID != 1 || j.State != job.Running || j.User != "ann" || j.Placement.Host != "ctl" || j.Placement.Indexes[0] != 0 || j.Spec.Name != "sh" {
		t.Fatalf("submitted %+v", res.Job)
	}
	if d := res.Doc(); d.ID != 1 || d.State != job.Running || d.Host != "ctl" || d.DryRun || d.WouldRun != nil {
		t.Errorf("doc %+v", d)
	}
	j := l.waitEnd(t, 1)
	if j.State != job.Failed || *j.ExitCode != 3 || j.Reason != "exit status 3" {
		t.Errorf("ended %s %v %q", j.State, j.ExitCode, j.Reason)
	}
	var out bytes.Buffer
	if _, err := l.svc.Logs(context.Background(), service.LogsRequest{ID: 1, Tail: -1}, &out); err != nil || out.String() != "out\nerr\n" {
		t.Errorf("logs %q, %v", out.String(), err)
	}
	doc, err := l.svc.Jobs(context.Background(), service.JobQuery{All: true})
	if err != nil || doc.Schema != service.JobsSchema || len(doc.Jobs) != 1 {
		t.Errorf("jobs %+v, %v", doc, err)
	}
	if doc, _ := l.svc.Jobs(context.Background(), service.JobQuery{}); len(doc.Jobs) != 0 || doc.Jobs == nil {
		t.Errorf("active jobs %+v", doc.Jobs)
	}
}

// Bad specs and requests that can never fit are refused; nothing is
// stored.
func TestSubmitRefuses(t *testing.T) {
	l := newLab(t, false)
	for _, tt := range []struct {
		spec job.Spec
		want string
	}{
		{job.Spec{GPUs: 1, Workdir: "~", Priority: 5}, "empty command"},
		{job.Spec{Argv: []string{"true"}, GPUs: 0, Workdir: "~"}, "--gpus 0: a job needs at least 1 GPU"},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "~", Priority: 11}, "--priority 11"},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "rel/dir"}, `--workdir "rel/dir" is relative`},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "~/a\nb"}, "a newline"},
		{job.Spec{Argv: []string{"true"}, GPUs: 5, Workdir: "~"}, "5 GPUs requested, but the most on one host is 4 (ctl)"},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "~", MemPerGPU: 100 << 30}, "the most a GPU can give is 72.0 GiB"},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "~", Host: "gpu9"}, `unknown host "gpu9"; the hosts are ctl`},
		{job.Spec{Argv: []string{"true"}, GPUs: 1, Workdir: "~", Env: []job.EnvVar{{Key: "GSSH_JOB_ID", Value: "1"}}}, "gssh sets this one itself"},
	} {
		_, err := l.svc.Submit(context.Background(), service.SubmitRequest{Spec: tt.spec})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.spec, err, tt.want)
		}
	}
	if doc, err := l.svc.Jobs(context.Background(), service.JobQuery{All: true}); err == nil && len(doc.Jobs) != 0 {
		t.Errorf("stored %d jobs", len(doc.Jobs))
	}
}

// A dry run plans the job behind the queue as it is, and stores nothing.
func TestDryRun(t *testing.T) {
	l := newLab(t, false)
	dry := func(s job.Spec) service.SubmitResult {
		res, err := l.svc.Submit(context.Background(), service.SubmitRequest{Spec: s, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := dry(spec("true"))
	if !res.WouldRun || res.Placement.Host != "ctl" || res.Placement.Indexes[0] != 3 {
		t.Errorf("dry run on an empty queue: %+v", res)
	}
	if _, err := os.Stat(l.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run made the state file: %v", err)
	}
	if d := res.Doc(); !d.DryRun || d.WouldRun == nil || !*d.WouldRun || d.ID != 0 {
		t.Errorf("doc %+v", d)
	}
	l.submit(t, spec("sleep", "300")) // takes GPU 3, the only idle one
	t.Cleanup(func() { l.svc.Cancel(context.Background(), service.CancelRequest{ID: 1}) })
	res = dry(spec("true"))
	if res.WouldRun || !strings.Contains(res.Reason, "ctl: 0/4 GPUs free") {
		t.Errorf("dry run behind a busy GPU: %+v", res)
	}
	if doc, _ := l.svc.Jobs(context.Background(), service.JobQuery{All: true}); len(doc.Jobs) != 1 {
		t.Errorf("a dry run stored a job: %d jobs", len(doc.Jobs))
	}
}

// Read-only calls never create the state file: a missing file named by
// the user is an error (exit 3), the default one missing an empty queue.
func TestReadOnlyNeverCreates(t *testing.T) {
	l := newLab(t, false)
	_, err := l.svc.Jobs(context.Background(), service.JobQuery{})
	var fe *state.FileError
	if !errors.As(err, &fe) || !errors.Is(err, state.ErrNoState) {
		t.Errorf("Jobs with a missing --state: %v", err)
	}
	if _, err := l.svc.Job(context.Background(), 1); !errors.Is(err, state.ErrNoState) {
		t.Errorf("Job: %v", err)
	}
	if _, err := l.svc.Logs(context.Background(), service.LogsRequest{ID: 1}, &bytes.Buffer{}); !errors.Is(err, state.ErrNoState) {
		t.Errorf("Logs: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(l.state)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory was made: %v", err)
	}

	d := newLab(t, false, func(o *service.Options) { o.StateExplicit = false })
	doc, err := d.svc.Jobs(context.Background(), service.JobQuery{All: true})
	if err != nil || doc.Jobs == nil || len(doc.Jobs) != 0 {
		t.Errorf("default state missing: %+v, %v", doc, err)
	}
	if _, err := d.svc.Job(context.Background(), 4); !errors.Is(err, state.ErrNotFound) || !strings.Contains(err.Error(), "no job 4") {
		t.Errorf("Job on no state: %v", err)
	}
	if _, err := os.Stat(d.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the default state file was made: %v", err)
	}
}

// Cancel drops a queued job, stops a running one (and starts what waited
// for its GPU in the same call), and refuses an ended one.
func TestCancel(t *testing.T) {
	l := newLab(t, false)
	run := l.submit(t, spec("sleep", "300")).Job
	queued := l.submit(t, spec("sleep", "301")).Job
	next := l.submit(t, spec("sleep", "302")).Job
	if run.State != job.Running || queued.State != job.Queued || next.State != job.Queued {
		t.Fatalf("states %s %s %s", run.State, queued.State, next.State)
	}
	cancel := func(id job.ID) service.CancelResult {
		t.Helper()
		res, err := l.svc.Cancel(context.Background(), service.CancelRequest{ID: id, Grace: time.Second})
		if j := res.Job; err != nil || j.State != job.Cancelled || j.Reason != "cancelled by ann" {
			t.Errorf("cancel %d: %+v, %v", id, j, err)
		}
		return res
	}
	if res := cancel(queued.ID); res.Pass != nil {
		t.Errorf("a queued job held no GPU, yet a pass ran: %+v", res.Pass)
	}
	res := cancel(run.ID)
	if res.Pass == nil || len(res.Pass.Started) != 1 || res.Pass.Started[0].ID != next.ID || res.PassError != nil {
		t.Errorf("the cancel's pass: %+v, %v (want job %d started)", res.Pass, res.PassError, next.ID)
	}
	cancel(next.ID)
	if _, err := l.svc.Cancel(context.Background(), service.CancelRequest{ID: run.ID}); err == nil || !strings.Contains(err.Error(), "job 1 has already ended (cancelled)") {
		t.Errorf("cancel again: %v", err)
	}
	if _, err := l.svc.Cancel(context.Background(), service.CancelRequest{ID: 9}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("cancel of no job: %v", err)
	}
	var out bytes.Buffer
	if _, err := l.svc.Logs(context.Background(), service.LogsRequest{ID: queued.ID}, &out); err == nil || !strings.Contains(err.Error(), "has no log: it has not started") {
		t.Errorf("logs of a job that never started: %v", err)
	}
}

// A pass lock held by another pass: Schedule is ErrPassBusy; Submit
// stores the job, says why it waits, and does not fail.
func TestPassBusy(t *testing.T) {
	l := newLab(t, false, func(o *service.Options) { o.PassWait = 100 * time.Millisecond })
	unlock, err := control.LockPass(context.Background(), l.state+".pass.lock", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	res := l.submit(t, spec("true"))
	if !errors.Is(res.PassError, service.ErrPassBusy) || res.Job.State != job.Queued || !strings.Contains(res.Job.Reason, "another scheduling pass is running") {
		t.Errorf("submit under a held lock: %+v", res)
	}
	if _, err := l.svc.Schedule(context.Background(), service.ScheduleRequest{}); !errors.Is(err, service.ErrPassBusy) {
		t.Errorf("Schedule: %v", err)
	}
}

// Schedule never creates the state file: a missing one named by the user
// is an error; the default one missing is nothing to do.
func TestScheduleNeverCreates(t *testing.T) {
	l := newLab(t, false)
	if _, err := l.svc.Schedule(context.Background(), service.ScheduleRequest{}); !errors.Is(err, state.ErrNoState) {
		t.Errorf("explicit state missing: %v", err)
	}
	d := newLab(t, false, func(o *service.Options) { o.StateExplicit = false })
	if res, err := d.svc.Schedule(context.Background(), service.ScheduleRequest{}); err != nil || len(res.Started) != 0 {
		t.Errorf("default state missing: %+v, %v", res, err)
	}
	for _, p := range []string{l.state, d.state} {
		if _, err := os.Stat(filepath.Dir(p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was made: %v", p, err)
		}
	}
}

// GPUs and Hosts answer with their documents; an unreachable host is in
// them, with its state, and makes the error a *PartialError.
func TestGPUsAndHosts(t *testing.T) {
	l := newLab(t, true)
	gpus, err := l.svc.GPUs(context.Background(), service.HostQuery{})
	var pe *service.PartialError
	if !errors.As(err, &pe) || pe.Failed != 1 || pe.Total != 2 {
		t.Errorf("GPUs error %v", err)
	}
	b, _ := json.Marshal(gpus)
	if gpus.Schema != service.GPUsSchema || len(gpus.Hosts) != 2 || gpus.Hosts[0].Host != "ctl" || len(gpus.Hosts[0].GPUs) != 4 ||
		gpus.Hosts[1].State != "unreachable" || gpus.Hosts[1].GPUs == nil || gpus.Hosts[1].Labels == nil || strings.Contains(string(b), "null,\"labels\"") {
		t.Errorf("GPUs doc %s", b)
	}
	hosts, err := l.svc.Hosts(context.Background(), service.HostQuery{Labels: []string{"a100"}})
	if err != nil || hosts.Schema != service.HostsSchema || len(hosts.Hosts) != 1 || hosts.Hosts[0].Address != "local" || hosts.Hosts[0].GPUs != 4 {
		t.Errorf("Hosts %+v, %v", hosts, err)
	}
	if _, err := l.svc.GPUs(context.Background(), service.HostQuery{Hosts: []string{"nope"}}); !errors.Is(err, sshexec.ErrUnknownHost) {
		t.Errorf("unknown host: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.svc.GPUs(ctx, service.HostQuery{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
