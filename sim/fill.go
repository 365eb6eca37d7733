package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
)

// FillResult is one fill of a lab (the fragmentation experiment of Weng
// et al., "Beware of Fragmentation", ATC '23): jobs drawn from a trace in
// a seeded random order, with replacement, placed one after another with
// no departures until what they asked for reaches Target × the lab's
// GPUs.
type FillResult struct {
	Fit    sched.Fit `json:"placement"`
	Seed   uint64    `json:"seed"`
	Target float64   `json:"target"` // demand / GPUs at which the fill stops (1.3: 130 %)
	// Demand is what the drawn jobs asked for, in GPUs (a --mem job: its
	// part of the GPU); Allocated what was placed, as a share of the
	// lab's GPUs; Unplaced the demand that could not be placed, in GPUs.
	Demand    float64 `json:"demand_gpus"`
	Allocated float64 `json:"allocated"`
	Unplaced  float64 `json:"unplaced_gpus"`
	Drawn     int     `json:"jobs_drawn"`
	Placed    int     `json:"jobs_placed"`
	// What was left, as shares of the lab's GPUs: Idle the GPUs no job
	// holds, Holes the free part of GPUs that shared jobs partly hold
	// (Allocated + Idle + Holes = 1).
	Idle  float64 `json:"idle"`
	Holes float64 `json:"holes"`
}

// Fill draws from jobs (with replacement, in an order seeded by seed) and
// places each, with fit, on hosts as the planner would (sched.Plan with
// the jobs placed so far running, which never end), until the drawn
// demand reaches target × the lab's GPUs. A job no host could ever take
// is drawn again. A --mem job's demand is its memory over its GPU's.
func Fill(hosts []sched.Host, jobs []Job, target float64, fit sched.Fit, seed uint64) (FillResult, error) {
	gpus, _ := Capacity(hosts)
	res := FillResult{Fit: fit, Seed: seed, Target: target}
	if gpus == 0 || len(jobs) == 0 || !(target > 0) {
		return res, fmt.Errorf("fill: a lab with GPUs, some jobs and a target above 0 are needed")
	}
	least := SmallestGPU(hosts)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	pol := sched.Policy{Order: sched.OrderFIFO, Fit: fit, Backfill: sched.BackfillSkip}
	var running []job.Job
	var allocated float64
	placeable := map[[2]uint64]bool{}
	for tries := 0; res.Demand < target*float64(gpus); tries++ {
		if tries > 100*len(jobs)+10000 {
			return res, fmt.Errorf("fill: no job of the trace fits the lab")
		}
		j := jobs[rng.IntN(len(jobs))]
		req := sched.Request{Host: "auto", GPUs: j.GPUs, MemPerGPU: j.Mem}
		key := [2]uint64{uint64(j.GPUs), j.Mem}
		ok, seen := placeable[key]
		if !seen {
			ok = sched.Validate(hosts, req) == nil
			placeable[key] = ok
		}
		if !ok {
			continue
		}
		demand := float64(j.GPUs)
		if j.Mem > 0 {
			demand = min(float64(j.Mem)/float64(least), 1)
		}
		res.Drawn++
		res.Demand += demand
		q := job.Job{ID: job.ID(res.Drawn), State: job.Queued, Spec: job.Spec{Host: "auto", GPUs: j.GPUs, MemPerGPU: j.Mem, Timeout: time.Hour}}
		d := sched.Plan(sched.Input{Now: epoch, Hosts: hosts, Running: running, Queue: []job.Job{q}, Policy: pol, Terse: true})
		if len(d.Starts) == 0 {
			res.Unplaced += demand
			continue
		}
		q.State, q.Placement, q.StartedAt = job.Running, d.Starts[0].Placement, epoch
		running = append(running, q)
		allocated += q.Placement.Share
		res.Placed++
	}
	res.Allocated = allocated / float64(gpus)
	booked := map[string]float64{} // GPU → share booked
	for _, j := range running {
		for _, g := range j.Placement.GPUs {
			booked[j.Placement.Host+"/"+g] += j.Placement.Share / float64(len(j.Placement.GPUs))
		}
	}
	for _, b := range booked {
		res.Holes += max(1-b, 0)
	}
	res.Holes /= float64(gpus)
	res.Idle = float64(gpus-len(booked)) / float64(gpus)
	return res, nil
}

// FillSummary is the mean of fills over seeds, for one placement.
type FillSummary struct {
	Fit       sched.Fit `json:"placement"`
	Seeds     int       `json:"seeds"`
	Allocated float64   `json:"allocated"`     // mean share of the lab's GPUs placed
	Unplaced  float64   `json:"unplaced_gpus"` // mean demand that could not be placed, in GPUs
	Demand    float64   `json:"demand_gpus"`   // mean demand drawn, in GPUs
	Idle      float64   `json:"idle"`          // mean share of the lab's GPUs left with no job
	Holes     float64   `json:"holes"`         // mean share left free on GPUs partly booked
}

// FillAll fills hosts under each placement, once per seed 0 … seeds−1,
// and averages.
func FillAll(hosts []sched.Host, jobs []Job, target float64, fits []sched.Fit, seeds int) ([]FillSummary, error) {
	hosts = slices.Clone(hosts)
	sched.Prepare(hosts) // the lab's GPUs are listed once, not once per job placed
	out := make([]FillSummary, len(fits))
	for i, fit := range fits {
		out[i] = FillSummary{Fit: fit, Seeds: seeds}
		for seed := range uint64(seeds) {
			r, err := Fill(hosts, jobs, target, fit, seed)
			if err != nil {
				return nil, err
			}
			out[i].Allocated += r.Allocated / float64(seeds)
			out[i].Unplaced += r.Unplaced / float64(seeds)
			out[i].Demand += r.Demand / float64(seeds)
			out[i].Idle += r.Idle / float64(seeds)
			out[i].Holes += r.Holes / float64(seeds)
		}
	}
	return out, nil
}
