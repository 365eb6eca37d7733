package labfile

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrDir means the state directory is missing or not as a lab's must be.
var ErrDir = errors.New("the lab's state directory is not set up")

// Check refuses a directory that is missing, a symbolic link, not a
// directory, or not owned by the pass account, of the lab group, mode
// 3770, and a host where fs.protected_hardlinks is not 1
// (ProtectedHardlinks). Errors wrap ErrDir and say what to run.
//
// The directories above it must be root's (or the pass account's) and
// writable by no one else unless sticky (as /tmp): else a member could
// move the state directory away and put their own in its place.
func (d Dir) Check() error {
	if err := d.ProtectedHardlinks(); err != nil {
		return err
	}
	if err := checkDir(d.Path, d); err != nil {
		return err
	}
	for p := filepath.Dir(d.Path); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrDir, err)
		}
		uid := int(fi.Sys().(*syscall.Stat_t).Uid)
		if !fi.IsDir() || uid != 0 && uid != d.PassUID || fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("%w: %s, above the lab's state directory, is %s: others than root and the pass account could move the state directory away (as root: chown root: %s; chmod go-w %s)",
				ErrDir, p, describe(fi), p, p)
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

// ProtectedHardlinks refuses a host where fs.protected_hardlinks is not
// 1 (read from HardlinksSysctl). Without it a member may hard-link any
// file of the filesystem into the lab's directory (/etc/shadow, the pass
// account's keys): the pass account, finding its own or root's file
// there with two links, could not tell the lab's file with a member's
// extra link from a private file, and copying it into the lab's 0660
// file would show it to every member. With it a member can link only
// what they may read and write already. Errors wrap ErrDir and say what
// to run.
func (d Dir) ProtectedHardlinks() error {
	p := cmp.Or(d.sysctl, HardlinksSysctl)
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("%w: fs.protected_hardlinks cannot be read (%v): a lab needs it on, so that a member cannot hard-link others' files into its directory", ErrDir, err)
	}
	if v := strings.TrimSpace(string(b)); v != "1" {
		return fmt.Errorf("%w: fs.protected_hardlinks is %s (%s), and a lab needs 1, so that a member cannot hard-link others' files into its directory: as root, sysctl -w fs.protected_hardlinks=1, and to keep it at boot: echo fs.protected_hardlinks=1 > /etc/sysctl.d/50-gssh-lab.conf", ErrDir, v, p)
	}
	return nil
}

// checkDir is Check of path, which must be as d's directory is.
func checkDir(path string, d Dir) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("%w: %v (%s)", ErrDir, err, d.Fix())
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode() != d.Mode() || int(st.Uid) != d.PassUID || int(st.Gid) != d.GID {
		why := "setgid, sticky: no member can remove or replace another's files"
		if d.Served {
			why = "gssh serve's queue: members reach its socket, and write nothing there"
		}
		return fmt.Errorf("%w: %s is %s, group %s; a lab's is a directory of the pass account %s, group %s, mode %s (%s) (%s)",
			ErrDir, path, describe(fi), groupName(int(st.Gid)), d.PassUser, d.Group, d.ModeText(), why, d.Fix())
	}
	return nil
}

// EnsureDir makes path a directory of the lab's shape (Check: the pass
// account's, the lab group's, 3770), as the pass account or root: a
// missing one is made; a directory of the pass account or root (any
// directory's, with adopt: root's set-up of an existing lab) gets its
// owner, group and mode through its descriptor; anything else (a
// symbolic link, another type, a member's directory) is moved aside,
// never followed, and a fresh one made in its place (Result.Replaced).
func (d Dir) EnsureDir(path string, adopt bool) (Result, error) {
	if checkDir(path, d) == nil {
		return Result{}, nil
	}
	if !d.Privileged() {
		return Result{}, checkDir(path, d)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return Result{}, err
		}
		return Result{Created: true}, d.fixDir(path)
	case err != nil:
		return Result{}, err
	}
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	if fi.IsDir() && (adopt || uid == d.PassUID || uid == 0) {
		return Result{}, d.fixDir(path)
	}
	aside := path + ".untrusted-" + randHex()
	if err := os.Rename(path, aside); err != nil {
		return Result{}, err
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		return Result{}, err
	}
	return Result{Replaced: &Replaced{Path: path, Found: DescribeEntry(aside, fi) + ", moved aside to " + aside}}, d.fixDir(path)
}

// fixDir gives the directory at path (never a symbolic link: opened
// with O_NOFOLLOW) the pass account as owner (as root), the lab group
// and mode 3770, through its descriptor.
func (d Dir) fixDir(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	uid := -1
	if d.self == 0 {
		uid = d.PassUID
	}
	if err := f.Chown(uid, d.GID); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Chmod(d.Mode() &^ fs.ModeDir); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return checkDir(path, d)
}

// Sub is d for its subdirectory path (the run-session locks'), which
// must be of the same shape.
func (d Dir) Sub(path string) Dir {
	d.Path = path
	return d
}
