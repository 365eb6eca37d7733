package eventlog

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/gssh/gssh/labfile"
)

// Name is the event log's file name, in the state file's directory.
const Name = "events.log"

// Path is the event log of the state file statePath: events.log in its
// directory.
func Path(statePath string) string { return filepath.Join(filepath.Dir(statePath), Name) }

// Defaults of Options.
const (
	// DefaultMaxAge is how long rotated files are kept (the policy's
	// keep_events): 30 days.
	DefaultMaxAge = 30 * 24 * time.Hour
	// DefaultMaxSizeMiB is the size, in MiB, past which the current file
	// is rotated.
	DefaultMaxSizeMiB = 10
	// DefaultLockWait is the longest a write waits for another process's
	// write (which holds the log's lock for a write, or a rotation and the
	// compression of the rotated file): past it the event is not written
	// and a warning says so.
	DefaultLockWait = 2 * time.Second
	// rotateAfter: the current file is rotated when its first event is
	// older than this, so that no file spans more than about a day and
	// retention removes what is older than MaxAge within a day of it,
	// also in a quiet lab whose log never reaches MaxSizeMiB.
	rotateAfter = 24 * time.Hour
)

// Options tune a Log. The zero value is the defaults.
type Options struct {
	// MaxAge: rotated files whose rotation is older are removed (0 =
	// DefaultMaxAge).
	MaxAge time.Duration
	// MaxSizeMiB: a write that would take the current file past this
	// many MiB rotates it first (0 = DefaultMaxSizeMiB).
	MaxSizeMiB int
	// Shared is shared-lab mode: the files are made 0660 (the lab's
	// setgid directory gives them its group), as the state file is,
	// instead of 0600.
	Shared bool
	// Lab, when set, is the lab's state directory the log lies in
	// (shared-lab mode, Shared implied): its files are opened, checked,
	// rotated and replaced as lab.go says, never by a path a member
	// controls.
	Lab *labfile.Dir
	// LockWait bounds a write's wait for the lock (0 = DefaultLockWait).
	LockWait time.Duration
	// Warn is told, in words, what could not be written (nil: nothing is
	// said).
	Warn func(string)
	// Now is the clock of events given no time and of retention (nil:
	// time.Now; rotated files are named by lumberjack's clock, the real
	// one).
	Now func() time.Time
	// Tap, when set, is given each event after it was written (or could
	// not be), its time set, in the writer's goroutine: it must not block
	// (gssh serve's notifications queue it).
	Tap func(Event)
}

// Log writes events to one event log. Each write takes an exclusive
// flock on the log's lock file (PATH.lock) and releases it after the
// line is written and, when the write rotated the file, after the
// rotated file is compressed and the files older than MaxAge are
// removed: lumberjack does the size check, the rename to
// events-<UTC time>.log and the new file, but its own compression and
// removal run later in a goroutine of whichever process rotated (two
// processes compressing one file lose it; a process that exits leaves a
// half-written .gz), so they are off and done here, under the lock. The
// file is closed after every write, so a process never writes into a
// file another one rotated away. A Log is safe for concurrent use.
type Log struct {
	path    string
	opt     Options
	perm    fs.FileMode
	mu      sync.Mutex
	lj      *lumberjack.Logger
	lock    *flock.Flock
	handler slog.Handler
	milled  bool // the rotated files were looked at since the Log was made
	// replaced are the lab files found not gssh's and replaced, for the
	// lab_file_replaced events written with the next line.
	replaced []labfile.Replaced
	busy     bool // the last write gave up waiting for the lock: the next one does not wait
	failed   int  // events not written after the first one said so
	warned   bool
}

// Open returns the log at path (nothing is opened before the first
// write).
func Open(path string, opt Options) *Log {
	opt.MaxAge = cmp.Or(opt.MaxAge, DefaultMaxAge)
	opt.MaxSizeMiB = cmp.Or(opt.MaxSizeMiB, DefaultMaxSizeMiB)
	opt.LockWait = cmp.Or(opt.LockWait, DefaultLockWait)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	l := &Log{path: path, opt: opt, perm: 0o600,
		lj: &lumberjack.Logger{Filename: path, MaxSize: opt.MaxSizeMiB}}
	if opt.Shared || opt.Lab != nil {
		opt.Shared = true
		l.opt.Shared = true
		l.perm = 0o660
	}
	l.lock = flock.New(path+".lock", flock.SetPermissions(l.perm))
	l.handler = slog.NewJSONHandler(writerFunc(l.writeLine), &slog.HandlerOptions{ReplaceAttr: replaceAttr})
	return l
}

// Path is the file the log writes.
func (l *Log) Path() string { return l.path }

type writerFunc func([]byte) error

func (w writerFunc) Write(p []byte) (int, error) {
	if err := w(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// replaceAttr makes slog's record the line of the package doc: no
// level, the message as "event", the time in UTC with milliseconds.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		return slog.Attr{}
	case slog.MessageKey:
		a.Key = "event"
	case slog.TimeKey:
		return slog.String(slog.TimeKey, Stamp(a.Value.Time()))
	}
	return a
}

// Write writes e as one line. It never fails: an event that cannot be
// written (the lock not had within LockWait, a full disk) is a warning
// (the first one in full, the others counted at Close). It waits for
// the lock at most LockWait, and not at all right after a wait ran out
// (a pass's events do not wait one after another for a stuck lock).
func (l *Log) Write(e Event) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = l.opt.Now()
	}
	if l.opt.Tap != nil {
		defer l.opt.Tap(e) // after the unlock below
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.handler.Handle(context.Background(), e.record()); err != nil {
		what := string(e.Kind)
		if e.Job != 0 {
			what += fmt.Sprintf(" of job %d", e.Job)
		} else if e.Host != "" {
			what += " of " + e.Host
		}
		if l.failed++; !l.warned {
			l.warned, l.failed = true, 0
			l.warn(fmt.Sprintf("event log %s: %s not written: %v (the change itself is recorded in the state file)", l.path, what, err))
		}
	}
}

// record is e as slog's record of its line.
func (e Event) record() slog.Record {
	r := slog.NewRecord(e.Time, slog.LevelInfo, string(e.Kind), 0)
	r.AddAttrs(e.attrs()...)
	r.AddAttrs(e.Extra...)
	return r
}

// JSON is e as its line of the log: one JSON object, with a newline.
func (e Event) JSON() []byte {
	var b bytes.Buffer
	h := slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: replaceAttr})
	h.Handle(context.Background(), e.record()) // a bytes.Buffer takes every write
	return b.Bytes()
}

// Attr is the value of e's kind's own field key (Extra), and false
// when e has none.
func (e Event) Attr(key string) (slog.Value, bool) {
	for _, a := range e.Extra {
		if a.Key == key {
			return a.Value, true
		}
	}
	return slog.Value{}, false
}

// attrs are e's common fields, those with a value.
func (e Event) attrs() []slog.Attr {
	var out []slog.Attr
	if e.Job != 0 {
		out = append(out, slog.Uint64("job", uint64(e.Job)))
	}
	add := func(k, v string) {
		if v != "" {
			out = append(out, slog.String(k, v))
		}
	}
	add("user", e.User)
	add("host", e.Host)
	if len(e.GPUs) > 0 {
		out = append(out, slog.Any("gpus", e.GPUs))
	}
	add("state", string(e.State))
	add("reason", e.Reason)
	if e.Attempt > 0 {
		out = append(out, slog.Int("attempt", e.Attempt))
	}
	if e.Exit != nil {
		out = append(out, slog.Int("exit", *e.Exit))
	}
	return out
}

// Close closes the log's file and says how many more events could not
// be written since the first warning.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed > 0 {
		l.warn(fmt.Sprintf("event log %s: %d more events not written", l.path, l.failed))
		l.failed = 0
	}
	return l.lj.Close()
}

func (l *Log) warn(s string) {
	if l.opt.Warn != nil {
		l.opt.Warn(s)
	}
}

// ErrBusy means another process held the log's lock past the wait.
var ErrBusy = errors.New("the event log's lock is held by another gssh")

// writeLine appends line (one JSON line with its newline) under the
// lock; l.mu is held.
func (l *Log) writeLine(line []byte) error {
	wait := l.opt.LockWait
	if l.busy {
		wait = 0
	}
	if l.opt.Lab != nil {
		unlock, err := l.labLock(wait, false)
		if l.busy = errors.Is(err, ErrBusy); err != nil {
			return err
		}
		defer unlock()
		return l.appendLab(line)
	}
	if err := l.takeLock(wait, false); err != nil {
		l.busy = errors.Is(err, ErrBusy)
		return err
	}
	l.busy = false
	defer l.lock.Unlock()
	return l.append(line)
}

// takeLock takes the log's lock (shared: a reader's), waiting up to
// wait, and keeps the lock file at the log's mode.
func (l *Log) takeLock(wait time.Duration, shared bool) error {
	try, tryCtx := l.lock.TryLock, l.lock.TryLockContext
	if shared {
		try, tryCtx = l.lock.TryRLock, l.lock.TryRLockContext
	}
	ok, err := try()
	if err == nil && !ok && wait > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		ok, err = tryCtx(ctx, 10*time.Millisecond)
		cancel()
	}
	switch {
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("lock %s: %w", l.lock.Path(), err)
	case !ok:
		return fmt.Errorf("%w (lock %s, waited %s)", ErrBusy, l.lock.Path(), wait)
	}
	if l.opt.Shared {
		if fi, err := os.Stat(l.lock.Path()); err == nil && fi.Mode().Perm() != l.perm {
			os.Chmod(l.lock.Path(), l.perm) // a member's umask; its owner can, and the others read it anyway
		}
	}
	return nil
}

// append writes line to the current file through lumberjack, which
// rotates it first when the line would take it past MaxSizeMiB; the
// lock is held. The file is made at the log's mode (lumberjack would
// make it 0600), a line after a torn one (a write cut short by a full
// disk) starts on a line of its own, and a file whose first event is a
// day old is rotated first.
func (l *Log) append(line []byte) error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, l.perm)
	if err != nil {
		return err
	}
	before, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.keepMode(f, before)
	rotate := false
	if n := before.Size(); n > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, n-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
		head := make([]byte, 64)
		k, _ := f.ReadAt(head, 0)
		if t, ok := lineTime(head[:k]); ok && l.opt.Now().Sub(t) > rotateAfter {
			rotate = true
		}
	}
	f.Close()
	if rotate {
		if err := l.lj.Rotate(); err != nil && !isChown(err) { // a failed chown: rotated all the same
			return err
		}
		l.lj.Close()
	}
	err = l.write(line)
	if cerr := l.lj.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	after, err := os.Stat(l.path)
	if rotated := err == nil && !os.SameFile(before, after); rotated || !l.milled {
		l.milled = true
		if rotated {
			if f, err := os.Open(l.path); err == nil {
				l.keepMode(f, after)
				f.Close()
			}
		}
		l.mill()
	}
	return nil
}

// write writes line through lumberjack, and once more when its rotation
// failed to give the new file the old one's owner (a lab member rotating
// a file another member made): the file was rotated, the new one is
// there (the member's own), and nothing was written.
func (l *Log) write(line []byte) error {
	_, err := l.lj.Write(line)
	if isChown(err) {
		l.lj.Close()
		_, err = l.lj.Write(line)
	}
	return err
}

// isChown reports whether err is lumberjack's failed chown of a new file.
func isChown(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "chown"
}

// keepMode gives f (the log's current file, fi its stat) the log's mode
// in shared-lab mode, where a member's umask would keep the others out.
func (l *Log) keepMode(f *os.File, fi fs.FileInfo) {
	if l.opt.Shared && fi.Mode().Perm() != l.perm {
		if err := f.Chmod(l.perm); err != nil {
			l.warn(fmt.Sprintf("event log %s: mode %04o, not the lab's %04o, and it cannot be changed (%v): as its owner or root, chmod %o %s", l.path, fi.Mode().Perm(), l.perm, err, l.perm, l.path))
		}
	}
}

// lineTime reads the time of the line that head begins (slog writes it
// first: {"time":"2026-11-30T14:02:05.123Z",...).
func lineTime(head []byte) (time.Time, bool) {
	rest, ok := bytes.CutPrefix(head, []byte(`{"time":"`))
	if !ok {
		return time.Time{}, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	return t, err == nil
}

// mill compresses the rotated files not compressed yet and removes those
// rotated more than MaxAge ago (and a compression's leftovers); the lock
// is held. Problems are warnings: nothing is lost by leaving a file as
// it is.
func (l *Log) mill() {
	dir, base := filepath.Split(l.path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		l.warn(fmt.Sprintf("event log %s: rotated files: %v", l.path, err))
		return
	}
	cutoff := l.opt.Now().Add(-l.opt.MaxAge)
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, gzTmp) {
			if _, _, ok := backupTime(base, strings.TrimSuffix(name, gzTmp)); ok {
				os.Remove(p) // a compression cut short: its source is still there
			}
			continue
		}
		t, gz, ok := backupTime(base, name)
		switch {
		case !ok:
		case t.Before(cutoff):
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.warn(fmt.Sprintf("event log: remove %s (rotated more than %s ago): %v", p, l.opt.MaxAge, err))
			}
		case gz:
		case names[name+".gz"]:
			os.Remove(p) // compressed whole (renamed into place last) before a crash
		default:
			if err := l.compress(p); err != nil {
				l.warn(fmt.Sprintf("event log: compress %s: %v (it is kept as it is)", p, err))
			}
		}
	}
}

const gzTmp = ".gz.tmp"

// compress writes src gzipped to src.gz (through a temporary file
// renamed into place, so a .gz is always whole), then removes src.
func (l *Log) compress(src string) error {
	in, err := l.openRotated(src)
	var ue *labfile.UntrustedError
	if errors.As(err, &ue) {
		return nil // not gssh's and not a regular file: removed, and an event says so
	}
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := src + gzTmp
	out, err := l.createGz(tmp)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if l.opt.Shared {
		if err := out.Chmod(l.perm); err != nil {
			return fail(err)
		}
	}
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fail(err)
	}
	if err := zw.Close(); err != nil {
		return fail(err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, src+".gz"); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(src)
}

// backupLayout is the time lumberjack puts in a rotated file's name
// (events-2026-11-30T14-02-05.123.log, UTC).
const backupLayout = "2006-01-02T15-04-05.000"

// backupTime reads the rotation time from name, a rotated file of the
// log whose file name is base: events-<time>.log or events-<time>.log.gz.
func backupTime(base, name string) (t time.Time, gz bool, ok bool) {
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return time.Time{}, false, false
	}
	rest, gz = strings.CutSuffix(rest, ".gz")
	stamp, ok := strings.CutSuffix(rest, ext)
	if !ok {
		return time.Time{}, false, false
	}
	t, err := time.ParseInLocation(backupLayout, stamp, time.UTC)
	return t, gz, err == nil
}

// isNotExist reports whether err says a file is missing.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
