package sched

import (
	"cmp"
	"math"
	"time"

	"github.com/gssh/gssh/job"
)

// Usage returns each user's fair-share usage at now, in GPU-seconds,
// weighed over time by fs: every use counts its share (whole GPUs, see
// job.Use) for each second from its start to its end (now, while it runs).
//
// With a half-life h a GPU-second counts 2^(-age/h): a job that ran on one
// GPU from t1 to t2 counts h/ln2 × (2^(-(now-t2)/h) − 2^(-(now-t1)/h)).
// With a window W only the seconds within [now−W, now] count, once each.
// Times after now count nothing; a use whose share is not in (0, 4096]
// (a corrupt record) counts nothing.
func Usage(uses []job.Use, now time.Time, fs FairShare) map[string]float64 {
	if fs == (FairShare{}) {
		fs.HalfLife = DefaultHalfLife
	}
	out := map[string]float64{}
	for _, u := range uses {
		if !(u.Share > 0 && u.Share <= maxShare) {
			continue // no GPU, or a record no job can make (corrupt): it counts nothing
		}
		end := u.Ended
		if end.IsZero() || end.After(now) {
			end = now
		}
		start := u.Started
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
			recent := 1.0 // a running job's end is now: 2^0
			if !end.Equal(now) {
				recent = math.Exp2(-now.Sub(end).Seconds() / h)
			}
			seconds = h / math.Ln2 * (recent - math.Exp2(-now.Sub(start).Seconds()/h))
		}
		if seconds > 0 {
			out[u.User] += seconds * u.Share
		}
	}
	return out
}

// maxShare is the most whole GPUs one use may count for: more GPUs than
// any host has.
const maxShare = 4096

// Horizon is how far back, from now, ended jobs can still count under fs:
// the window, or 20 half-lives (a GPU-second older than that counts less
// than 2^-20 of one, and is left out). A store keeps what ended since
// now − Horizon to work usage out from.
func Horizon(fs FairShare) time.Duration {
	if fs.Window > 0 {
		return fs.Window
	}
	return 20 * cmp.Or(fs.HalfLife, DefaultHalfLife)
}

// UsagePeriod is what gssh usage sums GPU-hours over under a half-life
// (a window is its own period).
const UsagePeriod = 7 * 24 * time.Hour

// LedgerHorizon is how far back, from now, a store keeps the uses of
// ended jobs: what fair-share can count under fs (Horizon) or gssh usage
// shows (the window, or UsagePeriod), whichever is longer. Housekeeping
// prunes older ones.
func LedgerHorizon(fs FairShare) time.Duration {
	return max(Horizon(fs), cmp.Or(fs.Window, UsagePeriod))
}

// Uses are the GPU uses of jobs (those that never started left out).
func Uses(jobs []job.Job) []job.Use {
	out := make([]job.Use, 0, len(jobs))
	for _, j := range jobs {
		if u, ok := j.Use(); ok {
			out = append(out, u)
		}
	}
	return out
}
