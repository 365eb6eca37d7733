package job

import (
	"cmp"
	"errors"
	"time"
)

// Keep's defaults.
const (
	// DefaultKeepJobs is how long after its end a job's record stays in
	// the queue's hot structures before it moves to the history.
	DefaultKeepJobs = 90 * 24 * time.Hour
	// DefaultKeepJobDirs is how long after its end a job's directories on
	// its workers (its log with them) are kept.
	DefaultKeepJobDirs = 14 * 24 * time.Hour
)

// Keep is how long an ended job's leftovers are kept: the inventory's
// policy keep_jobs and keep_job_dirs, which a pass's housekeeping applies
// (control.Options.Keep). The zero value means the defaults. It lives
// with the job records it ages, a leaf the inventory can import, rather
// than in sched, whose planner never reads it.
type Keep struct {
	// Jobs is how long after its end a job's record stays in the queue's
	// hot structures before it moves to the history (0 =
	// DefaultKeepJobs).
	Jobs time.Duration
	// JobDirs is how long after its end a job's directories on its
	// workers (its log with them) are kept (0 = DefaultKeepJobDirs).
	JobDirs time.Duration
}

// WithDefaults fills the zero ages of k.
func (k Keep) WithDefaults() Keep {
	return Keep{Jobs: cmp.Or(k.Jobs, DefaultKeepJobs), JobDirs: cmp.Or(k.JobDirs, DefaultKeepJobDirs)}
}

// Check reports an age below 0.
func (k Keep) Check() error {
	if k.Jobs < 0 || k.JobDirs < 0 {
		return errors.New("policy: keep_jobs and keep_job_dirs take a duration more than 0, such as 90d")
	}
	return nil
}
