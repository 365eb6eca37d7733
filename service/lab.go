package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/state"
)

// DefaultLabInventory is where gssh looks for a lab's shared queue, the
// machine-wide inventory: a `lab:` block in this file makes every
// member's gssh use its state, its policy and its hosts.
const DefaultLabInventory = inventory.SystemPath

// ErrNotPassUser means a member of a shared lab queue asked for what
// only the lab's pass_user does: a pass (Schedule; Submit, Cancel, Hold,
// Release and Update only record and leave the rest to that pass), or a
// reap that kills (Reap without DryRun).
var ErrNotPassUser = errors.New("not the lab's pass user")

// lab is shared-lab mode: the lab inventory's `lab:` block, checked
// against this host's accounts.
type lab struct {
	file     string // the lab inventory
	passUser string
	dir      labfile.Dir // the state's directory
}

// findLab looks for a lab inventory: the file $GSSH_INVENTORY names, then
// opt.LabInventory; the first with a `lab:` block is the lab's, and it
// wins over a personal inventory (--inventory, ~/.config/gssh/hosts.yaml)
// and over --state / $GSSH_STATE and a $GSSH_INVENTORY without a `lab:`
// block, which are warned about and ignored. It
// rewrites opt to the lab's inventory and state. Without one, gssh is in
// personal mode, and a `lab:` block in the personal inventory is warned
// about and ignored. Nothing happens when opt.LabInventory is "" or the
// inventory is given (tests).
func findLab(opt *Options) (*lab, error) {
	if opt.LabInventory == "" || opt.Fleet.Inventory != nil {
		return nil, nil
	}
	warn := func(s string) {
		if opt.Fleet.Warn != nil {
			opt.Fleet.Warn("warning: " + s)
		}
	}
	file := ""
	for _, p := range []string{opt.Fleet.InventoryEnv, opt.LabInventory} {
		if _, ok := inventory.LabLine(p); p != "" && ok {
			file = p
			break
		}
	}
	if file == "" {
		if p, err := inventory.Locate(opt.Fleet.InventoryPath, opt.Fleet.InventoryEnv, opt.Fleet.Home, opt.Fleet.SystemInventory); err == nil {
			if line, ok := inventory.LabLine(p); ok {
				warn(fmt.Sprintf("%s:%d: its `lab:` block is ignored: a lab's shared queue is set up in %s (or the file $GSSH_INVENTORY names), not in a personal inventory; this gssh keeps its own queue", p, line, opt.LabInventory))
			}
		}
		return nil, nil
	}
	inv, err := loadLab(file)
	if err != nil {
		return nil, err
	}
	lb := inv.Lab
	pu, err := user.Lookup(lb.PassUser)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: lab pass_user %q names no account on this host (%v): create it (useradd --system %s) or name the account that runs gssh schedule", file, lb.PassUserLine, lb.PassUser, err, lb.PassUser)
	}
	passUID, err := strconv.Atoi(pu.Uid)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: lab pass_user %q: uid %q is not a number", file, lb.PassUserLine, lb.PassUser, pu.Uid)
	}
	g, err := user.LookupGroup(lb.Group)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: lab group %q names no group on this host (%v): groupadd %s and add the members (usermod -aG %s NAME), or name the state directory's group with `group:`", file, max(lb.GroupLine, lb.Line), lb.Group, err, lb.Group, lb.Group)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: lab group %q: gid %q is not a number", file, max(lb.GroupLine, lb.Line), lb.Group, g.Gid)
	}
	if p, err := inventory.Locate(opt.Fleet.InventoryPath, "", opt.Fleet.Home, opt.Fleet.SystemInventory); err == nil && p != file && p != opt.LabInventory {
		warn(fmt.Sprintf("inventory %s is ignored: %s:%d has a `lab:` block, so its hosts, policy and state are the lab's one queue", p, file, lb.Line))
	}
	if p := opt.Fleet.InventoryEnv; p != "" && p != file && p != opt.LabInventory && p != opt.Fleet.InventoryPath {
		warn(fmt.Sprintf("inventory %s ($GSSH_INVENTORY) is ignored: %s:%d has a `lab:` block, so its hosts, policy and state are the lab's one queue", p, file, lb.Line))
	}
	if opt.StateExplicit && opt.StatePath != lb.State {
		warn(fmt.Sprintf("state %s (--state or $GSSH_STATE) is ignored: the lab's queue is %s (%s:%d)", opt.StatePath, lb.State, file, lb.StateLine))
	}
	opt.Fleet.Inventory = inv
	opt.StatePath, opt.StateExplicit = lb.State, false
	opt.Owner = "" // the lab's queue is nobody's own: priorities 0-3 are its admins' (policy users admin: true)
	dir := labfile.New(filepath.Dir(lb.State), lb.PassUser, passUID, lb.Group, gid)
	dir.Served = lb.Serve
	return &lab{file: file, passUser: lb.PassUser, dir: dir}, nil
}

// ErrUntrustedLab means a `lab:` block was found in a file that root
// does not own or that others than root may write: it is not used.
var ErrUntrustedLab = errors.New("its `lab:` block is not used")

// TrustedLabFile checks that a lab inventory may be trusted, as sshd's
// StrictModes checks a user's files: file, its symbolic links resolved,
// must be a regular file that root owns and that neither its group nor
// others may write, and so must every directory above it (a directory
// others may write is allowed only when it is sticky, as /tmp is: then
// no one but root can rename root's entries in it). Anyone who could
// write such a file could name themselves its pass_user and so act for
// the pass account. It returns the resolved path, to be read instead of
// file (nothing but root can change what it leads to). Errors wrap
// ErrUntrustedLab, naming the file and what to do.
func TrustedLabFile(file string) (string, error) {
	real, err := filepath.EvalSymlinks(file)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w: %v", file, ErrUntrustedLab, err)
	}
	for p, top := real, true; ; p, top = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w: %v", file, ErrUntrustedLab, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		what := "the file " + p
		if !top {
			what = "its directory " + p
		}
		why := ""
		switch {
		case top && !fi.Mode().IsRegular():
			why = what + " is not a regular file"
		case st.Uid != 0:
			why = fmt.Sprintf("%s is owned by %s, not root", what, labfile.UserName(int(st.Uid)))
		case fi.Mode().Perm()&0o022 != 0 && (top || fi.Mode()&fs.ModeSticky == 0):
			why = fmt.Sprintf("%s has mode %04o: others than root may write it", what, fi.Mode().Perm())
		}
		if why != "" {
			return "", fmt.Errorf("%s: %w: %s; anyone who can write it could name themselves the pass account (as root: chown root: %s; chmod go-w %s); a copy of your own must not have a `lab:` block",
				file, ErrUntrustedLab, why, p, p)
		}
		if p == "/" {
			return real, nil
		}
	}
}

// loadLab loads the lab inventory file, once TrustedLabFile trusts it
// (from where its links lead: nothing but root can change that).
func loadLab(file string) (*inventory.Inventory, error) {
	real, err := TrustedLabFile(file)
	if err != nil {
		return nil, err
	}
	return inventory.Load(real)
}

// member reports whether this gssh is a member's in shared-lab mode (not
// the pass user's): it records, and the pass user's next pass acts. The
// pass user is the process whose effective uid is the pass account's,
// whatever its user name says (which may come from $USER).
func (l *Local) member() bool {
	return l.lab != nil && (l.opt.User != l.lab.passUser || os.Geteuid() != l.lab.dir.PassUID)
}

// guest reports whether l acts, in a personal queue, for a user other
// than its owner: one of the `policy: users:` its owner gave an HTTP API
// token (see CreateToken). A guest has a lab member's rights over jobs
// and hosts (its own jobs; admins: every job, drains), none over the
// queue's workers (gssh reap kills nothing) or its tokens.
func (l *Local) guest() bool {
	return l.lab == nil && l.opt.Owner != "" && l.opt.User != l.opt.Owner
}

// restricted reports whether l's user may act only on their own jobs
// unless an admin: a lab member or a guest.
func (l *Local) restricted() bool { return l.member() || l.guest() }

// MayActOnAll reports whether l's user may cancel, change and read the
// logs of every user's jobs: the queue's owner in personal mode, the
// lab's pass user, and the policy's admins (users: admin: true).
func (l *Local) MayActOnAll() bool {
	if !l.restricted() {
		return true
	}
	f, err := l.hosts()
	return err == nil && f.Inventory().Policy.Plan.Users[l.opt.User].Admin
}

// notPassUser is the error of a pass a member asked for.
func (l *Local) notPassUser() error {
	return fmt.Errorf("only the lab's pass user runs scheduling passes (%w): this is the shared queue of %s, whose passes only %s runs (from cron or a systemd timer); you are %s, and your jobs start at its next pass",
		ErrNotPassUser, l.lab.file, l.lab.passUser, l.opt.User)
}

// notPassReaper is the error of a reap (not a dry run) a member asked
// for.
func (l *Local) notPassReaper() error {
	return fmt.Errorf("only the lab's pass user reaps (%w): gssh reap kills processes on the workers, where the lab's jobs run as %s (the queue of %s), so only %s runs it; you are %s: gssh reap --dry-run shows what it would kill",
		ErrNotPassUser, l.lab.passUser, l.lab.file, l.lab.passUser, l.opt.User)
}

// ErrNotYours wraps a lab member's action on another member's job.
var ErrNotYours = errors.New("is not yours")

// mayAct refuses a lab member's cancel, hold, release or update (what) of
// a job of another user, unless the member is one of the lab's admins
// (policy users: admin: true), as scancel refuses another user's job. The
// pass user and personal mode may act on every job. A job that cannot be
// read is left to the action, which says so.
func (l *Local) mayAct(f *fleet.Fleet, st *state.Bolt, id job.ID, what string) error {
	if !l.restricted() {
		return nil
	}
	j, err := st.Get(id)
	if err != nil || j.User == l.opt.User || f.Inventory().Policy.Plan.Users[l.opt.User].Admin {
		return nil
	}
	if l.guest() {
		return fmt.Errorf("job %s %w: it is %s's, and in %s's queue you may %s your own jobs only, unless an admin (policy users: admin: true)", j.Ref(), ErrNotYours, j.User, l.opt.Owner, what)
	}
	return fmt.Errorf("job %s %w: it is %s's, and in the lab's queue only its owner or a lab admin (policy users: admin: true) may %s it", j.Ref(), ErrNotYours, j.User, what)
}

// shared is the state.Shared of the lab's state: its directory, and
// entries found not gssh's told in the event log.
func (l *Local) shared() *state.Shared {
	return &state.Shared{Lab: l.lab.dir, Report: l.reportReplaced}
}

// reportReplaced writes the lab_file_replaced event of r.
func (l *Local) reportReplaced(r labfile.Replaced) {
	l.logEvent(eventlog.Replaced(l.opt.Now(), r))
}

// passLock is the pass lock's function: control.LockPass, in shared-lab
// mode control.LockPassShared of the lab's directory.
func (l *Local) passLock() func(context.Context, string, time.Duration) (func(), error) {
	if l.lab == nil {
		return control.LockPass
	}
	return control.LockPassShared(l.lab.dir, l.reportReplaced)
}

// sessions are the gssh run sessions of this state (their locks).
func (l *Local) sessions() sessions {
	ss := sessions{dir: l.sessionDir()}
	if l.lab != nil {
		ss.lab, ss.report = &l.lab.dir, l.reportReplaced
	}
	return ss
}
