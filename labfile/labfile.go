// Package labfile keeps a shared lab's state directory safe from its
// members: the directory is the pass account's, setgid to the lab group
// and sticky (mode 3770), so a member can add entries but never remove
// or rename one that is not theirs; every file gssh keeps there is
// opened with O_NOFOLLOW (and O_NONBLOCK, so that a FIFO cannot block
// it), checked on the open descriptor (a regular file, of the expected
// owner, with one link: LockFile excepted) and adjusted with
// fchmod/fchown, never by path.
//
// Hard links: a lab requires fs.protected_hardlinks=1 (Check refuses a
// host without it), so a member can link only a file they may read and
// write already. Their link to one of gssh's files (ln state.db ~/x,
// allowed: the lab's files are 0660) gives that file two links; the pass
// account (or root) then copies its content, through the descriptor it
// checked and under the lock its writers take, into a fresh file renamed
// over the entry (Ensure with CopyOld, or the state's fill): nothing is
// lost, and the member's link keeps the old file, which gssh never uses
// again. Until then a member's gssh refuses the entry (*UntrustedError,
// exit 3): it cannot replace the pass account's file. A lock file only
// flocked (LockFile) is used with any number of links.
// An entry that fails the check is never used: the pass account (or
// root) replaces it with a fresh file of its own (Dir.Ensure), renamed
// over it, and says what it found; a member's gssh refuses it
// (*UntrustedError) and leaves it to the pass account's next pass.
//
// A checked entry stays what it was checked to be: it is the pass
// account's (or root's) in a sticky directory the pass account owns, so
// no member can remove or rename it. Paths given to Dir's methods are
// entries of the directory itself (no subdirectories but RunDir's).
package labfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mode is the state directory's mode: setgid, sticky, 0770 (chmod 3770).
const Mode = fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o770

// Perm is the mode of every file gssh keeps there: the group's members
// read and write them.
const Perm fs.FileMode = 0o660

// ServedMode and ServedPerm are the directory's and its files' modes in
// a lab whose queue gssh serve alone keeps (Dir.Served): the members
// reach the directory (its socket) but write nothing in it, and read
// none of its files.
const (
	ServedMode             = fs.ModeDir | 0o750
	ServedPerm fs.FileMode = 0o600
)

// Dir is a lab's state directory and the accounts its files belong to.
type Dir struct {
	Path     string // the directory: the lab state's parent
	PassUser string // the pass account, for messages
	PassUID  int
	Group    string // the lab group, for messages
	GID      int
	// Served: the lab's queue is gssh serve's alone (ServedMode,
	// ServedPerm).
	Served bool
	// self is this process's effective uid (os.Geteuid at New); tests
	// of the package set it to play a member.
	self int
	// sysctl is the file Check reads fs.protected_hardlinks from:
	// HardlinksSysctl, unless a test of the package gives its own.
	sysctl string
}

// HardlinksSysctl is where Linux says whether fs.protected_hardlinks is
// on ("1"): a user may then hard-link only a file they own or may read
// and write (proc(5)).
const HardlinksSysctl = "/proc/sys/fs/protected_hardlinks"

// New is the state directory dir of a lab whose pass account is
// passUser (uid passUID) and whose group is group (gid gid), seen by
// this process.
func New(dir, passUser string, passUID int, group string, gid int) Dir {
	return Dir{Path: dir, PassUser: passUser, PassUID: passUID, Group: group, GID: gid, self: os.Geteuid(), sysctl: HardlinksSysctl}
}

// Mode is the directory's mode: Mode, or ServedMode when d.Served.
func (d Dir) Mode() fs.FileMode {
	if d.Served {
		return ServedMode
	}
	return Mode
}

// Perm is the mode of the files gssh keeps there: Perm, or ServedPerm.
func (d Dir) Perm() fs.FileMode {
	if d.Served {
		return ServedPerm
	}
	return Perm
}

// ModeText is the directory's mode as chmod takes it: 3770, or 0750.
func (d Dir) ModeText() string { return fmt.Sprintf("%04o", chmodBits(d.Mode())) }

// As is d as a process of uid sees it: whether it may replace entries,
// which files it adjusts (tests play a member this way; the kernel still
// decides what the process may do).
func (d Dir) As(uid int) Dir {
	d.self = uid
	return d
}

// Privileged reports whether this process may replace entries: it runs
// as the pass account or as root.
func (d Dir) Privileged() bool { return d.self == 0 || d.self == d.PassUID }

// Fix is what to run to set the directory up.
func (d Dir) Fix() string {
	return fmt.Sprintf("as root: gssh lab init (or: mkdir -p %[1]s; chown %[2]s:%[3]s %[1]s; chmod %[4]s %[1]s)", d.Path, d.PassUser, d.Group, d.ModeText())
}

// UntrustedError is an entry gssh expects to be its own file that is not:
// a member's gssh does not use it, and the pass account's next pass
// replaces it.
type UntrustedError struct {
	Path  string
	Found string // what is there, in words ("a symbolic link to /x")
	Dir   Dir
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s is not gssh's own file (found %s): it is not used; the pass account %s replaces it at its next pass (gssh schedule), or run gssh lab init as root", e.Path, e.Found, e.Dir.PassUser)
}

// Replaced is an entry that was not gssh's, replaced by a fresh file.
type Replaced struct {
	Path  string
	Found string // what was there, in words
}

// Want is what a file must be: its owner and mode.
type Want struct {
	// Owner is the uid the file must have; -1: the pass account or root.
	Owner int
	// Perm is its mode (0: the directory's Dir.Perm).
	Perm fs.FileMode
	// AnyLinks accepts more links than one (LockFile); such a file's
	// owner, group and mode are then left as they are.
	AnyLinks bool
}

// owned reports whether uid may own a file of w.
func (w Want) owned(d Dir, uid int) bool {
	if w.Owner >= 0 {
		return uid == w.Owner
	}
	return uid == d.PassUID || uid == 0
}

func (w Want) perm(d Dir) fs.FileMode {
	if w.Perm == 0 {
		return d.Perm()
	}
	return w.Perm
}

// Gssh is the Want of the files the pass account keeps.
var Gssh = Want{Owner: -1}

// LockFile is the Want of a lock gssh only flocks (the pass lock, the
// event log's lock): the pass account's or root's, any link count. A
// link a member made to it changes nothing (every gssh still opens the
// one file the entry names, and a member could flock it by its name
// anyway), whereas replacing it while a process holds its lock would let
// a second process take the fresh file's lock beside it.
var LockFile = Want{Owner: -1, AnyLinks: true}

// openFlags are added to every open: no symbolic link followed, no FIFO
// waited on.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// Open opens path (an entry of the directory) with flag (os.O_RDONLY,
// os.O_RDWR, os.O_WRONLY|os.O_APPEND; never O_CREATE) as a file of w:
// a regular file with one link and w's owner. Its group and mode are
// made the lab's through the descriptor when they are not and this
// process may (its owner or root). Errors: fs.ErrNotExist when there is
// no entry; an *UntrustedError when the entry is not such a file; the OS
// error.
func (d Dir) Open(path string, flag int, w Want) (*os.File, error) {
	f, err := os.OpenFile(path, flag&^os.O_CREATE|openFlags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		// Not gssh's: a link, another type, or a file of an owner w does
		// not trust that this process may not open (a member's 0600 file:
		// untrusted, so that the pass account replaces it, never a plain
		// EACCES that would block it for good).
		if fi, lerr := os.Lstat(path); lerr == nil && (errors.Is(err, syscall.ELOOP) || !fi.Mode().IsRegular() || !w.owned(d, int(fi.Sys().(*syscall.Stat_t).Uid))) {
			return nil, &UntrustedError{Path: path, Found: DescribeEntry(path, fi), Dir: d}
		}
		return nil, err
	}
	if err := d.verify(f, w); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// verify checks the open f as a file of w and gives it the lab's group
// and mode where they differ and this process may.
func (d Dir) verify(f *os.File, w Want) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || st.Nlink != 1 && !w.AnyLinks || !w.owned(d, int(st.Uid)) {
		return &UntrustedError{Path: f.Name(), Found: describe(fi), Dir: d}
	}
	if mine := int(st.Uid) == d.self || d.self == 0; mine && st.Nlink == 1 {
		if int(st.Gid) != d.GID {
			if err := f.Chown(-1, d.GID); err != nil {
				return fmt.Errorf("%s: group %s, not the lab's %s, and it cannot be changed: %w", f.Name(), groupName(int(st.Gid)), d.Group, err)
			}
		}
		if fi.Mode().Perm() != w.perm(d) {
			if err := f.Chmod(w.perm(d)); err != nil {
				return fmt.Errorf("%s: mode %04o, not the lab's %04o, and it cannot be changed: %w", f.Name(), fi.Mode().Perm(), w.perm(d), err)
			}
		}
	}
	return nil
}

// Fill writes the content of a fresh file at tmp (a new, empty file of
// the pass account, mode Perm, in the directory). old is the entry it
// replaces when that was a regular file (a member's, or gssh's own that
// has more links than one: a member linked it elsewhere), open for
// reading, else nil. A fill may lock old: Ensure holds old open until
// the fresh file is renamed over it, and renames it only if the entry is
// still old then (else it starts again), so a fill that takes old's
// exclusive lock, which every writer of the file takes too, copies the
// last content and loses no write.
type Fill func(tmp string, old *os.File) error

// Result says what Ensure did.
type Result struct {
	Created  bool      // there was no entry: a fresh file was made
	Replaced *Replaced // the entry was not gssh's: it was replaced
}

// Ensure makes path gssh's own file (Gssh), as the pass account or
// root: a right file is kept (its group and mode fixed through its
// descriptor); a missing one, or an entry that is not gssh's (a symbolic
// link, another type, more than one link, another owner), is replaced by
// a fresh file that fill (nil: leave it empty) wrote, renamed over it.
// A symbolic link is never followed; nothing but a regular entry is
// opened (for reading, given to fill: CopyOld keeps its content), and
// nothing the entry is or points to is changed or removed: a link a
// member made to gssh's file keeps the old file, which gssh never uses
// again. A member gets an *UntrustedError (or fs.ErrNotExist) for such
// an entry, with nothing changed.
func (d Dir) Ensure(path string, fill Fill) (Result, error) {
	f, err := d.Open(path, os.O_RDONLY, Gssh)
	if err == nil {
		return Result{}, f.Close()
	}
	var ue *UntrustedError
	missing := errors.Is(err, fs.ErrNotExist)
	if !missing && !errors.As(err, &ue) {
		return Result{}, err
	}
	if !d.Privileged() {
		return Result{}, err
	}
	var old *os.File
	if ue != nil {
		// A regular file (a member's, or gssh's own with a link a member
		// added): its content may be kept (fill). With
		// fs.protected_hardlinks=1 (Check) a member can link only a file
		// they may read and write already, so its content, copied into
		// the lab's file, tells no one anything they could not read.
		if o, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0); err == nil {
			if fi, err := o.Stat(); err == nil && fi.Mode().IsRegular() {
				old = o
			} else {
				o.Close()
			}
		}
	}
	if old != nil {
		defer old.Close() // after the rename: a lock fill took of it is held till then
	}
	tmp, err := d.Create(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new-"+randHex()))
	if err != nil {
		return Result{}, err
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // a no-op once renamed
	if fill != nil {
		if err := fill(tmpName, old); err != nil {
			return Result{}, fmt.Errorf("make %s: %w", path, err)
		}
	}
	if old != nil && !sameEntry(old, path) {
		// Another pass replaced it meanwhile (under the lock fill took,
		// which it held till its rename): what was copied is stale.
		return d.Ensure(path, fill)
	}
	if missing {
		// Renamed only where no entry is (a file another process made
		// meanwhile is kept, and checked again), so that the new file
		// never shows two links, as a link then an unlink would.
		switch err := renameNoReplace(tmpName, path); {
		case err == nil:
			return Result{Created: true}, nil
		case errors.Is(err, fs.ErrExist):
			return d.Ensure(path, fill)
		default:
			return Result{}, err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		// A directory: moved aside (its content may be a member's, which
		// the pass account cannot remove), then replaced.
		aside := path + ".untrusted-" + randHex()
		if rerr := os.Rename(path, aside); rerr != nil {
			return Result{}, fmt.Errorf("replace %s: %w (and moving it aside: %v)", path, err, rerr)
		}
		if ue != nil {
			ue.Found += ", moved aside to " + aside
		}
		if err := os.Rename(tmpName, path); err != nil {
			return Result{}, fmt.Errorf("replace %s: %w", path, err)
		}
	}
	if old != nil && fill != nil {
		ue.Found += "; its content was kept"
	}
	return Result{Replaced: &Replaced{Path: path, Found: ue.Found}}, nil
}

// sameEntry reports whether path (not followed) is still the file f has
// open.
func sameEntry(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, now)
}

// OpenFix opens path as Open does with w Gssh; as the pass account or
// root it first makes it gssh's own file (Ensure, a missing one made
// empty when create is set), telling report (when set) what it
// replaced.
func (d Dir) OpenFix(path string, flag int, create bool, fill Fill, report func(Replaced)) (*os.File, error) {
	return d.openFix(path, flag, Gssh, create, fill, report)
}

// OpenLock is OpenFix of the lock file path (LockFile), for reading and
// writing, made empty when missing.
func (d Dir) OpenLock(path string, report func(Replaced)) (*os.File, error) {
	return d.openFix(path, os.O_RDWR, LockFile, true, nil, report)
}

// openFix is OpenFix with w.
func (d Dir) openFix(path string, flag int, w Want, create bool, fill Fill, report func(Replaced)) (*os.File, error) {
	f, err := d.Open(path, flag, w)
	var ue *UntrustedError
	if !d.Privileged() || !(errors.As(err, &ue) || create && errors.Is(err, fs.ErrNotExist)) {
		return f, err
	}
	r, err := d.Ensure(path, fill)
	if err != nil {
		return nil, err
	}
	if r.Replaced != nil && report != nil {
		report(*r.Replaced)
	}
	return d.Open(path, flag, w)
}

// Create makes path a new file of the pass account (when root makes it)
// in the lab group, mode Perm, failing when an entry is there already.
func (d Dir) Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|openFlags, d.Perm())
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	uid := -1
	if d.self == 0 {
		uid = d.PassUID
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if uid >= 0 || int(fi.Sys().(*syscall.Stat_t).Gid) != d.GID {
		if err := f.Chown(uid, d.GID); err != nil {
			return fail(err)
		}
	}
	if err := f.Chmod(d.Perm()); err != nil { // not the umask's
		return fail(err)
	}
	return f, nil
}

// CreateTemp is Create of a new file in the directory whose name is
// prefix and a random part.
func (d Dir) CreateTemp(prefix string) (*os.File, error) {
	return d.Create(filepath.Join(d.Path, prefix+randHex()))
}

// CopyOld is a Fill that keeps the content of the regular file it
// replaces (a member's, or gssh's own with a link a member made).
func CopyOld(tmp string, old *os.File) error {
	if old == nil {
		return nil
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|openFlags, 0)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(old); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// DescribeEntry is what the entry at path (fi its Lstat) is, in words.
func DescribeEntry(path string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		if to, err := os.Readlink(path); err == nil {
			return "a symbolic link to " + to
		}
	}
	return describe(fi)
}

// describe is what fi is, in words, with its owner: "a regular file of
// alice with 2 links".
func describe(fi fs.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	what := "a regular file"
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case m.IsDir():
		what = fmt.Sprintf("a directory (mode %04o)", chmodBits(m))
	case m&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	what += " of " + UserName(int(st.Uid))
	if !fi.IsDir() && st.Nlink != 1 {
		what += fmt.Sprintf(" with %d links", st.Nlink)
	}
	return what
}

// chmodBits is m as chmod takes it: 3770 for the lab's directory.
func chmodBits(m fs.FileMode) uint32 {
	n := uint32(m.Perm())
	for bit, v := range map[fs.FileMode]uint32{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if m&bit != 0 {
			n |= v
		}
	}
	return n
}

func randHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UserName is uid's name, else the number.
func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// groupName is gid's name, else the number.
func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// renameNoReplace renames from to to unless to exists (fs.ErrExist),
// with renameat2's RENAME_NOREPLACE; where the filesystem has no such
// rename, it links then unlinks, the new entry then showing two links
// for that moment.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS):
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	if err := os.Link(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}
