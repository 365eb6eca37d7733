package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// A Planner kept from pass to pass (its ledgers reused, and the verdicts
// of the hosts nothing changed on kept) decides as Plan does at every
// pass, with words and without, as the lab changes under it: jobs start
// and end, GPUs recover, hosts are drained and undrained, a snapshot is
// replaced, or changed in place and prepared again.
func TestPlannerAsPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	policies := []Policy{{}, {Order: OrderFIFO, Fit: FitFirst, Backfill: BackfillNone}, {Order: OrderFIFO, Fit: FitFirst, Backfill: BackfillEasy},
		{Order: OrderPriority, Fit: FitBest, Backfill: BackfillSkip}}
	kept := 0 // passes in which some host kept its verdicts
	for round := range 60 {
		now := t0
		hosts, run := busyLab(rng, now)
		Prepare(hosts)
		var queue []job.Job
		next := job.ID(1000)
		pol := policies[round%len(policies)]
		var p Planner
		for pass := range 40 {
			for range rng.IntN(3) {
				r := excl(1 + rng.IntN(3))
				if rng.IntN(2) == 0 {
					r = shared(1+rng.IntN(2), uint64(1+rng.IntN(40))*GiB)
				}
				switch rng.IntN(8) {
				case 0:
					r.Host = hosts[rng.IntN(len(hosts))].Name
				case 1:
					r.Labels = []string{"l0"}
				}
				j := queued(next, r)
				next++
				j.User, j.Spec.Priority = fmt.Sprintf("u%d", rng.IntN(3)), rng.IntN(3)
				j.Spec.Timeout = time.Duration(rng.IntN(5)) * time.Hour
				queue = append(queue, j)
			}
			run = slices.DeleteFunc(run, func(job.Job) bool { return rng.IntN(20) == 0 })
			h := &hosts[rng.IntN(len(hosts))]
			switch rng.IntN(12) {
			case 0:
				h.Recovering = map[int]string{0: "recovering: lost"}
			case 1:
				h.Recovering = nil
			case 2:
				h.Drained = &Drain{By: "bob", From: now.Add(time.Duration(rng.IntN(3)) * time.Hour)}
			case 3:
				h.Drained, h.Drain = nil, rng.IntN(2) == 0
			case 4: // a new snapshot: the host's GPUs replaced, one of them now in use by someone else
				gs := slices.Clone(h.Snapshot.GPUs)
				g := &gs[rng.IntN(len(gs))]
				g.MemUsed, g.MemFree = ptr(uint64(GiB)), ptr(*g.MemTotal-GiB)
				g.Procs = []gpuinfo.Proc{{PID: 77, Name: "python", UsedBytes: ptr(uint64(GiB)), GPUUUID: g.UUID}}
				h.Snapshot.GPUs = gs
			case 5: // changed in place, and prepared again
				g := &h.Snapshot.GPUs[rng.IntN(len(h.Snapshot.GPUs))]
				g.Health = map[gpuinfo.Health]gpuinfo.Health{gpuinfo.HealthOK: gpuinfo.HealthError}[g.Health]
				if g.Health == "" {
					g.Health = gpuinfo.HealthOK
				}
				Prepare(hosts)
			case 6:
				h.Labels = []string{fmt.Sprint("l", rng.IntN(2))}
			}
			in := Input{Now: now, Policy: pol, Hosts: hosts, Running: run, Queue: queue, Terse: pass%2 == 0}
			if pass%5 == 4 && len(queue) > 0 {
				in.Explain = queue[rng.IntN(len(queue))].ID
			}
			got, want := p.Plan(in), Plan(in)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, pass %d: the Planner decided otherwise:\n%+v\nPlan:\n%+v", round, pass, got, want)
			}
			for _, n := range p.store {
				if n.version > 0 && n.cache != nil && n.was.keep {
					kept++
					break
				}
			}
			placed := map[job.ID]job.Placement{}
			for _, s := range want.Starts {
				placed[s.Job] = s.Placement
			}
			queue = slices.DeleteFunc(queue, func(j job.Job) bool {
				pl, ok := placed[j.ID]
				if ok {
					j.State, j.Placement, j.StartedAt = job.Running, pl, now
					run = append(run, j)
				}
				return ok
			})
			now = now.Add(time.Duration(rng.IntN(40)) * time.Minute)
		}
	}
	if kept < 1000 {
		t.Fatalf("hosts kept their verdicts in %d passes: the test does not try the Planner's cache", kept)
	}
}

// A host's verdicts under the last plan's reservation are not the next
// plan's: there, job 20 finds gpu01's free GPU no longer reserved (the
// reservation moved to gpu02, for another head of the queue) and starts.
func TestPlannerReservationMoves(t *testing.T) {
	a := host("gpu01", gpus(2, 80*GiB)...)
	b := host("gpu02", gpu(0, 80*GiB))
	b.Labels = []string{"big"}
	b.Snapshot.GPUs[0].UUID = "GPU-B0"
	hosts := []Host{a, b}
	Prepare(hosts)
	r1 := running(1, "gpu01", 0, "GPU-00")
	r1.StartedAt, r1.Spec.Timeout = t0, time.Hour
	r2 := running(2, "gpu02", 0, "GPU-B0")
	r2.StartedAt, r2.Spec.Timeout = t0, 3*time.Hour
	x := queued(10, excl(2))
	z := queued(15, Request{Host: "auto", GPUs: 1, Labels: []string{"big"}})
	y := queued(20, excl(1))
	y.Spec.Timeout = 4 * time.Hour
	pol := Policy{Order: OrderFIFO, Fit: FitFirst, Backfill: BackfillEasy}
	var p Planner
	for i, queue := range [][]job.Job{{x, y}, {z, y}} {
		in := Input{Now: t0, Policy: pol, Hosts: hosts, Running: []job.Job{r1, r2}, Queue: queue, Terse: true}
		got, want := p.Plan(in), Plan(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plan %d: the Planner decided otherwise:\n%+v\nPlan:\n%+v", i+1, got, want)
		}
		if starts := len(want.Starts); starts != i {
			t.Fatalf("plan %d: %d starts, want %d: %+v", i+1, starts, i, want)
		}
	}
}
