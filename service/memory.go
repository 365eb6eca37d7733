package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/reap"
)

// MemorySchema is the schema name of a job's GPU memory over time
// (GET /v1/jobs/{id}/memory).
const MemorySchema = "gssh.job.memory/v1"

// MemoryDoc is a running or recent job's GPU memory over time, as gssh
// serve sampled it (SampleMemory): oldest first.
type MemoryDoc struct {
	Schema  string         `json:"schema"` // MemorySchema
	Job     job.ID         `json:"job"`
	Samples []MemorySample `json:"samples"`
}

// MemorySample is what a job's processes used of GPU memory at one time.
type MemorySample struct {
	Time  time.Time `json:"time"`
	Bytes uint64    `json:"bytes"` // the sum of its GPU processes' used memory (used_gpu_memory)
}

// How many samples a job keeps (maxSamples: when full, every other one
// goes and the job's spacing doubles, so a long job keeps its whole run
// at a coarser grain), and how long after its last sample a job is
// forgotten.
const (
	maxSamples   = 360
	forgetMemory = time.Hour
)

// memoryLog is gssh serve's samples of each job's GPU memory.
type memoryLog struct {
	mu   sync.Mutex
	jobs map[job.ID]*memorySeries
}

type memorySeries struct {
	gap     time.Duration // the least time between two samples kept
	samples []MemorySample
}

// SampleMemory records, for each job with GPU processes, the memory they
// use now, from gssh serve's GPU snapshots (its streams' frames, at most
// maxAge old, or a probe): gssh serve calls it after passes. Jobs not
// sampled for an hour are forgotten. Errors: the GPUs could not be read
// (some hosts down is a *PartialError: the others are sampled).
func (l *Local) SampleMemory(ctx context.Context, maxAge time.Duration) error {
	doc, err := l.CachedGPUs(ctx, HostQuery{MaxAge: maxAge})
	var pe *PartialError
	if err != nil && !errors.As(err, &pe) {
		return err // some hosts down: the others' jobs are sampled
	}
	used := map[job.ID]uint64{}
	perUnit := map[job.ID]map[string]uint64{} // by the GPU's or MIG device's id
	util := map[string]int{}                  // utilization.gpu by GPU UUID
	for _, h := range doc.Hosts {
		for _, g := range h.GPUs {
			if g.UtilPct != nil && g.UUID != "" {
				util[g.UUID] = *g.UtilPct
			}
		}
		for _, p := range h.Processes {
			if p.Kind == reap.KindJob && p.Job != 0 && p.UsedBytes != nil {
				used[p.Job] += *p.UsedBytes
				if perUnit[p.Job] == nil {
					perUnit[p.Job] = map[string]uint64{}
				}
				perUnit[p.Job][h.Host+"/"+p.GPUID] += *p.UsedBytes
			}
		}
	}
	l.recordUse(perUnit, util, doc.Time)
	m := &l.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jobs == nil {
		m.jobs = map[job.ID]*memorySeries{}
	}
	for id, b := range used {
		s := m.jobs[id]
		if s == nil {
			s = &memorySeries{}
			m.jobs[id] = s
		}
		if n := len(s.samples); n > 0 && doc.Time.Sub(s.samples[n-1].Time) < s.gap {
			continue
		}
		s.samples = append(s.samples, MemorySample{Time: doc.Time, Bytes: b})
		if len(s.samples) > maxSamples {
			kept := s.samples[:0]
			for i := 0; i < len(s.samples); i += 2 {
				kept = append(kept, s.samples[i])
			}
			s.samples = kept
			s.gap = max(2*s.gap, time.Second)
		}
	}
	for id, s := range m.jobs {
		if n := len(s.samples); n > 0 && doc.Time.Sub(s.samples[n-1].Time) > forgetMemory {
			delete(m.jobs, id)
		}
	}
	return err
}

// Memory is job id's GPU memory over time as gssh serve sampled it; no
// samples when none were taken (not served, never on a GPU, or
// forgotten an hour after it ended). Errors: the job is not there.
func (l *Local) Memory(ctx context.Context, id job.ID) (MemoryDoc, error) {
	if _, err := l.Job(ctx, id); err != nil {
		return MemoryDoc{}, err
	}
	doc := MemoryDoc{Schema: MemorySchema, Job: id, Samples: []MemorySample{}}
	m := &l.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.jobs[id]; s != nil {
		doc.Samples = append(doc.Samples, s.samples...)
	}
	return doc, nil
}

// recordUse adds a sample taken at to each sampled job's record
// (job.GPUUse): its peak memory on one unit, its GPUs' utilization, and
// whether they have read 0 % for the policy's idle_after. One write transaction
// for all of them; a job that ended meanwhile keeps what it had.
func (l *Local) recordUse(perUnit map[job.ID]map[string]uint64, util map[string]int, at time.Time) {
	if len(perUnit) == 0 {
		return
	}
	idleAfter := inventory.DefaultIdleAfter
	if f, err := l.hosts(); err == nil {
		idleAfter = f.Inventory().Policy.IdleAfterOrDefault()
	}
	st, err := l.store(false)
	if err != nil {
		return // no state yet, or it is unreadable: the pass says so
	}
	ids := make([]job.ID, 0, len(perUnit))
	for id := range perUnit {
		ids = append(ids, id)
	}
	st.UpdateEach(ids, func(i int, j *job.Job) error {
		if !j.State.Active() {
			return errUnchanged
		}
		var utils []int
		for _, g := range j.Placement.GPUs {
			if pct, ok := util[g]; ok {
				utils = append(utils, pct)
			}
		}
		j.GPUUse = addSample(j.GPUUse, perUnit[ids[i]], utils, at, idleAfter)
		return nil
	})
}

// addSample is u (nil: none yet) with one more sample taken at: the
// job's memory in use on each of its units (bytes) and the utilization
// of those of its GPUs that read one. Its GPUs are idle from the first
// sample where all read 0 % on, until one reads more; Idle once that
// has lasted idleAfter.
func addSample(u *job.GPUUse, perUnit map[string]uint64, utils []int, at time.Time, idleAfter time.Duration) *job.GPUUse {
	out := job.GPUUse{}
	if u != nil {
		out = *u
	}
	for _, b := range perUnit {
		out.PeakBytes = max(out.PeakBytes, b)
	}
	out.Samples++
	if len(utils) > 0 {
		sum := 0
		for _, p := range utils {
			sum += p
		}
		mean := float64(sum) / float64(len(utils))
		out.UtilPct = (out.UtilPct*float64(out.UtilSamples) + mean) / float64(out.UtilSamples+1)
		out.UtilSamples++
		switch {
		case sum > 0:
			out.IdleSince = time.Time{}
		case out.IdleSince.IsZero():
			out.IdleSince = at
		}
		out.Idle = !out.IdleSince.IsZero() && at.Sub(out.IdleSince) >= idleAfter
	}
	return &out
}

// IdleDue are the running jobs of jobs that gssh serve should cancel as
// idle at now: flagged idle, their GPUs at 0 % for idleAfter and then
// idleCancel more (0: none ever).
func IdleDue(jobs []job.Job, now time.Time, idleAfter, idleCancel time.Duration) []job.Job {
	if idleCancel <= 0 {
		return nil
	}
	var out []job.Job
	for _, j := range jobs {
		if u := j.GPUUse; j.State == job.Running && u != nil && u.Idle && now.Sub(u.IdleSince) >= idleAfter+idleCancel {
			out = append(out, j)
		}
	}
	return out
}

// CancelIdle cancels the running jobs the policy's idle_cancel says are
// due (IdleDue), each recorded cancelled by gssh serve with why. It
// returns those it cancelled; errors are each job's, joined.
func (l *Local) CancelIdle(ctx context.Context, jobs []job.Job) ([]job.Job, error) {
	f, err := l.hosts()
	if err != nil {
		return nil, err
	}
	pol := f.Inventory().Policy
	after := pol.IdleAfterOrDefault()
	var done []job.Job
	var errs []error
	for _, j := range IdleDue(jobs, l.opt.Now(), after, pol.IdleCancel) {
		by := fmt.Sprintf("gssh serve: its GPUs at 0 %% utilization since %s (idle_cancel)", j.GPUUse.IdleSince.UTC().Format("2006-01-02 15:04 UTC"))
		res, err := l.Cancel(ctx, CancelRequest{ID: j.ID, By: by})
		if err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", j.Ref(), err))
			continue
		}
		done = append(done, res.Job)
	}
	return done, errors.Join(errs...)
}

// errUnchanged leaves a job of an UpdateEach as it was.
var errUnchanged = errors.New("unchanged")
