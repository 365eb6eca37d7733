package control_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// BenchmarkPass is one scheduling pass of a busy lab over state.Mem (read
// for what changed since the last pass: control.ChangeFeed):
// 100 hosts × 8 idle 80 GiB GPUs, every GPU booked by the running jobs
// (3 two-GPU and 2 one-GPU jobs a host), and a queue of jobs of 20
// users, 1 to 8 GPUs each, that cannot start. The workers answer every
// poll "still running". The passes before the timed ones wrote every
// queued job's pending reason and read them back: a timed pass polls,
// plans and writes nothing, the steady state of a daemon between two
// events.
func BenchmarkPass(b *testing.B) {
	for _, size := range []struct{ queued, running int }{{10_000, 500}, {50, 200}} {
		b.Run(fmt.Sprintf("queued=%d/running=%d", size.queued, size.running), func(b *testing.B) {
			ctl, store := busyLab(b, 100, size.running, size.queued)
			b.ReportAllocs()
			for b.Loop() {
				res, err := ctl.Pass(context.Background())
				if err != nil || len(res.Errors) > 0 || len(res.Started) > 0 || len(res.Pending) > 0 || res.Queued != size.queued {
					b.Fatalf("pass: %v %v, %d started, %d pending reasons written, %d queued", err, res.Errors, len(res.Started), len(res.Pending), res.Queued)
				}
			}
			b.StopTimer()
			if act, err := store.Active(); err != nil || len(act) != size.queued+size.running {
				b.Fatalf("%d active jobs (%v)", len(act), err)
			}
		})
	}
}

// busyLab is BenchmarkPass's lab: hosts hosts of 8 GPUs, running jobs
// (as many on each host, sharing its 8 GPUs out: 5 a host are 3 jobs of
// two GPUs and 2 of one) started on them by one pass, then queued jobs
// submitted and two passes run: one leaves them queued with their
// reasons, the next reads those back. It returns the controller and its
// store.
func busyLab(b *testing.B, hosts, running, queued int) (*control.Controller, *state.Mem) {
	b.Helper()
	if running%hosts != 0 || running/hosts > 8 {
		b.Fatalf("%d running jobs on %d hosts of 8 GPUs: give a multiple of the hosts, at most 8 a host", running, hosts)
	}
	lab := make([]sched.Host, hosts)
	for i := range lab {
		lab[i] = idleHost(fmt.Sprintf("node%03d", i), 8)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := state.NewMem()
	ctl, err := control.New(control.Options{Store: store, Changes: store, Snapshots: &lab2{lab}, Workers: stillRunning{}, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	submit := func(n int, spec func(k int) job.Spec) {
		jobs := make([]job.Job, n)
		for k := range jobs {
			jobs[k] = job.Job{User: fmt.Sprintf("user%02d", k%20), SubmittedAt: now, Spec: spec(k)}
		}
		if _, err := store.SubmitAll(jobs, nil); err != nil {
			b.Fatal(err)
		}
	}
	per := (running + hosts - 1) / hosts // jobs a host: they share its 8 GPUs out, the larger first
	submit(running, func(k int) job.Spec {
		i := k / hosts // the ith job of its host
		gpus := 8/per + min(1, max(0, 8%per-i))
		return job.Spec{Argv: []string{"train"}, Host: "auto", Workdir: "~", GPUs: gpus, Timeout: 72 * time.Hour}
	})
	res, err := ctl.Pass(context.Background())
	if err != nil || len(res.Started) != running {
		b.Fatalf("%d of %d jobs started (%v, %v)", len(res.Started), running, err, res.Errors)
	}
	now = now.Add(time.Minute)
	submit(queued, func(k int) job.Spec {
		return job.Spec{Argv: []string{"train"}, Host: "auto", Workdir: "~", GPUs: 1 << (k % 4), Priority: k % 3, Timeout: 24 * time.Hour}
	})
	now = now.Add(time.Minute)
	if res, err := ctl.Pass(context.Background()); err != nil || len(res.Pending) != queued || res.Queued != queued {
		b.Fatalf("first pass over the queue: %d pending, %d queued (%v)", len(res.Pending), res.Queued, err)
	}
	// The next pass reads those reasons back, as every pass reads what
	// the one before wrote, and writes nothing.
	if res, err := ctl.Pass(context.Background()); err != nil || len(res.Pending) != 0 || res.Queued != queued {
		b.Fatalf("second pass over the queue: %d pending, %d queued (%v)", len(res.Pending), res.Queued, err)
	}
	return ctl, store
}

// lab2 is the same hosts at every probe.
type lab2 struct{ hosts []sched.Host }

func (l *lab2) Hosts(context.Context) ([]sched.Host, error) { return l.hosts, nil }

// stillRunning are workers whose jobs start and run on: every poll says
// each is running, as its pid file and /proc would.
type stillRunning struct{}

func (stillRunning) Start(_ context.Context, j job.Job) (job.Remote, error) {
	return job.Remote{PID: 1000 + int(j.ID), Dir: fmt.Sprintf("bench/%d.%d", j.ID, j.Attempt)}, nil
}

func (stillRunning) Abandon(context.Context, job.Job) (bool, error) { return false, nil }

func (stillRunning) Poll(_ context.Context, _ string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	out := make(map[job.ID]job.Status, len(jobs))
	for _, j := range jobs {
		out[j.ID] = job.Status{State: job.Running, PID: j.Remote.PID}
	}
	return out, nil
}

func (stillRunning) Stop(context.Context, job.Job, time.Duration, job.State) (job.Stopped, error) {
	return job.Stopped{}, nil
}
