package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"context"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/job"
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

// Run implements gssh run: it holds a session lock for as long as it
// runs (see sessions), submits r.Submit marked interactive, runs a pass
// every r.Interval while the job is queued, and once a pass has placed
// it, runs it in the foreground (launch.Attach) with r's streams,
// records it running, passes r.Signals on, and when it ends runs passes
// until its end is recorded. Errors: Submit's (nothing stored), an error
// wrapping ErrLostSession, or ctx's (the job is then stopped on its
// worker by its keeper, and recorded by the next pass).
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
	r.Submit.Spec.Interactive = &job.Interactive{Session: sess.token, PTY: r.Terminal != nil}
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
			return l.attach(ctx, r, res)
		case j.State != job.Queued:
			return res, fmt.Errorf("job %d is %s without its gssh run: it is no longer this run's", j.ID, j.State)
		}
		if r.Waiting != nil && j.Reason != said {
			said = j.Reason
			r.Waiting(j)
		}
		select {
		case <-ctx.Done():
			l.Cancel(context.WithoutCancel(ctx), CancelRequest{ID: id, Grace: DefaultGrace})
			return res, interrupted(ctx)
		case <-time.After(interval):
		}
		if _, err := l.Schedule(ctx, ScheduleRequest{}); err != nil && !errors.Is(err, ErrPassBusy) && ctx.Err() == nil && r.Waiting != nil {
			j.Reason = "a scheduling pass could not run: " + err.Error()
			said = j.Reason
			r.Waiting(j)
		}
	}
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
	sh, err := f.Shell(j.Placement.Host)
	if err != nil {
		return res, err
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
	started := func(rem job.Remote) error {
		now := l.opt.Now()
		u, err := db.Update(j.ID, func(x *job.Job) error {
			switch {
			case x.Attempt != j.Attempt || x.State.Terminal() || x.State == job.Queued:
				return fmt.Errorf("job %d was %s meanwhile", j.ID, x.State)
			case x.State == job.Launching:
				x.State, x.Remote, x.StartedAt, x.Reason, x.ReasonCode = job.Running, rem, now, "", ""
			}
			return nil // running: a pass recorded it already
		})
		if err == nil {
			mu.Lock()
			running = u
			mu.Unlock()
		}
		return err
	}
	stopSignals := make(chan struct{})
	var wg sync.WaitGroup
	if r.Signals != nil {
		wg.Go(func() {
			for {
				select {
				case sig := <-r.Signals:
					mu.Lock()
					rj := running
					mu.Unlock()
					if rj.ID != 0 {
						launch.Signal(ctx, sh, j.Placement.Host, rj, sig)
					}
				case <-stopSignals:
					return
				}
			}
		})
	}
	aerr := launch.Attach(ctx, sh, j.Placement.Host, cluster, j, r.Stdin, r.Stdout, r.Stderr, r.Terminal, started)
	close(stopSignals)
	wg.Wait()
	var xe *sshexec.ExitError
	switch {
	case aerr == nil:
		code := 0
		res.Exit = &code
	case errors.As(aerr, &xe) && xe.Signal == "":
		code := xe.Code
		res.Exit = &code
	case errors.Is(aerr, launch.ErrNotStarted):
		// Nothing ran. Unless a cancel or a pass ended it already, end it
		// here: nobody waits for it to start again.
		if got, err := l.Job(ctx, j.ID); err == nil && !got.State.Terminal() {
			l.Cancel(context.WithoutCancel(ctx), CancelRequest{ID: j.ID, Grace: DefaultGrace})
		}
		res.Job, _ = l.Job(context.WithoutCancel(ctx), j.ID)
		return res, aerr
	}
	// Record the end: a pass reads the exit file (or finds what the
	// keeper stopped) and starts what waits for these GPUs.
	wctx := context.WithoutCancel(ctx)
	for try := 0; ; try++ {
		_, perr := l.Schedule(wctx, ScheduleRequest{Wait: 5 * time.Second})
		if got, err := l.Job(wctx, j.ID); err == nil {
			res.Job = got
			if got.State.Terminal() {
				break
			}
		}
		if try >= 5 || (perr != nil && !errors.Is(perr, ErrPassBusy)) {
			break // the next pass records it
		}
		time.Sleep(time.Second)
	}
	switch {
	case ctx.Err() != nil:
		return res, interrupted(ctx)
	case res.Exit == nil && !res.Job.State.Terminal():
		return res, fmt.Errorf("job %d on %s: %w (%v); its keeper stops it there, and the next pass records it", j.ID, j.Placement.Host, ErrLostSession, aerr)
	}
	return res, nil
}

// sessionToken is a session's token: 32 hex digits.
var sessionToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// session is the lock a gssh run process holds while it lives:
// <state>.run/<token>.lock, flock'd.
type session struct {
	token string
	lock  *flock.Flock
}

func (s *session) close() {
	s.lock.Unlock()
	os.Remove(s.lock.Path())
}

// sessionDir is where gssh run processes keep their locks: beside the
// state file, so that every process of that state sees them.
func (l *Local) sessionDir() string { return l.opt.StatePath + ".run" }

// openSession makes and locks a new session file.
func (l *Local) openSession() (*session, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	dir := l.sessionDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("gssh run: %w (the directory of its session locks, beside the state file)", err)
	}
	lk := flock.New(filepath.Join(dir, token+".lock"), flock.SetPermissions(0o600))
	ok, err := lk.TryLock()
	if err != nil || !ok {
		return nil, fmt.Errorf("gssh run: lock %s: %v", lk.Path(), err)
	}
	return &session{token: token, lock: lk}, nil
}

// sessions is the real control.Sessions: a session is alive while its
// process holds the lock on its file (the kernel drops a lock when its
// process dies, however it dies).
type sessions struct{ dir string }

// Alive reports whether s's gssh run holds its lock. A token that is not
// one gssh makes, or a lock file that is gone, is a session gone; a lock
// that cannot be tried (permissions) is taken as alive, so nothing is
// stopped on a doubt.
func (ss sessions) Alive(s job.Interactive) bool {
	if !sessionToken.MatchString(s.Session) {
		return false
	}
	p := filepath.Join(ss.dir, s.Session+".lock")
	if _, err := os.Stat(p); err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	lk := flock.New(p)
	ok, err := lk.TryLock()
	if err != nil {
		return true
	}
	if ok {
		lk.Unlock()
		os.Remove(p)
		return false
	}
	return true
}
