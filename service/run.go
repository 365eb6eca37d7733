package service

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"context"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec"
)

// RunRequest is gssh run: a job queued like Submit's and run in the
// foreground, with the caller's streams, once it is placed.
type RunRequest struct {
	// Submit is the job; Run marks it interactive (Spec.Interactive). It
	// may not be an array, held, or a dry run.
	Submit SubmitRequest
	// Terminal, when set, runs the command on a pseudo-terminal of that
	// size (gssh run --pty).
	Terminal *sshexec.Terminal
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	// Signals carries signal names ("INT": Ctrl-C) to pass to the job's
	// processes while it runs; nil: none.
	Signals <-chan string
	// Waiting is told of the job each time Run sees it wait with a new
	// reason (queued, or placed and being started); nil: not told.
	Waiting func(job.Job)
	// Detached is called once the job's session is over, before its end
	// is recorded (a terminal in raw mode is restored then); nil: not.
	Detached func()
	// Interval is the time between scheduling passes while the job waits
	// to be placed (0: 2 s).
	Interval time.Duration
}

// RunResult is how a gssh run ended.
type RunResult struct {
	// Job is the job as last read from the state: ended, normally.
	Job job.Job
	// Exit is the exit status of the job's session, when it ended with
	// one (the command's status, 128+N for a signal): what to exit with
	// when the state could not record the end yet. Nil: none came.
	Exit *int
	// Submit is the job's submit, for what it said.
	Submit SubmitResult
}

// ErrLostSession wraps a Run whose session with the worker ended without
// an exit status (the connection dropped): the job's processes are
// stopped there (its keeper, or the next pass, does it).
var ErrLostSession = errors.New("the connection to the job was lost")

// ErrRunGone is the cause (context.Cause) of the end of a Run that gssh
// serve makes for a gssh run whose process went away without a word
// (killed, its connection dropped): its job is cancelled, saying so.
var ErrRunGone = errors.New("its gssh run went away")

// attachesOwn reports whether l's Run attaches its job with l's own SSH
// identity, out of the passes' reach: a lab member's gssh run made in
// its own process. gssh serve's (l.served) is the pass account's, as
// the passes' are.
func (l *Local) attachesOwn() bool { return l.member() && l.served == nil }

// maxRunAttempts is how many launch attempts a gssh run makes of its job
// when one does not start (a host unreachable since its probe, a
// terminal refused) before it gives up.
const maxRunAttempts = 3

// Run implements gssh run: it holds a session lock for as long as its job
// may run (see sessions), submits r.Submit marked interactive, runs a
// pass every r.Interval while the job is queued, and once a pass has
// placed it, runs it in the foreground (launch.Attach) with r's streams,
// records it running and passes r.Signals on. An attempt that did not
// start is queued again, up to maxRunAttempts. When the job's session
// ends, Run tells r.Detached, lets go of its lock and runs a pass to
// record the end. Errors: Submit's (nothing stored), an error wrapping
// ErrLostSession, or ctx's (the job is then cancelled: stopped on its
// worker, recorded cancelled by the user).
func (l *Local) Run(ctx context.Context, r RunRequest) (RunResult, error) {
	switch {
	case len(r.Submit.Array) > 0:
		return RunResult{}, errors.New("gssh run takes one job, not an --array: submit the array with gssh submit")
	case r.Submit.Hold:
		return RunResult{}, errors.New("gssh run cannot --hold: nobody would be at the terminal when it is released; submit it with gssh submit --hold")
	case r.Submit.DryRun:
		return RunResult{}, errors.New("gssh run has no --dry-run: ask gssh submit --dry-run where it would go")
	}
	sess, err := l.openSession()
	if err != nil {
		return RunResult{}, err
	}
	defer sess.close()
	r.Submit.Spec.Interactive = &job.Interactive{Session: sess.token, PTY: r.Terminal != nil, PID: sess.pid, StartTicks: sess.ticks}
	sub, err := l.Submit(ctx, r.Submit)
	if err != nil {
		return RunResult{}, err
	}
	res := RunResult{Submit: sub, Job: sub.Job}
	id := sub.Job.ID
	interval := r.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	cancelled := func() (RunResult, error) {
		by := l.opt.User + " (gssh run interrupted)"
		if errors.Is(context.Cause(ctx), ErrRunGone) {
			by = "gssh serve (" + l.opt.User + "'s gssh run went away)"
		}
		l.Cancel(context.WithoutCancel(ctx), CancelRequest{ID: id, Grace: DefaultGrace, By: by, NoPass: true})
		res.Job, _ = l.Job(context.WithoutCancel(ctx), id)
		return res, interrupted(ctx)
	}
	said := ""
	for {
		j, err := l.Job(ctx, id)
		if err != nil {
			return res, err
		}
		res.Job = j
		switch {
		case j.State.Terminal():
			return res, nil // ended before it started: cancelled, a dependency never met
		case j.State == job.Launching && j.Remote.PID == 0 && j.Placement.Host != "":
			var aerr error
			res, aerr = l.attach(ctx, r, res)
			switch {
			case ctx.Err() != nil:
				return cancelled()
			case !errors.Is(aerr, launch.ErrNotStarted):
				return res, aerr
			}
			// Nothing ran. Unless it was ended meanwhile (a cancel), try
			// another attempt, as a pass does after a failed launch.
			got, err := l.requeueRun(j, aerr)
			res.Job = got
			if err != nil || got.State.Terminal() || got.Attempt >= maxRunAttempts {
				if !got.State.Terminal() {
					l.Cancel(context.WithoutCancel(ctx), CancelRequest{ID: id, Grace: DefaultGrace, By: "gssh run (" + aerr.Error() + ")", NoPass: true})
					res.Job, _ = l.Job(context.WithoutCancel(ctx), id)
				}
				return res, aerr
			}
			said = got.Reason
			if l.attachesOwn() {
				l.wake(ctx) // queued again: the lab's gssh serve places it now
			}
			if r.Waiting != nil {
				r.Waiting(got)
			}
			continue
		case j.State != job.Queued:
			return res, fmt.Errorf("job %s is %s without its gssh run: it is no longer this run's", j.Ref(), j.State)
		}
		if r.Waiting != nil && j.Reason != said {
			said = j.Reason
			r.Waiting(j)
		}
		select {
		case <-ctx.Done():
			return cancelled()
		case <-time.After(interval):
		}
		if l.attachesOwn() {
			continue // the lab's pass user places it
		}
		if _, err := l.Schedule(ctx, ScheduleRequest{}); err != nil && !errors.Is(err, ErrPassBusy) && ctx.Err() == nil && r.Waiting != nil {
			j.Reason = "a scheduling pass could not run: " + err.Error()
			said = j.Reason
			r.Waiting(j)
		}
	}
}

// requeueRun puts j, whose attempt did not start (why), back in the queue
// for another attempt: one short state transaction, when it is still
// launching that attempt.
func (l *Local) requeueRun(j job.Job, why error) (job.Job, error) {
	db, err := l.store(false)
	if err != nil {
		return j, err
	}
	requeued := false
	u, err := db.Update(j.ID, func(x *job.Job) error {
		if requeued = x.State == job.Launching && x.Attempt == j.Attempt; !requeued {
			return nil // ended or moved on meanwhile: as it is
		}
		x.State, x.Placement, x.Remote = job.Queued, job.Placement{}, job.Remote{}
		x.Reason, x.ReasonCode = fmt.Sprintf("attempt %d did not start on %s (%v); queued again", j.Attempt, j.Placement.Host, sshexec.WithoutHost(why)), "requeued"
		return nil
	})
	if err != nil {
		return j, err
	}
	if requeued {
		l.logJob(eventlog.JobRequeue, u, "")
	}
	return u, nil
}

// attach runs the placed job res.Job in the foreground; see Run.
func (l *Local) attach(ctx context.Context, r RunRequest, res RunResult) (RunResult, error) {
	j := res.Job
	if r.Waiting != nil {
		r.Waiting(j)
	}
	f, err := l.hosts()
	if err != nil {
		return res, err
	}
	pooled, err := f.Shell(j.Placement.Host)
	if err != nil {
		return res, err
	}
	var sh launch.Interactor = pooled
	if host, ok := f.Inventory().Lookup(j.Placement.Host); ok && host.RunAsSudo {
		sh = launch.AsUserInteractor(pooled, j.User) // as its owner (a member's own login runs it without sudo)
	}
	db, err := l.store(false)
	if err != nil {
		return res, err
	}
	cluster, err := db.ClusterID()
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	running := job.Job{} // once recorded: the job as running, for signals
	isRunning := make(chan struct{})
	started := func(rem job.Remote) error {
		now := l.opt.Now()
		recorded := false
		u, err := db.Update(j.ID, func(x *job.Job) error {
			recorded = false
			switch {
			case x.Attempt != j.Attempt || x.State.Terminal() || x.State == job.Queued:
				return fmt.Errorf("job %s was %s meanwhile", j.Ref(), x.State)
			case x.State == job.Launching:
				recorded = true
				if l.attachesOwn() {
					rem.By = l.opt.User // launched with this member's SSH identity: out of the passes' reach
				}
				x.State, x.Remote, x.StartedAt, x.Reason, x.ReasonCode = job.Running, rem, now, "", ""
			}
			return nil // running: a pass recorded it already
		})
		if err == nil && recorded {
			l.logJob(eventlog.JobStart, u, "")
		}
		if err == nil {
			mu.Lock()
			running = u
			mu.Unlock()
			close(isRunning)
		}
		return err
	}
	stopSignals := make(chan struct{})
	var wg sync.WaitGroup
	if r.Signals != nil {
		wg.Go(func() {
			var early []string // signals before the job was recorded running: sent once it is
			started := isRunning
			for {
				select {
				case sig := <-r.Signals:
					mu.Lock()
					rj := running
					mu.Unlock()
					if rj.ID == 0 {
						early = append(early, sig)
						continue
					}
					launch.Signal(ctx, sh, j.Placement.Host, rj, sig)
				case <-started:
					started = nil
					mu.Lock()
					rj := running
					mu.Unlock()
					for _, sig := range early {
						launch.Signal(ctx, sh, j.Placement.Host, rj, sig)
					}
					early = nil
				case <-stopSignals:
					return
				}
			}
		})
	}
	// A member's job is out of the passes' reach: this gssh stops it at
	// its walltime, or when its record says it is to end (a cancel).
	var stopped atomic.Value // the job.State it was stopped for
	if l.attachesOwn() {
		w := cmp.Or(j.Spec.Timeout, f.Inventory().Policy.Plan.DefaultTimeout)
		wg.Go(func() {
			select {
			case <-isRunning:
			case <-stopSignals:
				return
			}
			mu.Lock()
			rj := running
			mu.Unlock()
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
				case <-stopSignals:
					return
				}
				why := job.State("")
				if w > 0 && l.opt.Now().After(rj.StartedAt.Add(w)) {
					why = job.Timeout
				} else if got, err := l.Job(ctx, j.ID); err == nil && (got.State.Terminal() || got.CancelRequested != nil) {
					why = job.Cancelled
				}
				if why != "" {
					if s, err := launch.Stop(context.WithoutCancel(ctx), sh, j.Placement.Host, cluster, rj, launch.DefaultGrace, why); err != nil || s.Ended == nil {
						stopped.Store(why) // ended by the stop, not on its own just before
					}
					return
				}
			}
		})
	}
	// Its walltime is a pass's to enforce (stopped, recorded timeout), and
	// no cron pass may come: run one when it is due.
	if w := cmp.Or(j.Spec.Timeout, f.Inventory().Policy.Plan.DefaultTimeout); w > 0 && !l.attachesOwn() {
		wg.Go(func() {
			select {
			case <-isRunning:
			case <-stopSignals:
				return
			}
			mu.Lock()
			due := running.StartedAt.Add(w).Sub(l.opt.Now()) + time.Second // StartedAt is on opt.Now's clock
			mu.Unlock()
			for {
				select {
				case <-time.After(due):
				case <-stopSignals:
					return
				}
				if _, err := l.Schedule(ctx, ScheduleRequest{Wait: 2 * time.Second}); err == nil {
					return
				}
				due = 2 * time.Second // the pass lock was held: again
			}
		})
	}
	aerr := launch.Attach(sshexec.LongSession(ctx), sh, j.Placement.Host, cluster, j, launch.Session{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, TTY: r.Terminal, Started: started})
	close(stopSignals)
	wg.Wait()
	if r.Detached != nil {
		r.Detached()
	}
	var xe *sshexec.ExitError
	switch {
	case errors.Is(aerr, launch.ErrNotStarted):
		return res, aerr // first: its cause may be the keeper's exit status, never the job's
	case aerr == nil:
		code := 0
		res.Exit = &code
	case errors.As(aerr, &xe) && xe.Signal == "":
		code := xe.Code
		res.Exit = &code
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	wctx := context.WithoutCancel(ctx)
	if res.Exit == nil {
		// The session ended without an exit status: the connection
		// dropped. Its keeper stops the job when its own connection is
		// gone too; if the host can be reached, stop it now.
		mu.Lock()
		rj := running
		mu.Unlock()
		if rj.ID != 0 {
			sctx, cancel := context.WithTimeout(wctx, launch.DefaultGrace+20*time.Second)
			launch.Hangup(sctx, sh, j.Placement.Host, cluster, rj)
			cancel()
		}
	}
	if l.attachesOwn() {
		why, _ := stopped.Load().(job.State)
		res.Job = l.recordMemberEnd(j, res.Exit, why, f.Inventory().Policy.Plan.DefaultTimeout)
		if res.Exit == nil && !res.Job.State.Terminal() {
			return res, fmt.Errorf("job %s on %s: %w (%v); its keeper stops it there, and the lab's next pass records it", j.Ref(), j.Placement.Host, ErrLostSession, aerr)
		}
		return res, nil
	}
	// A pass records the end and starts what waits for the GPUs.
	for try := 0; try < 3; try++ {
		_, perr := l.Schedule(wctx, ScheduleRequest{Wait: 2 * time.Second})
		if got, err := l.Job(wctx, j.ID); err == nil {
			res.Job = got
		}
		if res.Job.State.Terminal() || (perr != nil && !errors.Is(perr, ErrPassBusy)) {
			break // ended, or the next pass records it
		}
		time.Sleep(time.Second)
	}
	if res.Exit == nil && !res.Job.State.Terminal() {
		return res, fmt.Errorf("job %s on %s: %w (%v); it is stopped there as soon as the host is reached (its keeper, or a pass)", j.Ref(), j.Placement.Host, ErrLostSession, aerr)
	}
	return res, nil
}

// recordMemberEnd records, in one transaction, how a lab member's
// interactive job ended (its passes cannot see it): stopped at its
// walltime or for a cancel (why), else by its exit status (also when a
// cancel was asked that no stop carried out before it ended). A job that
// ended meanwhile keeps how; one without an exit status and no why (its
// connection lost) is left to the lab's passes. It returns the job as
// recorded.
func (l *Local) recordMemberEnd(j job.Job, exit *int, why job.State, defaultTimeout time.Duration) job.Job {
	db, err := l.store(false)
	if err != nil {
		return j
	}
	now := l.opt.Now()
	u, err := db.Update(j.ID, func(x *job.Job) error {
		switch {
		case x.State.Terminal() || x.Attempt != j.Attempt:
			return errSkipRecord
		case why == job.Timeout:
			x.State, x.Reason = job.Timeout, fmt.Sprintf("ran past its walltime of %s: stopped", cmp.Or(j.Spec.Timeout, defaultTimeout))
		case why == job.Cancelled || (x.CancelRequested != nil && exit == nil):
			by := l.opt.User
			if x.CancelRequested != nil {
				by = x.CancelRequested.By
			}
			x.State, x.Reason = job.Cancelled, "cancelled by "+by
		case exit != nil:
			st := launch.ExitStatus(*exit)
			x.State, x.Reason, x.ExitCode, x.Signal = st.State, st.Reason, st.ExitCode, st.Signal
		default:
			return errSkipRecord
		}
		x.EndedAt, x.ReasonCode = now, ""
		return nil
	})
	if err != nil {
		got, _ := db.Get(j.ID)
		return got
	}
	l.logJob(eventlog.JobEnd, u, "")
	return u
}

// errSkipRecord aborts an update that no longer applies.
var errSkipRecord = errors.New("skip")

// sessionToken is a session's token: 32 hex digits.
var sessionToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// session is the lock a gssh run process holds while it lives:
// <state>.run/<token>.lock, flock'd; pid and ticks are the process
// (/proc/self/stat).
type session struct {
	token      string
	lock       *os.File // its lock file, flock'd
	pid        int
	ticks      int64
	closedOnce sync.Once
}

func (s *session) close() {
	s.closedOnce.Do(func() {
		os.Remove(s.lock.Name())
		s.lock.Close()
	})
}

// sessionDir is where gssh run processes keep their locks: beside the
// state file, so that every process of that state sees them.
func (l *Local) sessionDir() string { return l.opt.StatePath + ".run" }

// openSession makes and locks a new session file: a new file (O_EXCL,
// never through a symbolic link), flock'd through its descriptor. In
// shared-lab mode the directory is the lab's (see runDir) and the file
// the group's (0660), so that the pass account can try its lock.
func (l *Local) openSession() (*session, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	dir, err := l.runDir()
	if err != nil {
		return nil, fmt.Errorf("gssh run: %w (the directory of its session locks, beside the state file)", err)
	}
	perm := os.FileMode(0o600)
	if l.lab != nil {
		perm = labfile.Perm
	}
	p := filepath.Join(dir, token+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, fmt.Errorf("gssh run: lock %s: %w", p, err)
	}
	if err := f.Chmod(perm); err != nil { // not the umask's
		f.Close()
		os.Remove(p)
		return nil, fmt.Errorf("gssh run: lock %s: %w", p, err)
	}
	if ok, err := labfile.TryLock(f, syscall.LOCK_EX); err != nil || !ok {
		f.Close()
		os.Remove(p)
		return nil, fmt.Errorf("gssh run: lock %s: %w", p, err)
	}
	pid := os.Getpid()
	ticks, _ := startTicks(pid)
	return &session{token: token, lock: f, pid: pid, ticks: ticks}, nil
}

// runDir is the directory of the session locks, made when missing: in
// personal mode 0700; in shared-lab mode of the lab's shape (the pass
// account's, the lab group's, 3770: a member adds their own locks, and
// can remove no one else's), made or put right by the pass account or
// root (labfile.Dir.EnsureDir; gssh lab init makes it) and checked by a
// member, whose gssh run then says what to run.
func (l *Local) runDir() (string, error) {
	dir := l.sessionDir()
	if l.lab == nil {
		return dir, os.MkdirAll(dir, 0o700)
	}
	r, err := l.lab.dir.Sub(dir).EnsureDir(dir, false)
	if r.Replaced != nil {
		l.reportReplaced(*r.Replaced)
	}
	return dir, err
}

// startTicks is process pid's start time, /proc/PID/stat field 22 (clock
// ticks since boot): with the pid, it names one process however pids are
// reused.
func startTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the name may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return strconv.ParseInt(f[19], 10, 64)
}

// sessions is the real control.Sessions: a session is alive while its
// process holds the lock on its file (the kernel drops a lock when its
// process dies, however it dies).
type sessions struct {
	dir string
	// lab is the lab's state directory in shared-lab mode (nil:
	// personal), report told of a lock that was not gssh's, removed.
	lab    *labfile.Dir
	report func(labfile.Replaced)
}

// Alive reports whether s's gssh run holds its lock. A token that is not
// one gssh makes is a session gone; a lock that cannot be tried
// (permissions) is taken as alive, so nothing is stopped on a doubt; a
// lock file that is gone is a session gone unless the process it names
// (s.PID, s.StartTicks) still runs.
func (ss sessions) Alive(s job.Interactive) bool {
	if !sessionToken.MatchString(s.Session) {
		return false
	}
	p := filepath.Join(ss.dir, s.Session+".lock")
	f, err := ss.open(p)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		t, err := startTicks(s.PID)
		return s.PID > 0 && err == nil && t == s.StartTicks
	}
	defer f.Close()
	ok, err := labfile.TryLock(f, syscall.LOCK_EX)
	if err != nil {
		return true
	}
	if ok {
		os.Remove(p)
		return false
	}
	return true
}

// open opens the session lock p to try its lock: never through a
// symbolic link, never made, a regular file (a member's own file in
// shared-lab mode: any owner; any link count: it is only read and
// flocked, never written or chmodded, so a link a member made to
// another's lock neither hides that gssh run nor harms its file). An
// entry that is not such a
// file is no gssh run's: the pass account or root removes it (nothing
// it points to is touched) and says so (lab_file_replaced), and it
// counts as gone (fs.ErrNotExist).
func (ss sessions) open(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	var fi fs.FileInfo
	if err == nil {
		if fi, err = f.Stat(); err == nil && fi.Mode().IsRegular() {
			return f, nil
		}
		f.Close()
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lfi, lerr := os.Lstat(p)
	if lerr != nil {
		return nil, err
	}
	if ss.lab == nil || !ss.lab.Privileged() {
		return nil, cmp.Or(err, fs.ErrPermission)
	}
	found := labfile.DescribeEntry(p, lfi)
	if os.Remove(p) == nil && ss.report != nil {
		ss.report(labfile.Replaced{Path: p, Found: found + " (removed)"})
	}
	return nil, fs.ErrNotExist
}

// sweep removes the lock files of gssh run processes that are gone and
// whose token no job in active carries (a gssh run killed after its job
// ended). The caller holds the pass lock; a live gssh run holds its lock
// from the file's creation on, so none of theirs is removed.
func (ss sessions) sweep(active []job.Job) {
	ents, err := os.ReadDir(ss.dir)
	if err != nil {
		return
	}
	inUse := map[string]bool{}
	for _, j := range active {
		if in := j.Spec.Interactive; in != nil {
			inUse[in.Session+".lock"] = true
		}
	}
	for _, e := range ents {
		name := e.Name()
		if inUse[name] || !strings.HasSuffix(name, ".lock") || !sessionToken.MatchString(strings.TrimSuffix(name, ".lock")) {
			continue
		}
		p := filepath.Join(ss.dir, name)
		if f, err := ss.open(p); err == nil {
			if ok, err := labfile.TryLock(f, syscall.LOCK_EX); err == nil && ok {
				os.Remove(p)
			}
			f.Close()
		}
	}
}
