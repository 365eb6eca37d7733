package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/gssh/gssh/labfile"
)

// Shared is a shared-lab state (see Options.Shared): its directory and
// accounts, and who is told of an entry that was replaced.
type Shared struct {
	Lab labfile.Dir
	// Report, when set, is told of a state file that was not gssh's and
	// was replaced (the event log's lab_file_replaced).
	Report func(labfile.Replaced)
}

// ErrNoLabState means a lab's state file was never made: gssh lab init
// makes it, as root.
var ErrNoLabState = errors.New("the lab's state file is not made yet")

// openShared checks a shared-lab state: its directory must be the lab's
// (labfile.Dir.Check: the pass account's, the lab group's, 3770) and the
// file the pass account's (or root's), a regular file with one link. The
// pass account or root makes a missing file (unless noCreate) and
// replaces an entry that is not such a file (a member's file keeps its
// content: it was the queue before the lab was set up so; so does the
// lab's own file with a hard link a member made to it, which is left
// with the old file; a symbolic link or another type is replaced by an
// empty queue, and nothing it points to is touched), telling
// Shared.Report. A member's gssh refuses
// either: a *FileError wrapping ErrNoLabState (run gssh lab init) or a
// *labfile.UntrustedError.
func (s *Bolt) openShared(noCreate bool) error {
	d := s.shared.Lab
	if err := d.Check(); err != nil {
		return s.fail("open", err)
	}
	f, err := d.Open(s.path, os.O_RDONLY, labfile.Gssh)
	if err == nil {
		return f.Close()
	}
	var ue *labfile.UntrustedError
	switch {
	case errors.Is(err, fs.ErrNotExist) && (noCreate || !d.Privileged()):
		who := fmt.Sprintf("run gssh lab init as root (it makes the state as the pass account %s)", d.PassUser)
		if noCreate && d.Privileged() {
			return s.fail("open", fmt.Errorf("%w: %w: no such file (%s, or gssh submit as %s)", ErrNoState, ErrNoLabState, who, d.PassUser))
		}
		return s.fail("open", fmt.Errorf("%w: no such file: %s", ErrNoLabState, who))
	case !errors.Is(err, fs.ErrNotExist) && !errors.As(err, &ue):
		return s.fail("open", err)
	case !d.Privileged():
		return s.fail("open", err)
	}
	r, err := d.Ensure(s.path, s.fillState)
	if err != nil {
		return s.fail("create", err)
	}
	if r.Replaced != nil && s.shared.Report != nil {
		s.shared.Report(*r.Replaced)
	}
	return nil
}

// fillState writes a fresh lab state into tmp: the content of old when
// there is one (a member's state file, or the lab's own with a link a
// member made: see labfile), else a new queue. old is copied under its
// exclusive lock, which labfile.Dir.Ensure holds till its rename: every
// operation takes the lock of the file the path names, then checks the
// path names it still (openLocked: else it opens the path again), and
// bbolt writes through that descriptor only, so a write either went into
// old before the copy or goes into the fresh file after the rename; none
// goes to old afterwards, and none is lost.
func (s *Bolt) fillState(tmp string, old *os.File) error {
	if old == nil {
		return s.writeSchema(tmp, s.openFile)
	}
	var lf lockedFile
	if err := s.waitLock(old, syscall.LOCK_EX, &lf); err != nil {
		return err
	}
	return labfile.CopyOld(tmp, old)
}

// openFile opens the state file as bbolt asks (flag, mode), for
// openLocked; in shared-lab mode as the lab's file it was checked to be
// (labfile.Dir.Open: O_NOFOLLOW, a regular file of the pass account or
// root with one link), never created.
func (s *Bolt) openFile(name string, flag int, mode os.FileMode) (*os.File, error) {
	if s.shared == nil {
		return os.OpenFile(name, flag, mode)
	}
	return s.shared.Lab.Open(name, flag&^os.O_CREATE, labfile.Gssh)
}

// keepAsideLab is keepAside in shared-lab mode: live is copied (not
// linked: the live file keeps one link, as the lab's files must) into a
// new file of the pass account, .before-restore or .before-restore.N,
// whatever entry a member left under those names is passed over, never
// followed.
func (s *Bolt) keepAsideLab(live string) (string, error) {
	d := s.shared.Lab
	in, err := d.Open(live, os.O_RDONLY, labfile.Gssh)
	if err != nil {
		return "", err
	}
	defer in.Close()
	for n := 1; ; n++ {
		name := live + ".before-restore"
		if n > 1 {
			name += "." + strconv.Itoa(n)
		}
		out, err := d.Create(name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = out.ReadFrom(in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
}
