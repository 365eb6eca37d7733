package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

func TestParseLab(t *testing.T) {
	hosts, err := ParseLab("2x4xA100-80G,1x2xRTX4090-24G", 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hosts {
		names = append(names, fmt.Sprintf("%s:%d", h.Name, len(h.Snapshot.GPUs)))
	}
	if got := strings.Join(names, " "); got != "h000-a100:4 h001-a100:4 h002-rtx4090:2" {
		t.Errorf("hosts %s", got)
	}
	g := hosts[2].Snapshot.GPUs[1]
	if g.UUID != "GPU-h002-rtx4090-1" || *g.MemTotal != 24<<30 || *g.MemFree != 24<<30 || g.Name != "RTX4090" || hosts[2].ReservePct != 10 {
		t.Errorf("GPU %+v", g)
	}
	if n, big := Capacity(hosts); n != 10 || big != 4 || SmallestGPU(hosts) != 24<<30 {
		t.Errorf("capacity %d, %d, smallest %d", n, big, SmallestGPU(hosts))
	}
	for spec, want := range map[string]string{
		"":                 "lab spec is empty",
		"4x8":              `group 1 "4x8": not HOSTSxGPUSxMODEL-MEM`,
		"0x8xA100-80G":     `the host count "0" is not a number from 1`,
		"4x99xA100-80G":    `the GPUs per host "99" is not a number from 1 to 64`,
		"4x8xA100":         `the GPU "A100" is not MODEL-MEM`,
		"4x8xA100-eighty":  `the memory "eighty"`,
		"4x8xA100-80G,2x2": `group 2 "2x2"`,
		"9999x8xA100-80G":  "more than 65536 GPUs in all",
	} {
		if _, err := ParseLab(spec, 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
	if _, err := ParseLab("1x1xA-1G", 100); err == nil {
		t.Error("a 100% reserve")
	}
}

// mixed is n jobs of several users, shapes and priorities, some
// walltimes shorter than their run (stopped), some longer, some none.
func mixed(n int, seed uint64) []Job {
	rng := rand.New(rand.NewPCG(seed, 1))
	jobs := make([]Job, n)
	at := time.Duration(0)
	for i := range jobs {
		at += time.Duration(rng.IntN(600)) * time.Second
		j := Job{Name: fmt.Sprintf("j%d", i), Submit: at, User: fmt.Sprintf("u%d", rng.IntN(4)), GPUs: []int{1, 1, 1, 2, 4}[rng.IntN(5)],
			Priority: 4 + rng.IntN(3), Runtime: time.Duration(60+rng.IntN(7200)) * time.Second}
		if rng.IntN(4) == 0 && j.GPUs == 1 {
			j.Mem = uint64(4+rng.IntN(20)) << 30
		}
		switch rng.IntN(3) {
		case 0:
			j.Walltime = j.Runtime * 2
		case 1:
			j.Walltime = j.Runtime / 2 // stopped
		}
		jobs[i] = j
	}
	jobs[n/2].GPUs = 16 // larger than any host: never placeable
	return jobs
}

var policies = map[string]sched.Policy{
	"gssh": {},
	// The default before the multifactor one: its decisions are pinned
	// as they were.
	"fairshare-only": {Weights: sched.FairShareAlone, MaxAge: 7 * 24 * time.Hour},
	"fifo":           {Order: sched.OrderFIFO, Fit: sched.FitFirst, Backfill: sched.BackfillNone},
	"fifo-backfill":  {Order: sched.OrderFIFO, Fit: sched.FitFirst, Backfill: sched.BackfillEasy},
	"firstfit":       {Order: sched.OrderPriority, Fit: sched.FitFirst, Backfill: sched.BackfillSkip},
}

// The simulator decides as the controller does: the same run through the
// simulator's store and through state.Mem (the state file's semantics,
// JSON copies and the ledger read back each pass) gives every job the
// same start, end and host, under every policy, and so does state.Mem
// read only for what changed (control.ChangeFeed). 60 jobs here; `make
// bench` runs 300 (TestSimulatorDecidesAsTheControllerLong, build tag
// longreplay: state.Mem's copies make it quadratic). The digests pin the
// simulator's decisions, per policy (outcomesDigest).
func TestSimulatorDecidesAsTheController(t *testing.T) {
	decidesAsTheController(t, 60, map[string]string{
		"gssh":           "4881e152fbc693a6",
		"fairshare-only": "dcc8aadbefb7d597",
		"fifo":           "a7973c3dd5adcd69",
		"fifo-backfill":  "9bbe3fe1fc5f5daf",
		"firstfit":       "2a1abe7e60b03c08",
	})
}

// decidesAsTheController runs mixed(n, 7) on 2 × 4 A100s and 2 T4s under
// every policy through the simulator's store and through state.Mem, and
// compares the outcomes, and each policy's outcomes with its pinned
// digest; the policies run in parallel.
func decidesAsTheController(t *testing.T, n int, digests map[string]string) {
	hosts, err := ParseLab("2x4xA100-80G,1x2xT4-16G", 10)
	if err != nil {
		t.Fatal(err)
	}
	jobs := mixed(n, 7)
	for name, pol := range policies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Hosts: hosts, Jobs: jobs, Policy: pol}
			fast, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			m := state.NewMem()
			mem, err := run(context.Background(), cfg, m, nil, nil, m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast.Jobs, mem.Jobs) {
				for i := range fast.Jobs {
					if fast.Jobs[i] != mem.Jobs[i] {
						t.Errorf("job %d: simulator %+v, controller over state.Mem %+v", i, fast.Jobs[i], mem.Jobs[i])
						break
					}
				}
			}
			// The controller that reads only what changed in state.Mem
			// decides as the one that reads its active jobs every pass.
			m = state.NewMem()
			fed, err := run(context.Background(), cfg, m, m, nil, m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fed.Jobs, mem.Jobs) || fed.Passes != mem.Passes {
				for i := range fed.Jobs {
					if fed.Jobs[i] != mem.Jobs[i] {
						t.Errorf("job %d: over state.Mem's changes %+v, over its active jobs %+v", i, fed.Jobs[i], mem.Jobs[i])
						break
					}
				}
			}
			started, stopped := 0, 0
			for i, o := range fast.Jobs {
				if o.Started {
					started++
					if o.End-o.Start < jobs[i].Runtime {
						stopped++
					}
				}
			}
			if fast.Jobs[n/2].Placeable || started != n-1 || stopped == 0 || fast.Passes != mem.Passes {
				t.Errorf("%d started, %d stopped at their walltime, job %d placeable %v; passes %d vs %d", started, stopped, n/2, fast.Jobs[n/2].Placeable, fast.Passes, mem.Passes)
			}
			if got := outcomesDigest(fast.Jobs); got != digests[name] {
				t.Errorf("the outcomes' digest is %s, pinned %s: a decision changed", got, digests[name])
			}
		})
	}
}

// A job runs its run time; one past its walltime is stopped just after
// it; what waits starts when the GPU frees, at that instant.
func TestRunTimes(t *testing.T) {
	hosts, _ := ParseLab("1x1xA100-80G", 0)
	jobs := []Job{
		{Name: "a", User: "ann", GPUs: 1, Runtime: time.Hour},
		{Name: "b", User: "bob", Submit: time.Minute, GPUs: 1, Runtime: time.Hour, Walltime: 30 * time.Minute},
		{Name: "c", User: "cat", Submit: 2 * time.Minute, GPUs: 1, Runtime: 10 * time.Minute},
	}
	res, err := Run(context.Background(), Config{Hosts: hosts, Jobs: jobs, Policy: policies["fifo"]})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ start, end time.Duration }{{0, time.Hour}, {time.Hour, 90*time.Minute + time.Nanosecond}, {90*time.Minute + time.Nanosecond, 100*time.Minute + time.Nanosecond}}
	for i, w := range want {
		if o := res.Jobs[i]; !o.Started || o.Start != w.start || o.End != w.end || o.Host != "h000-a100" || o.Share != 1 {
			t.Errorf("job %s: %+v, want %s to %s", jobs[i].Name, o, w.start, w.end)
		}
	}
	if res.Makespan != 100*time.Minute+time.Nanosecond {
		t.Errorf("makespan %s", res.Makespan)
	}
}

func BenchmarkRun(b *testing.B) {
	hosts, _ := ParseLab("4x8xA100-80G", 0)
	jobs := mixed(2000, 3)
	for name, pol := range policies {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(context.Background(), Config{Hosts: hosts, Jobs: jobs, Policy: pol}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
