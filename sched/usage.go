package sched

import (
	"math"
	"time"

	"github.com/gssh/gssh/job"
)

// Usage returns each user's fair-share usage at now, in GPU-seconds,
// weighed over time by fs: every job that ran (or runs) counts its GPU
// share (job.Placement.Share; 1 per GPU when not recorded) for each second
// from its start to its end (now, while it runs).
//
// With a half-life h a GPU-second counts 2^(-age/h): a job that ran on one
// GPU from t1 to t2 counts h/ln2 × (2^(-(now-t2)/h) − 2^(-(now-t1)/h)).
// With a window W only the seconds within [now−W, now] count, once each.
// Jobs that never started count nothing; times after now count nothing.
func Usage(jobs []job.Job, now time.Time, fs FairShare) map[string]float64 {
	if fs == (FairShare{}) {
		fs.HalfLife = DefaultHalfLife
	}
	out := map[string]float64{}
	for _, j := range jobs {
		if j.StartedAt.IsZero() {
			continue
		}
		end := j.EndedAt
		if end.IsZero() || !j.State.Terminal() || end.After(now) {
			end = now
		}
		start := j.StartedAt
		if !start.Before(end) {
			continue
		}
		var seconds float64
		if fs.Window > 0 {
			from := start
			if w := now.Add(-fs.Window); w.After(from) {
				from = w
			}
			if from.Before(end) {
				seconds = end.Sub(from).Seconds()
			}
		} else {
			h := fs.HalfLife.Seconds()
			seconds = h / math.Ln2 * (math.Exp2(-now.Sub(end).Seconds()/h) - math.Exp2(-now.Sub(start).Seconds()/h))
		}
		if seconds > 0 {
			out[j.User] += seconds * ShareOf(j)
		}
	}
	return out
}

// ShareOf is the number of whole GPUs j counts for (see job.Placement.Share).
func ShareOf(j job.Job) float64 {
	if j.Placement.Share > 0 {
		return j.Placement.Share
	}
	return float64(len(j.Placement.GPUs))
}
