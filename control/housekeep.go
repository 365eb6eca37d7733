package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Housekeeping bounds (the ages are job.Keep's: the policy's keep_jobs
// and keep_job_dirs).
const (
	// MaxDirsPerHost is the most job directories one pass removes on one
	// host (in one command); the rest wait for the next passes.
	MaxDirsPerHost = 100
	// dirsScan is the most jobs due for housekeeping one pass looks at.
	dirsScan = 1000
)

// DirRemover removes the directories of ended jobs' attempts on a host
// (housekeeping: Options.Remover); launch.Workers is one.
type DirRemover interface {
	// RemoveDirs removes dirs, all on host, in one call and says what
	// became of each, in their order. An error wrapping job.ErrNoContact
	// means the host did not answer: nothing is known of any of them.
	RemoveDirs(ctx context.Context, host string, dirs []job.WorkerDir) ([]job.DirRemoval, error)
}

// Keeper keeps the store's history (Options.Keeper; *state.Bolt and
// *state.Mem are ones: see state.Keeper for each method's contract):
// housekeeping moves the records of jobs long ended to the history, prunes
// the usage ledger, and marks the jobs whose worker directories it dealt
// with.
type Keeper interface {
	Trim(b state.TrimBefore) (state.Trimmed, error)
	DirsDue(before time.Time, limit int) ([]job.Job, error)
	MarkHousekept(marks map[job.ID]job.Housekept) ([]job.Job, error)
}

// Housekeeping is what a pass's housekeeping did (Result.Housekeeping).
type Housekeeping struct {
	// KeepJobs and KeepJobDirs are the ages it applied (the policy's,
	// or the defaults).
	KeepJobs, KeepJobDirs time.Duration
	// Moved counts the ended jobs whose records it moved to the history
	// (ended more than KeepJobs ago); Pruned the usage ledger entries it
	// removed (older than fair-share counts or gssh usage shows: see
	// sched.LedgerHorizon).
	Moved, Pruned int
	// Dirs are the hosts where it removed job directories, in name order.
	Dirs []HostDirs
	// Kept are the jobs whose directories (some or all) it left where
	// they are, Job.Housekept.Kept saying why; they are not tried again.
	Kept []job.Job
}

// Did reports whether the housekeeping did anything worth a line.
func (h Housekeeping) Did() bool {
	return h.Moved > 0 || h.Pruned > 0 || len(h.Dirs) > 0 || len(h.Kept) > 0
}

// HostDirs is what housekeeping removed on one host.
type HostDirs struct {
	Host    string
	Jobs    int    // the ended jobs whose directories were removed there
	Removed int    // directories removed
	Bytes   uint64 // what they held (du -sk on the worker)
}

// housekeep trims what grows, at the end of a pass: the directories of
// jobs that ended keep_job_dirs ago are removed on the hosts this pass
// reached (one command per host, at most MaxDirsPerHost directories),
// and recorded in the jobs (one transaction); then the records of jobs
// that ended keep_jobs ago move to the history and the usage ledger
// forgets what fair-share no longer counts (Keeper.Trim: short
// transactions). Nothing is done without a Keeper (Options.Keeper).
func (c *Controller) housekeep(ctx context.Context, res *Result) {
	k := c.keeper
	if k == nil {
		return
	}
	hk := Housekeeping{KeepJobs: c.keep.Jobs, KeepJobDirs: c.keep.JobDirs}
	if c.remover != nil {
		c.removeDirs(ctx, k, &hk, res)
	}
	now := c.now()
	tr, err := k.Trim(state.TrimBefore{Jobs: now.Add(-hk.KeepJobs), Uses: now.Add(-sched.LedgerHorizon(c.policy.FairShare))})
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("housekeeping: %w", err))
	}
	hk.Moved, hk.Pruned = tr.Moved, tr.Pruned
	res.Housekeeping = hk
}

// dirJob is one due job's directories, by host, and what is left of them.
type dirJob struct {
	j     job.Job
	hosts map[string][]job.WorkerDir
	kept  []string // why directories are left
}

// removeDirs removes the directories of the jobs due (ended keep_job_dirs
// ago, not housekept yet) whose hosts all answered this pass, and
// records what it did in each.
func (c *Controller) removeDirs(ctx context.Context, k Keeper, hk *Housekeeping, res *Result) {
	now := c.now()
	due, err := k.DirsDue(now.Add(-hk.KeepJobDirs), dirsScan)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("housekeeping: %w", err)) // the others still get theirs
	}
	byHost := map[string][]job.WorkerDir{}
	var jobs []*dirJob
	for _, j := range due {
		d := c.dirsOf(j)
		fits := true
		for h, dirs := range d.hosts {
			fits = fits && c.reached[h] && len(byHost[h])+len(dirs) <= MaxDirsPerHost
		}
		if !fits {
			continue // a host this pass did not reach, or its share is full: a later pass
		}
		for h, dirs := range d.hosts {
			byHost[h] = append(byHost[h], dirs...)
		}
		jobs = append(jobs, d)
	}
	hosts := slices.Sorted(maps.Keys(byHost))
	got := make([][]job.DirRemoval, len(hosts))
	errs := make([]error, len(hosts))
	c.onEach(hosts, func(i int, h string) { got[i], errs[i] = c.remover.RemoveDirs(ctx, h, byHost[h]) })
	outcome := map[string]map[job.WorkerDir]job.DirRemoval{} // by host
	for i, h := range hosts {
		switch {
		case errs[i] == nil && len(got[i]) == len(byHost[h]):
			outcome[h] = map[job.WorkerDir]job.DirRemoval{}
			for n, d := range byHost[h] {
				outcome[h][d] = got[i][n]
			}
		case errs[i] == nil:
			res.Errors = append(res.Errors, fmt.Errorf("housekeeping on %s: %d answers for %d job directories; tried again next pass", h, len(got[i]), len(byHost[h])))
		case !errors.Is(errs[i], job.ErrNoContact): // one that did not answer is tried again next pass, quietly
			res.Errors = append(res.Errors, fmt.Errorf("housekeeping: remove job directories: %w", errs[i]))
		}
	}
	marks := map[job.ID]job.Housekept{}
	tally := map[string]*HostDirs{}
	for _, d := range jobs {
		m := job.Housekept{At: now}
		kept := slices.Clone(d.kept)
		done := true
		for _, h := range slices.Sorted(maps.Keys(d.hosts)) {
			o, ok := outcome[h]
			if !ok {
				done = false
				break
			}
			removed, bytes := 0, uint64(0)
			for _, w := range d.hosts[h] {
				r := o[w]
				switch {
				case r.Err != "":
					kept = append(kept, fmt.Sprintf("attempt %d on %s: %s", w.Attempt, h, r.Err))
				case !r.Gone:
					removed++
					bytes += r.Bytes
				}
			}
			if removed > 0 {
				m.Removed += removed
				m.Bytes += bytes
				t := tally[h]
				if t == nil {
					t = &HostDirs{Host: h}
					tally[h] = t
				}
				t.Jobs++
				t.Removed += removed
				t.Bytes += bytes
			}
		}
		if !done {
			continue
		}
		m.Kept = strings.Join(kept, "; ")
		marks[d.j.ID] = m
	}
	if len(marks) == 0 {
		return
	}
	marked, err := k.MarkHousekept(marks)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("housekeeping: record the job directories removed: %w", err))
		return // removed all the same: the next pass finds them gone
	}
	for _, h := range slices.Sorted(maps.Keys(tally)) {
		hk.Dirs = append(hk.Dirs, *tally[h])
	}
	for _, j := range marked {
		if j.Housekept != nil && j.Housekept.Kept != "" {
			hk.Kept = append(hk.Kept, j)
		}
	}
}

// dirsOf lists ended job j's directories on its workers, one per attempt
// (the current one by the directory recorded at launch, earlier ones by
// their default names on the hosts they were placed on), by host, and
// says why it leaves any: a host no longer in the inventory, a job
// launched by another user's gssh run (under that login on the worker).
func (c *Controller) dirsOf(j job.Job) *dirJob {
	d := &dirJob{j: j, hosts: map[string][]job.WorkerDir{}}
	if c.elsewhere(&j) {
		d.kept = append(d.kept, fmt.Sprintf("launched by %s's gssh run: its directories are under %s's login on the workers", j.Remote.By, j.Remote.By))
		return d
	}
	add := func(host string, w job.WorkerDir) {
		switch {
		case host == "":
			// An attempt of a gssh before hosts were recorded, never placed
			// since: nowhere known to look.
		case !c.inInventory(host):
			why := fmt.Sprintf("its host %s is no longer in the inventory", host)
			if !slices.Contains(d.kept, why) {
				d.kept = append(d.kept, why)
			}
		case !slices.Contains(d.hosts[host], w):
			d.hosts[host] = append(d.hosts[host], w)
		}
	}
	if j.Attempt == 0 { // launched before attempts were counted
		if j.Remote.Dir != "" {
			add(j.Placement.Host, job.WorkerDir{Job: j.ID, Attempt: 0, Dir: j.Remote.Dir, User: j.User})
		}
		return d
	}
	last := max(j.Attempt, len(j.AttemptHosts)) // past Attempt: the later attempts a recovered result superseded
	for a := 1; a <= last; a++ {
		host := ""
		if a <= len(j.AttemptHosts) {
			host = j.AttemptHosts[a-1]
		}
		w := job.WorkerDir{Job: j.ID, Attempt: a, User: j.User}
		if i := slices.IndexFunc(j.Attempts, func(e job.Attempt) bool { return e.N == a && e.Host != "" }); i >= 0 {
			host, w.Dir = j.Attempts[i].Host, j.Attempts[i].Dir
		}
		if a == j.Attempt && j.Placement.Host != "" {
			host, w.Dir = j.Placement.Host, j.Remote.Dir
		}
		add(cmp.Or(host, j.Placement.Host), w)
	}
	return d
}
