package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/state"
)

// ErrServing wraps gssh serve's refusal to start when another gssh serve
// runs for the same state; ErrServeSetup its failure to take the serve
// lock or to listen on the socket beside the state (the directory's
// problem: permissions, a directory in the socket's place).
var (
	ErrServing    = errors.New("gssh serve already runs for this state")
	ErrServeSetup = errors.New("gssh serve cannot set up beside the state")
)

// Serving is what gssh serve holds while it runs: the serve lock beside
// the state (STATE.serve.lock), which makes it the state's one gssh
// serve, and the socket beside the state (STATE.sock), which gssh
// commands wake it through. Close releases both.
type Serving struct {
	Socket  *serve.Listener
	release func()
}

// Close stops listening (removing the socket file) and releases the lock.
func (s *Serving) Close() error {
	err := s.Socket.Close()
	s.release()
	return err
}

// StatePath is the state file this service works on (the lab's, in a
// shared lab).
func (l *Local) StatePath() string { return l.opt.StatePath }

// SocketPath is the socket of the state's gssh serve: STATE.sock, or
// the one Options.Server names.
func (l *Local) SocketPath() string {
	if l.opt.Server != "" {
		return l.opt.Server
	}
	return l.ownSocket()
}

// ownSocket is STATE.sock, where gssh serve listens.
func (l *Local) ownSocket() string {
	p := l.opt.StatePath + ".sock"
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// Serve makes this process the state's gssh serve: it takes the serve
// lock and listens on the socket (mode 0600; in a shared lab 0660, the
// lab group's, so that members' commands reach it; in a lab whose queue
// gssh serve alone keeps, 0666 in a directory only the lab group
// reaches). In a shared lab only
// the pass user serves (an error wrapping ErrNotPassUser). Another gssh
// serve of this state holding the lock is an error wrapping ErrServing
// that names its pid; a socket left by one that died is replaced.
func (l *Local) Serve(ctx context.Context) (*Serving, error) {
	if l.labErr != nil {
		return nil, l.labErr
	}
	if l.opt.Server != "" {
		return nil, fmt.Errorf("gssh serve listens beside its state, at %s: --server and $GSSH_SERVER are for the commands that talk to it", l.ownSocket())
	}
	if l.member() {
		return nil, fmt.Errorf("only the lab's pass user runs gssh serve (%w): the queue of %s is served by %s; you are %s",
			ErrNotPassUser, l.lab.file, l.lab.passUser, l.opt.User)
	}
	path := l.opt.StatePath + ".serve.lock"
	release, held, err := l.serveLock(path)
	if err != nil {
		return nil, fmt.Errorf("%w: serve lock %s: %w", ErrServeSetup, path, err)
	}
	if held {
		stop := "systemctl --user stop gssh-serve"
		if l.lab != nil {
			stop = "systemctl stop gssh-serve"
		}
		who := fmt.Sprintf("its lock %s is held by a process that answers on no socket at %s: it is starting or stopping, or its socket was removed (fuser %s names it)", path, l.SocketPath(), path)
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if p, err := serve.Holder(hctx, l.SocketPath()); err == nil {
			who = fmt.Sprintf("pid %d, uid %d, at %s: stop it first (%s, or kill %d)", p.PID, p.UID, l.SocketPath(), stop, p.PID)
		}
		return nil, fmt.Errorf("%w (%s; %s)", ErrServing, l.opt.StatePath, who)
	}
	perm := fs.FileMode(0o600)
	switch {
	case l.servedOnly():
		perm = 0o666 // the directory lets the lab group reach it; who may do what is gssh serve's to say
	case l.lab != nil:
		perm = labfile.Perm
	}
	sock, err := serve.Listen(l.ownSocket(), perm)
	if err != nil {
		release()
		return nil, fmt.Errorf("%w: %w", ErrServeSetup, err)
	}
	return &Serving{Socket: sock, release: release}, nil
}

// serveLock takes the serve lock at path without waiting: the release
// function, or held when another process has it. In a shared lab the
// lock is the pass account's file in the lab's directory, opened as the
// pass lock is (labfile.Dir.OpenLock).
func (l *Local) serveLock(path string) (release func(), held bool, err error) {
	if l.lab == nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, false, err
		}
		fl := flock.New(path, flock.SetPermissions(0o600))
		ok, err := fl.TryLock()
		if err != nil || !ok {
			return nil, !ok && err == nil, err
		}
		return func() { fl.Unlock() }, false, nil
	}
	f, err := l.lab.dir.OpenLock(path, l.reportReplaced)
	if err != nil {
		return nil, false, err
	}
	done, cancel := context.WithCancel(context.Background())
	cancel() // one try
	switch err := labfile.Lock(done, f, syscall.LOCK_EX, time.Millisecond); {
	case err == nil:
		return func() { f.Close() }, false, nil
	case errors.Is(err, labfile.ErrLocked):
		f.Close()
		return nil, true, nil
	default:
		f.Close()
		return nil, false, err
	}
}

// servedPass asks the lab's gssh serve, when one runs, for a pass now
// and waits for it to end (at most servedPassWait): whether one did
// that read submitted, the job as a member's Submit stored it (its
// record is no longer that one: placed, or given its pending reason).
// False when none runs, or its pass did not get to the job (another pass
// held the lock): the lab's next pass is then to come. (In personal mode
// a submit runs its own pass: through gssh serve it was no faster, 268
// against 235 ms, bench/submit.sh.)
func (l *Local) servedPass(ctx context.Context, db *state.Bolt, submitted job.Job) bool {
	if !l.labPass(ctx) {
		return false
	}
	got, err := db.Get(submitted.ID)
	return err == nil && (got.State != job.Queued || got.Reason != submitted.Reason)
}

// labPass asks the lab's gssh serve, when one runs, for a pass now and
// waits for it to end (at most servedPassWait): whether one ended.
func (l *Local) labPass(ctx context.Context) bool {
	if l.served != nil {
		_, ok := l.served.Pass(ctx, false)
		return ok
	}
	if l.lab == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, servedPassWait)
	defer cancel()
	return serve.Pass(pctx, l.SocketPath(), l.serverUID()) == nil
}

// servedPassWait bounds a submit's wait for gssh serve's pass.
const servedPassWait = 30 * time.Second

// Check opens what l's calls need before any of them (the inventory, the
// lab's set-up, ssh_config), and keeps how it read them for Answers: gssh
// serve checks its service at its start and on SIGHUP, keeping the one it
// has when a new one fails this. Call it before l answers anyone.
func (l *Local) Check() error {
	v, verr := l.View() // as read now: what Answers compares with
	_, err := l.hosts()
	l.checked = checkedView{view: v, err: verr, done: true}
	return err
}

// checkedView is how a service reached the hosts when Check read them.
type checkedView struct {
	view View
	err  error
	done bool
}

// wake tells the state's gssh serve, when one runs, that something was
// recorded that a pass acts on (a lab member's change, a submit that
// found the pass lock held), so that its pass comes now rather than at
// its next interval; whether one was told. Nothing is said when none
// runs: cron's or a timer's next pass comes.
func (l *Local) wake(ctx context.Context) bool {
	if l.served != nil {
		l.served.Wake()
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return serve.Wake(ctx, l.SocketPath(), l.serverUID()) == nil
}

// serverUID is the uid the state's gssh serve runs as: the lab's pass
// account, else this process's. The commands talk to no other.
func (l *Local) serverUID() int {
	if l.lab != nil {
		return l.lab.dir.PassUID
	}
	return os.Getuid()
}
