package control_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// fleetSim is a lab whose hosts can stop answering: its workers keep each
// attempt of each job apart (a copy left on a failed host and the job's
// next attempt elsewhere are two processes), and its snapshots say a
// host that does not answer is unreachable.
type fleetSim struct {
	mu    sync.Mutex
	hosts []sched.Host
	down  map[string]bool
	runs  map[string]*simRun // "id.attempt"
	stops []string           // "id.attempt@host" of each Stop that found the attempt running
}

type simRun struct {
	host    string
	running bool
	failed  bool // ended with exit status 1
	// exit, when set, is the exit status it ended with on its own, after
	// running for runtime (by its worker's clock).
	exit    *int
	runtime time.Duration
}

// status is how r ended on its own: its exit status and run time.
func (r *simRun) status() job.Status {
	st := job.Status{State: job.Succeeded, ExitCode: r.exit, Reason: fmt.Sprintf("exit status %d", *r.exit), Runtime: r.runtime}
	if *r.exit != 0 {
		st.State = job.Failed
	}
	return st
}

func newFleetSim(hosts ...sched.Host) *fleetSim {
	return &fleetSim{hosts: hosts, down: map[string]bool{}, runs: map[string]*simRun{}}
}

func runKey(j job.Job) string { return fmt.Sprintf("%d.%d", j.ID, j.Attempt) }

func (f *fleetSim) noAnswer(host string) error {
	if f.down[host] {
		return fmt.Errorf("%s: %w: connect: i/o timeout", host, job.ErrNoContact)
	}
	return nil
}

func (f *fleetSim) Hosts(context.Context) ([]sched.Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.hosts)
	for i, h := range out {
		if f.down[h.Name] {
			out[i].Snapshot = gpuinfo.Snapshot{Host: h.Name, State: gpuinfo.HostTimeout, Error: "connect: i/o timeout"}
		}
	}
	return out, nil
}

func (f *fleetSim) Start(_ context.Context, j job.Job) (job.Remote, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.noAnswer(j.Placement.Host); err != nil {
		return job.Remote{}, err
	}
	f.runs[runKey(j)] = &simRun{host: j.Placement.Host, running: true}
	return job.Remote{Dir: "/d/" + runKey(j), PID: 1000 + int(j.ID)}, nil
}

func (f *fleetSim) Abandon(_ context.Context, j job.Job) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.noAnswer(j.Placement.Host); err != nil {
		return false, err
	}
	_, started := f.runs[runKey(j)]
	return !started, nil
}

func (f *fleetSim) Poll(_ context.Context, host string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.noAnswer(host); err != nil {
		return nil, err
	}
	out := map[job.ID]job.Status{}
	for _, j := range jobs {
		r, ok := f.runs[runKey(*j)]
		switch {
		case !ok:
			out[j.ID] = job.Status{State: job.Lost, Missing: true}
		case r.running:
			out[j.ID] = job.Status{State: job.Running, PID: 1000 + int(j.ID)}
		case r.exit != nil:
			out[j.ID] = r.status()
		case r.failed:
			out[j.ID] = job.Status{State: job.Failed, ExitCode: ptr(1), Reason: "exit status 1"}
		default:
			out[j.ID] = job.Status{State: job.Cancelled, Reason: "stopped"}
		}
	}
	return out, nil
}

func (f *fleetSim) Stop(_ context.Context, j job.Job, _ time.Duration, why job.State) (job.Stopped, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.noAnswer(j.Placement.Host); err != nil {
		return job.Stopped{}, err
	}
	r, ok := f.runs[runKey(j)]
	if ok && !r.running && r.exit != nil && why != "" {
		st := r.status() // it ended before the stop: launch.Stop's end gate says so
		return job.Stopped{Ended: &st}, nil
	}
	if !ok || !r.running || r.host != j.Placement.Host {
		return job.Stopped{}, nil
	}
	r.running = false
	f.stops = append(f.stops, runKey(j)+"@"+r.host)
	return job.Stopped{Signalled: 1}, nil
}

func (f *fleetSim) setDown(host string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[host] = down
}

// running lists the attempts running now, as "id.attempt@host", sorted.
func (f *fleetSim) running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, r := range f.runs {
		if r.running {
			out = append(out, k+"@"+r.host)
		}
	}
	slices.Sort(out)
	return out
}

// hostRig is a rig whose hosts and workers are a fleetSim.
type hostRig struct {
	*rig
	fleet *fleetSim
}

func newHostRig(t *testing.T, known func(string) bool, hosts ...sched.Host) *hostRig {
	t.Helper()
	r := &hostRig{rig: &rig{store: state.NewMem(), events: &events{}}, fleet: newFleetSim(hosts...)}
	ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.fleet, HostsOf: r.fleet, Workers: r.fleet, Events: r.events,
		Ledger: r.store, Known: known, Policy: sched.Policy{Fit: sched.FitFirst}})
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	return r
}

func (r *hostRig) submit(t *testing.T, host string, requeue bool) job.Job {
	t.Helper()
	return r.submitSpec(t, job.Spec{Argv: []string{"train"}, Host: host, GPUs: 1, Workdir: "~", Priority: 5, Requeue: requeue})
}

func notes(res control.Result) []string {
	var out []string
	for _, n := range res.Hosts {
		out = append(out, n.Host.Name+" "+n.Change)
	}
	return out
}

// One failed contact, or three in 20 s, never make a host down; three
// spanning down_after do: its running job becomes unknown (its GPU still
// booked: a job for that host waits), and when the host answers again
// the job, still running there, is adopted.
func TestHostDownThenAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHostRig(t, nil, idleHost("h1", 1))
		a := r.submit(t, "h1", false)
		r.pass(t)
		if j := r.get(t, a.ID); j.State != job.Running {
			t.Fatalf("job %d %s, want running", a.ID, j.State)
		}
		b := r.submit(t, "h1", false)
		r.fleet.setDown("h1", true)
		for i := range 3 {
			res := r.pass(t)
			if j := r.get(t, a.ID); j.State != job.Running || len(res.Errors) == 0 || !strings.Contains(fmt.Sprint(res.Errors), fmt.Sprintf("failed contact %d in a row", i+1)) {
				t.Fatalf("failure %d within 20 s: job %s, errors %v; want running and the failure counted", i+1, j.State, res.Errors)
			}
			time.Sleep(10 * time.Second)
		}
		time.Sleep(30 * time.Second) // the 4th failure is 60 s after the first
		res := r.pass(t)
		j := r.get(t, a.ID)
		if j.State != job.Unknown || !strings.Contains(j.Reason, "h1 has not answered since") || !slices.Equal(notes(res), []string{"h1 down"}) || len(res.Errors) != 0 {
			t.Fatalf("after 60 s of failures: job %s %q, notes %v, errors %v; want unknown, h1 down, no errors", j.State, j.Reason, notes(res), res.Errors)
		}
		hs, _ := r.store.Hosts()
		if h := hs["h1"]; !h.Down() || h.Failures != 4 || !strings.Contains(h.LastError, "i/o timeout") {
			t.Errorf("h1's record %+v, want down after 4 failures with the error", h)
		}
		if jb := r.get(t, b.ID); jb.State != job.Queued {
			t.Errorf("job %d %s: want queued (h1 is down, its GPU still booked)", b.ID, jb.State)
		}
		res = r.pass(t)
		if !slices.Equal(notes(res), []string{"h1 still down"}) {
			t.Errorf("notes %v, want h1 still down", notes(res))
		}

		time.Sleep(time.Minute)
		r.fleet.setDown("h1", false)
		res = r.pass(t)
		if j := r.get(t, a.ID); j.State != job.Running || j.Reason != "" {
			t.Errorf("after h1 answered: job %s %q, want running again", j.State, j.Reason)
		}
		if !slices.Equal(notes(res), []string{"h1 up"}) {
			t.Errorf("notes %v, want h1 up", notes(res))
		}
		if jb := r.get(t, b.ID); jb.State != job.Queued {
			t.Errorf("job %d %s: want queued (h1's GPU is job %d's again)", b.ID, jb.State, a.ID)
		}
		if !slices.Contains(r.events.seen, fmt.Sprintf("job_unknown %d unknown", a.ID)) || !slices.Contains(r.events.seen, fmt.Sprintf("job_adopted %d running", a.ID)) {
			t.Errorf("events %q: want job_unknown and job_adopted", r.events.seen)
		}
		if got := r.fleet.running(); !slices.Equal(got, []string{fmt.Sprintf("%d.1@h1", a.ID)}) {
			t.Errorf("running %v", got)
		}
	})
}

// A host down for lost_after: its --requeue job goes back to the queue
// (attempt and restart counted) and runs elsewhere in the same pass; the
// other job is lost. When the host answers again, the copies left there
// are killed, the new attempt is not: never two copies of one job.
func TestHostLostRequeueAndStrays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHostRig(t, nil, idleHost("h1", 2), idleHost("h2", 1))
		req := r.submit(t, "h1", true)
		plain := r.submit(t, "h1", false)
		r.pass(t)
		r.fleet.setDown("h1", true)
		for range 4 {
			r.pass(t)
			time.Sleep(20 * time.Second)
		}
		if j := r.get(t, req.ID); j.State != job.Unknown {
			t.Fatalf("job %d %s, want unknown", req.ID, j.State)
		}
		// Move the requeued job's host: the request named h1, and h1 is
		// down; a job for "auto" would go anywhere.
		if _, err := r.store.Update(req.ID, func(x *job.Job) error { x.Spec.Host = "auto"; return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute)
		res := r.pass(t)
		q, p := r.get(t, req.ID), r.get(t, plain.ID)
		if p.State != job.Lost || !strings.Contains(p.Reason, "lost_after") {
			t.Errorf("job %d %s %q, want lost after lost_after", plain.ID, p.State, p.Reason)
		}
		if q.State != job.Running || q.Placement.Host != "h2" || q.Attempt != 2 || q.Restarts != 1 || len(q.Runs) != 1 {
			t.Fatalf("--requeue job: %s on %q attempt %d restarts %d runs %d; want running on h2, attempt 2, restart 1", q.State, q.Placement.Host, q.Attempt, q.Restarts, len(q.Runs))
		}
		if !slices.Contains(ids(res.Requeued), req.ID) {
			t.Errorf("requeued %v, want job %d", ids(res.Requeued), req.ID)
		}
		hs, _ := r.store.Hosts()
		if h := hs["h1"]; len(h.Strays) != 2 {
			t.Fatalf("h1 strays %+v, want both attempts", h.Strays)
		}

		r.fleet.setDown("h1", false)
		res = r.pass(t)
		want := []string{fmt.Sprintf("%d.2@h2", req.ID)}
		if got := r.fleet.running(); !slices.Equal(got, want) {
			t.Errorf("running after h1 answered: %v, want only %v", got, want)
		}
		if len(res.Strays) != 2 {
			t.Errorf("strays killed %+v, want 2", res.Strays)
		}
		hs, _ = r.store.Hosts()
		if h := hs["h1"]; len(h.Strays) != 0 || h.Down() {
			t.Errorf("h1 after it answered: %+v, want up, no strays", h)
		}
	})
}

// A host with strays and no job left there is reached all the same.
func TestStraysOnHostWithoutJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHostRig(t, nil, idleHost("h1", 1))
		a := r.submit(t, "h1", false)
		r.pass(t)
		r.fleet.setDown("h1", true)
		if _, err := r.ctl.Cancel(context.Background(), a.ID, 0, "u"); err == nil || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("cancel with the host away = %v, want an error saying --force", err)
		}
		j, err := r.ctl.ForceCancel(a.ID, "u")
		if err != nil || j.State != job.Cancelled || !strings.Contains(j.Reason, "may still run") {
			t.Fatalf("ForceCancel = %s %q, %v", j.State, j.Reason, err)
		}
		res := r.pass(t) // h1 still away: nothing to poll, the stray waits
		if len(res.Errors) != 0 {
			t.Errorf("errors %v", res.Errors)
		}
		r.fleet.setDown("h1", false)
		r.pass(t)
		if got := r.fleet.running(); len(got) != 0 {
			t.Errorf("running %v after h1 answered, want the cancelled job killed", got)
		}
	})
}

// The jobs of a host no longer in the inventory are not polled and make
// no error; their reason says what to do, and --force ends them.
func TestJobOnHostNotInInventory(t *testing.T) {
	known := true
	r := newHostRig(t, func(h string) bool { return known || h != "h1" }, idleHost("h1", 1))
	a := r.submit(t, "h1", false)
	r.pass(t)
	known = false
	for range 2 {
		if res := r.pass(t); len(res.Errors) != 0 {
			t.Fatalf("pass errors %v, want none", res.Errors)
		}
	}
	j := r.get(t, a.ID)
	if j.State != job.Running || !strings.Contains(j.Reason, "not in the inventory") || !strings.Contains(j.Reason, "--force") {
		t.Errorf("job %s %q", j.State, j.Reason)
	}
	if _, err := r.ctl.Cancel(context.Background(), a.ID, 0, "u"); err == nil || !strings.Contains(err.Error(), "cancel --force") {
		t.Errorf("Cancel of a job on a host gone from the inventory = %v, want an error naming --force", err)
	}
	if _, err := r.ctl.ForceCancel(a.ID, "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ctl.ForceCancel(a.ID, "u"); !errors.Is(err, control.ErrEnded) {
		t.Errorf("second ForceCancel = %v, want ErrEnded", err)
	}
}

// idleHost is a host of n idle 80 GiB GPUs.
func idleHost(name string, n int) sched.Host {
	var gs []gpuinfo.GPU
	for i := range n {
		gs = append(gs, gpuinfo.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Health: gpuinfo.HealthOK, ProcsKnown: true,
			MemTotal: ptr(uint64(80 * GiB)), MemUsed: ptr(uint64(0)), MemFree: ptr(uint64(80 * GiB)), Procs: []gpuinfo.Proc{}})
	}
	return sched.Host{Name: name, Snapshot: gpuinfo.Snapshot{Host: name, State: gpuinfo.HostOK, GPUs: gs}}
}

func (f *fleetSim) HostsOf(ctx context.Context, names []string) ([]sched.Host, error) {
	hs, _ := f.Hosts(ctx)
	return slices.DeleteFunc(hs, func(h sched.Host) bool { return !slices.Contains(names, h.Name) }), nil
}

func (f *fleetSim) setHealth(host string, gpu int, hl gpuinfo.Health) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.hosts {
		if f.hosts[i].Name == host {
			gs := slices.Clone(f.hosts[i].Snapshot.GPUs)
			gs[gpu].Health = hl
			f.hosts[i].Snapshot.GPUs = gs
			f.hosts[i].Snapshot.State = gpuinfo.HostOK
			if hl != gpuinfo.HealthOK {
				f.hosts[i].Snapshot.State = gpuinfo.HostDegraded
			}
		}
	}
}

// exit ends attempt a of job id on its own with exit status code, after
// it ran for runtime.
func (f *fleetSim) exit(id job.ID, a, code int, runtime time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[fmt.Sprintf("%d.%d", id, a)]
	r.running, r.exit, r.runtime = false, &code, runtime
}

// fail ends attempt a of job id with exit status 1 (its CUDA call failed).
func (f *fleetSim) fail(id job.ID, a int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[fmt.Sprintf("%d.%d", id, a)]
	r.running, r.failed = false, true
}

// A GPU that falls off the bus under a running job: the job is marked
// with why (a pass with nothing queued probes its host for that), and
// with --requeue it goes back to the queue when its process is gone; the
// GPU takes no job until it reads healthy in 3 probes in a row.
func TestGPUFailsUnderJob(t *testing.T) {
	r := newHostRig(t, nil, idleHost("h1", 1))
	a := r.submit(t, "h1", true)
	r.pass(t)
	r.fleet.setHealth("h1", 0, gpuinfo.HealthLost)
	res := r.pass(t)
	j := r.get(t, a.ID)
	if j.State != job.Running || j.ReasonCode != "gpu_failed" || !strings.Contains(j.Reason, "GPU 0 (GPU-h1-0) on h1 read lost") || len(res.GPUFailed) != 1 {
		t.Fatalf("job on the lost GPU: %s %q (%s); GPUFailed %v", j.State, j.Reason, j.ReasonCode, ids(res.GPUFailed))
	}
	hs, _ := r.store.Hosts()
	if g, ok := hs["h1"].GPUs["0"]; !ok || g.Why != "lost" {
		t.Fatalf("h1's GPU record %+v", hs["h1"].GPUs)
	}
	r.fleet.fail(a.ID, 1) // the job's CUDA context died with the GPU
	res = r.pass(t)
	j = r.get(t, a.ID)
	if j.State != job.Queued || j.Restarts != 1 || len(j.Runs) != 1 || !strings.Contains(j.Reason, "lost") {
		t.Fatalf("after its process ended: %s restarts %d runs %d %q; want queued again, waiting for the GPU", j.State, j.Restarts, len(j.Runs), j.Reason)
	}
	if !slices.Contains(r.events.seen, fmt.Sprintf("job_requeue %d queued", a.ID)) {
		t.Errorf("events %q: want the requeue", r.events.seen)
	}
	// The GPU reads healthy again (a reset): not placed on until the 3rd
	// healthy probe in a row.
	r.fleet.setHealth("h1", 0, gpuinfo.HealthOK)
	for i := range 3 {
		r.pass(t)
		j = r.get(t, a.ID)
		if i < 2 && (j.State != job.Queued || !strings.Contains(j.Reason, "recovering")) {
			t.Fatalf("healthy probe %d: job %s %q; want queued, the GPU recovering", i+1, j.State, j.Reason)
		}
	}
	if j.State != job.Running || j.Attempt != 2 {
		t.Errorf("after 3 healthy probes: job %s attempt %d; want running, attempt 2", j.State, j.Attempt)
	}
	// One event when the GPU failed (not one per probe that read it lost),
	// one when it was healthy long enough.
	var gpuEvents []string
	for _, e := range r.events.seen {
		if strings.HasPrefix(e, "gpu_") {
			gpuEvents = append(gpuEvents, e)
		}
	}
	if want := []string{"gpu_failed 0 ", "gpu_healthy 0 "}; !slices.Equal(gpuEvents, want) {
		t.Errorf("GPU events %q, want %q", gpuEvents, want)
	}
}

// A probe that timed out after connecting (a hung nvidia-smi) reached the
// host: it is no failed contact. One that could not connect is.
func TestProbeTimeoutAfterConnectIsAContact(t *testing.T) {
	hung := idleHost("h1", 1)
	hung.Snapshot = gpuinfo.Snapshot{Host: "h1", State: gpuinfo.HostTimeout, Error: "the GPU probe did not finish within 15s"}
	for _, reached := range []bool{true, false} {
		hung.Reached = reached
		r := newHostRig(t, nil, hung)
		r.submit(t, "h1", false) // something queued: the pass probes
		r.pass(t)
		hs, _ := r.store.Hosts()
		if got := hs["h1"].Failures; reached && got != 0 || !reached && got != 1 {
			t.Errorf("reached %v: %d failed contacts recorded", reached, got)
		}
	}
}
