package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gssh/gssh/labfile"
)

// In shared-lab mode (Options.Lab) the log's files lie in the lab's
// sticky directory, where a member could leave a symbolic link (or
// another file) under their names for the pass account or root to
// follow. lumberjack opens, renames and chowns by path, so it is not
// used there: every file is opened through labfile.Dir (O_NOFOLLOW,
// checked on the descriptor: the pass account's or root's, regular, one
// link), written through that descriptor, and rotated here, by the pass
// account or root only (a member could not rename the pass account's
// file in the sticky directory anyway): a member's write appends, and
// the pass account's next write rotates a file past its size or a day
// old. An entry that is not gssh's is replaced by the pass account or
// root (a member's regular file keeps its lines) and a lab_file_replaced
// event says so; a member's write finding one is not written, with a
// warning.

// Replaced is the event of r, seen at t.
func Replaced(t time.Time, r labfile.Replaced) Event {
	return Event{Time: t, Kind: LabFileReplaced, Extra: []slog.Attr{slog.String("path", r.Path), slog.String("found", r.Found)}}
}

// labLock takes the log's lock through a checked descriptor (see
// above), waiting up to wait; the returned function releases it.
func (l *Log) labLock(wait time.Duration, shared bool) (func(), error) {
	d := *l.opt.Lab
	f, err := d.OpenLock(l.lock.Path(), l.noteReplaced)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", l.lock.Path(), missing(d, err))
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := labfile.Lock(ctx, f, how, 10*time.Millisecond); err != nil {
		f.Close()
		if errors.Is(err, labfile.ErrLocked) {
			return nil, fmt.Errorf("%w (lock %s, waited %s)", ErrBusy, l.lock.Path(), wait)
		}
		return nil, fmt.Errorf("lock %s: %w", l.lock.Path(), err)
	}
	return func() { f.Close() }, nil
}

// noteReplaced keeps r for a lab_file_replaced event written with the
// next line.
func (l *Log) noteReplaced(r labfile.Replaced) { l.replaced = append(l.replaced, r) }

// appendLab is append in shared-lab mode (see above); the lock is held.
func (l *Log) appendLab(line []byte) error {
	d := *l.opt.Lab
	f, err := l.openCurrent()
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if n := fi.Size(); n > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, n-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
		head := make([]byte, 64)
		k, _ := f.ReadAt(head, 0)
		t, ok := lineTime(head[:k])
		old := ok && l.opt.Now().Sub(t) > rotateAfter
		if d.Privileged() && (old || n+int64(len(line)) > int64(l.opt.MaxSizeMiB)<<20) {
			f.Close()
			if f, err = l.rotateLab(); err != nil {
				return err
			}
		}
	}
	if d.Privileged() && !l.milled {
		l.milled = true
		l.mill()
	}
	for _, r := range l.replaced {
		line = append(l.format(Replaced(l.opt.Now(), r)), line...)
	}
	l.replaced = nil
	_, err = f.Write(line)
	return err
}

// openCurrent opens the current file for appending, checked (see above);
// a member's gssh finds it made by the pass account or says it is not.
func (l *Log) openCurrent() (*os.File, error) {
	d := *l.opt.Lab
	f, err := d.OpenFix(l.path, os.O_RDWR|os.O_APPEND, true, labfile.CopyOld, l.noteReplaced)
	return f, missing(d, err)
}

// missing adds to err, when it says a file is not there, who makes it.
func missing(d labfile.Dir, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the pass account %s makes it at its next pass (or run gssh lab init as root)", err, d.PassUser)
	}
	return err
}

// rotateLab renames the current file to events-<UTC time>.log (the name
// lumberjack gives) and opens a fresh one, compressing and removing the
// rotated files as mill does; the lock is held.
func (l *Log) rotateLab() (*os.File, error) {
	dir, base := filepath.Split(l.path)
	ext := filepath.Ext(base)
	rotated := filepath.Join(dir, strings.TrimSuffix(base, ext)+"-"+time.Now().UTC().Format(backupLayout)+ext)
	if err := os.Rename(l.path, rotated); err != nil {
		return nil, err
	}
	l.milled = true
	l.mill()
	return l.openCurrent()
}

// openRotated opens the rotated file p for compressing it; in
// shared-lab mode checked (see above): a member's regular file (rotated
// by a member before the lab was set up with gssh lab init) is made the
// pass account's with its lines, any other entry that is not gssh's is
// removed, never followed; either is told of (a lab_file_replaced
// event).
func (l *Log) openRotated(p string) (*os.File, error) {
	if l.opt.Lab == nil {
		return os.Open(p)
	}
	d := *l.opt.Lab
	f, err := d.Open(p, os.O_RDONLY, labfile.Gssh)
	var ue *labfile.UntrustedError
	if !errors.As(err, &ue) {
		return f, err
	}
	if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode().IsRegular() {
		return d.OpenFix(p, os.O_RDONLY, false, labfile.CopyOld, l.noteReplaced)
	}
	if os.Remove(p) == nil {
		l.noteReplaced(labfile.Replaced{Path: p, Found: ue.Found + " (removed)"})
	}
	return f, err
}

// createGz makes the compressed file's temporary file tmp; in
// shared-lab mode a new file of the pass account (labfile.Dir.Create),
// whatever was left under its name removed first, never followed.
func (l *Log) createGz(tmp string) (*os.File, error) {
	if l.opt.Lab == nil {
		return os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, l.perm)
	}
	os.Remove(tmp)
	return l.opt.Lab.Create(tmp)
}

// format is e's line, as Write writes it.
func (l *Log) format(e Event) []byte {
	var b bytes.Buffer
	r := slog.NewRecord(e.Time, slog.LevelInfo, string(e.Kind), 0)
	r.AddAttrs(e.attrs()...)
	r.AddAttrs(e.Extra...)
	slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: replaceAttr}).Handle(context.Background(), r)
	return b.Bytes()
}

// readLock takes a reader's lock of the log whose lock file is path,
// when that is a regular file: opened without following a symbolic link
// and never made (a reader, root's gssh events included, makes nothing).
// The returned function releases it; ok is false when no lock was had.
func readLock(path string, wait time.Duration) (release func(), ok bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := labfile.Lock(ctx, f, syscall.LOCK_SH, 10*time.Millisecond); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
