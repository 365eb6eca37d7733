package sched

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// The planner's shortcuts (a reservation searched host by host with a
// quick "no" from the ledger, Prepare's unit lists, the booking keys
// read without making strings) decide exactly what the plain way does.

func TestIsIndex(t *testing.T) {
	for _, id := range []string{"0", "1", "7", "10", "007", "01", "", "-1", "+1", "1e3", "GPU-1", "2147483647", "99999999999999999999", "12a", " 1"} {
		for _, index := range []int{-1, 0, 1, 7, 10, 2147483647} {
			if got, want := isIndex(id, index), id == strconv.Itoa(index); got != want {
				t.Errorf("isIndex(%q, %d) = %v, want %v", id, index, got, want)
			}
		}
	}
}

// reserveGlobal is reserve as it was first written: every holder's end in
// one list, earliest first, each host tried with all of it before it.
func reserveGlobal(hosts []*node, w *want, pol Policy, now time.Time) *Reservation {
	type ending struct {
		at   time.Time
		job  job.ID
		host *node
	}
	var ends []ending
	seen := map[job.ID]bool{}
	for _, n := range hosts {
		for _, b := range n.held {
			for _, h := range b.Holders {
				if !seen[h.Job] && !n.gone[h.Job] {
					seen[h.Job] = true
					at := h.Ends
					if at.IsZero() || at.Before(now) {
						at = now
					}
					ends = append(ends, ending{at, h.Job, n})
				}
			}
		}
	}
	slices.SortFunc(ends, func(a, b ending) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.job, b.job)) })
	gone := maps.Clone(hosts[0].gone)
	if gone == nil {
		gone = map[job.ID]bool{}
	}
	for _, e := range ends {
		gone[e.job] = true
		trial := e.host.whatIf(gone)
		us, why := feasible(trial, w)
		if !why.ok() {
			continue
		}
		p := choose(pol.Fit, []option{{trial, us}}, w)
		return &Reservation{Host: p.Host, GPUs: p.GPUs, Indexes: p.Indexes, From: e.at}
	}
	return nil
}

// busyLab is a random lab of 1-6 hosts of 1-8 GPUs (some without UUID,
// some with foreign processes) full of running jobs, exclusive and
// shared, with ends in the next day (some unknown, some past).
func busyLab(rng *rand.Rand, now time.Time) ([]Host, []job.Job) {
	var hosts []Host
	var run []job.Job
	id := job.ID(1)
	for i := range 1 + rng.IntN(6) {
		var gs []gpuinfo.GPU
		for k := range 1 + rng.IntN(8) {
			g := gpu(k, uint64(16+rng.IntN(65))*GiB)
			if rng.IntN(6) == 0 {
				g.UUID = ""
			}
			if rng.IntN(8) == 0 {
				foreign(&g)
			}
			gs = append(gs, g)
		}
		h := host(fmt.Sprintf("gpu%02d", i), gs...)
		hosts = append(hosts, h)
		for k := 0; k < len(gs); {
			n := min(1+rng.IntN(3), len(gs)-k)
			var ids []string
			for _, g := range gs[k : k+n] {
				ids = append(ids, cmp.Or(g.UUID, strconv.Itoa(g.Index)))
			}
			var mem uint64
			if rng.IntN(2) == 0 {
				mem = uint64(1+rng.IntN(12)) * GiB
			}
			j := running(id, h.Name, mem, ids...)
			id++
			j.StartedAt = now.Add(-time.Duration(rng.IntN(10)) * time.Hour)
			switch rng.IntN(4) {
			case 0: // no walltime: the estimate
			case 1:
				j.Spec.Timeout = time.Duration(1+rng.IntN(3)) * time.Hour // some are overdue
			default:
				j.Spec.Timeout = time.Duration(10+rng.IntN(24)) * time.Hour
			}
			run = append(run, j)
			if mem == 0 || rng.IntN(2) == 0 {
				k += n
			}
		}
	}
	return hosts, run
}

func TestReserveAsThePlainSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	now := t0
	found := 0
	for round := range 500 {
		hosts, run := busyLab(rng, now)
		pol := Policy{Fit: []Fit{FitFirst, FitBest}[round%2]}.WithDefaults()
		ns := new(Planner).nodes(hosts, run, "", func(j *job.Job) time.Time { return expectedEnd(j, pol, now) }, false)
		var gone map[job.ID]bool
		if round%3 == 0 { // a forecast has taken some jobs to have ended
			gone = map[job.ID]bool{}
			for _, j := range run {
				if rng.IntN(4) == 0 {
					gone[j.ID] = true
				}
			}
			for _, n := range ns {
				n.gone = gone
			}
		}
		r := Request{Host: "auto", GPUs: 1 + rng.IntN(8)}
		if rng.IntN(2) == 0 {
			r.MemPerGPU = uint64(1+rng.IntN(70)) * GiB
		}
		w := &want{Request: r, job: 1000}
		got, want := reserve(ns, w, pol, now), reserveGlobal(ns, w, pol, now)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %+v on %d hosts, %d running: reserve = %+v, the plain search %+v", round, r, len(hosts), len(run), got, want)
		}
		if got != nil {
			found++
		}
	}
	if found < 100 || found > 400 {
		t.Fatalf("%d of 500 rounds found a reservation: the cases do not try both ways", found)
	}
}

// TestPlanPrepared: a plan on prepared hosts is the plan on plain ones,
// and a snapshot replaced after Prepare is listed afresh.
func TestPlanPrepared(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	now := t0
	starts := 0
	for round := range 100 {
		hosts, run := busyLab(rng, now)
		hosts = append(hosts, host("mig", migGPU(0), migGPU(1)))
		var queue []job.Job
		for id := range 1 + rng.IntN(30) {
			r := Request{Host: "auto", GPUs: 1 + rng.IntN(3)}
			if rng.IntN(2) == 0 {
				r.MemPerGPU = uint64(1+rng.IntN(40)) * GiB
			}
			queue = append(queue, queued(job.ID(2000+id), r))
		}
		in := Input{Now: now, Hosts: hosts, Running: run, Queue: queue}
		plain := Plan(in)
		starts += len(plain.Starts)
		prepared := slices.Clone(hosts)
		Prepare(prepared)
		in.Hosts = prepared
		if got := Plan(in); !reflect.DeepEqual(got, plain) {
			t.Fatalf("round %d: prepared hosts changed the plan:\n%+v\n%+v", round, got, plain)
		}
		// A new snapshot of host 0, all of its GPUs taken by someone else.
		snap := prepared[0].Snapshot
		snap.GPUs = slices.Clone(snap.GPUs)
		for i := range snap.GPUs {
			foreign(&snap.GPUs[i])
		}
		prepared[0].Snapshot = snap
		fresh := slices.Clone(hosts)
		fresh[0].Snapshot = snap
		in.Hosts = fresh
		want := Plan(in)
		in.Hosts = prepared
		if got := Plan(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: a snapshot replaced after Prepare was planned on the old list:\n%+v\n%+v", round, got, want)
		}
	}
	if starts < 100 {
		t.Fatalf("only %d starts in 100 plans: the labs are too full to tell", starts)
	}
}
