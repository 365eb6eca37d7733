package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/state"
)

// StateBackup implements Service: a consistent copy of the state file
// written to file (state.Bolt.Backup), while other gssh processes go on.
func (l *Local) StateBackup(ctx context.Context, file string) (state.Summary, error) {
	st, err := l.store(false)
	if err != nil {
		return state.Summary{}, err
	}
	return st.Backup(file)
}

// StateCheck implements Service: state.Check of file, or of the state
// file when file is "".
func (l *Local) StateCheck(ctx context.Context, file string) (state.Report, error) {
	if l.labErr != nil {
		return state.Report{}, l.labErr
	}
	if file == "" {
		file = l.opt.StatePath
	}
	return state.Check(file, l.liveOptions(file))
}

// liveOptions are stateOptions for file, with the lab's file handling
// when file is the lab's own state.
func (l *Local) liveOptions(file string) state.Options {
	opt := l.stateOptions()
	if l.lab != nil && file == l.opt.StatePath {
		opt.Shared = l.shared()
	}
	return opt
}

// stateOptions are the state.Options of the service's state operations.
func (l *Local) stateOptions() state.Options {
	return state.Options{Now: l.opt.Now, Timeout: l.opt.StateWait, Trace: l.opt.StateTrace, Cancel: l.opt.StateCancel}
}

// RestoreRequest asks to put a backup in place of the state file.
type RestoreRequest struct {
	Backup string
	// Force restores although some hosts could not be listed, the backup
	// has problems, or it is of another queue (cluster id).
	Force bool
	// Wait bounds the wait for the pass lock (a pass running now).
	Wait time.Duration
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	state.Restored
	// Backup is what Check found in the backup (its problems restored
	// with it, under Force).
	Backup state.Report
	// Seen is the highest job id of the queue found in a job directory,
	// by host (hosts with none are left out); Unreached the hosts that
	// could not be listed (under Force), with why.
	Seen      map[string]job.ID
	Unreached map[string]error
	// Ran are the jobs the backup holds as queued whose worker has an
	// attempt directory past the attempt the backup knows: they launched
	// after the backup was taken, and the pass that finds the directory
	// fails them rather than run them twice (job.ErrDirExists). (A
	// running one's later attempts need nothing: the pass records the end
	// of the attempt the backup knows, from its directory.)
	Ran []job.Job
}

// ErrRestoreRefused wraps a restore that was not made for what could be
// lost: hosts whose job directories could not be listed, problems in the
// backup, a backup of another queue. Force makes it anyway.
var ErrRestoreRefused = errors.New("restore refused")

// StateRestore implements Service. It checks the backup (as StateCheck;
// a file that cannot be checked is an error, its problems refuse the
// restore), reads the state file it replaces (if it can), lists every
// inventory host's job directories of the backup's cluster id over SSH
// (launch.JobDirs: one command per host, in parallel), and then, holding
// the pass lock so that no pass runs meanwhile, puts the backup in place
// with job ids continuing past every id found (state.Restore); the file
// replaced is kept beside it. A host that cannot be listed, problems in
// the backup or a backup of another cluster id refuse the restore
// (ErrRestoreRefused) unless r.Force. The cluster id stays the backup's:
// the restored jobs still running on the workers carry it.
func (l *Local) StateRestore(ctx context.Context, r RestoreRequest) (RestoreResult, error) {
	if l.member() {
		return RestoreResult{}, fmt.Errorf("%w: only the lab's pass user %s restores the lab's queue (%s)", ErrRestoreRefused, l.lab.passUser, l.lab.file)
	}
	if r.Backup == "" {
		return RestoreResult{}, errors.New("restore: give the backup file, such as gssh state restore ~/backups/gssh-2024-05-01.db")
	}
	if bi, err := os.Stat(r.Backup); err == nil {
		if li, err := os.Stat(l.opt.StatePath); err == nil && os.SameFile(bi, li) {
			return RestoreResult{}, fmt.Errorf("%w: %s is the state file in use itself (%s): give a backup made by gssh state backup; nothing was changed", ErrRestoreRefused, r.Backup, l.opt.StatePath)
		}
	}
	opt := l.stateOptions()
	backup, err := state.Check(r.Backup, opt)
	if err != nil {
		return RestoreResult{}, err
	}
	res := RestoreResult{Backup: backup, Seen: map[string]job.ID{}, Unreached: map[string]error{}}
	var refuse, todo []string
	if n := len(backup.Problems); n > 0 {
		what := "problems"
		if n == 1 {
			what = "problem"
		}
		refuse = append(refuse, fmt.Sprintf("the backup has %d %s (gssh state check %s lists them)", n, what, r.Backup))
		todo = append(todo, "give a sound backup")
	}
	// A live file too damaged to read its cluster id (Check stopped at
	// its pages) is replaced all the same.
	if live, err := state.Check(l.opt.StatePath, l.liveOptions(l.opt.StatePath)); err == nil && live.ClusterID != "" && live.ClusterID != backup.ClusterID {
		refuse = append(refuse, fmt.Sprintf("the backup is of another queue (cluster id %s; the state file's is %s)", backup.ClusterID, live.ClusterID))
		todo = append(todo, "check that it is this queue's backup (or that --state names the queue to replace)")
	} else if err != nil && (errors.Is(err, state.ErrBusy) || errors.Is(err, context.Canceled)) {
		return RestoreResult{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return RestoreResult{}, err
	}
	hosts := f.Inventory().Hosts
	type listing struct {
		dirs []launch.JobDir
		err  error
	}
	lists := make([]listing, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh, err := f.Shell(h.Name)
			if err != nil {
				lists[i].err = err
				return
			}
			hctx, cancel := context.WithTimeout(ctx, l.opt.ProbeTimeout)
			defer cancel()
			lists[i].dirs, lists[i].err = launch.JobDirs(hctx, sh, h.Name, backup.ClusterID)
		}()
	}
	wg.Wait()
	if err := interrupted(ctx); err != nil {
		return RestoreResult{}, err
	}
	var highest job.ID
	attempts := map[job.ID]int{} // the highest attempt found of each id
	for i, h := range hosts {
		if err := lists[i].err; err != nil {
			res.Unreached[h.Name] = err
			continue
		}
		for _, d := range lists[i].dirs {
			res.Seen[h.Name] = max(res.Seen[h.Name], d.ID)
			highest = max(highest, d.ID)
			attempts[d.ID] = max(attempts[d.ID], d.Attempt)
		}
	}
	if len(res.Unreached) > 0 {
		names := slices.Sorted(maps.Keys(res.Unreached))
		refuse = append(refuse, fmt.Sprintf("the job directories of %s could not be listed (%v): a job id found only there could be handed out again", strings.Join(names, ", "), res.Unreached[names[0]]))
		todo = append(todo, "reach the hosts and run it again")
	}
	if len(refuse) > 0 && !r.Force {
		return res, fmt.Errorf("%w: %s; nothing was changed (%s, or give --force to restore all the same)", ErrRestoreRefused, strings.Join(refuse, "; "), strings.Join(todo, "; "))
	}
	for _, j := range backup.ActiveJobs {
		if j.State == job.Queued && attempts[j.ID] > j.Attempt {
			res.Ran = append(res.Ran, j)
		}
	}
	unlock, err := l.passLock()(ctx, l.opt.StatePath+".pass.lock", r.Wait)
	if err != nil {
		return res, fmt.Errorf("restore: %w; nothing was changed", err)
	}
	defer unlock()
	if l.lab != nil {
		opt.Shared = l.shared()
	}
	res.Restored, err = state.Restore(r.Backup, l.opt.StatePath, uint64(highest), opt)
	if err == nil {
		backup := r.Backup
		if abs, aerr := filepath.Abs(backup); aerr == nil {
			backup = abs
		}
		l.logEvent(eventlog.Restore(l.opt.Now(), l.opt.User, backup, res.Before, res.JobSeq))
	}
	return res, err
}
