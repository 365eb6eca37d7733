package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/state"
)

// ErrNotRoot means gssh lab init was not run as root.
var ErrNotRoot = errors.New("gssh lab init sets up files for the lab's pass account and group: run it as root")

// LabInit is gssh lab init: from the `lab:` block of the lab inventory
// file (a file root owns and no one else can write: TrustedLabFile) it
// sets the lab up, as root: the group (groupadd, when missing), the
// state's directory (the pass account's, the lab group's, mode 3770:
// labfile.Mode; its parent made 0755 when missing), and in it the state
// file (an empty queue), the pass lock, the event log and its lock (the
// pass account's, mode 0660) and the run-session locks' directory (as
// the state's). What is right already is kept; an entry that is not
// gssh's is replaced (labfile.Dir.Ensure) and the event log says so. It
// can be run again at any time. With `serve: true` in the block (which
// serve, gssh lab init --serve, requires) the lab is gssh serve's alone:
// the directories are 0750 and the files 0600 (labfile.Dir.Served), and
// an existing lab's are changed so. It returns what it did, one line per
// thing, in words. Errors: ErrNotRoot; an *inventory error; ErrUntrustedLab;
// a pass account that does not exist; the OS errors.
func LabInit(file string, serve bool, now func() time.Time) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if _, ok := inventory.LabLine(file); !ok {
		return nil, fmt.Errorf("%s: no `lab:` block (state, pass_user, group): gssh lab init sets up the lab that block describes", file)
	}
	inv, err := loadLab(file)
	if err != nil {
		return nil, err
	}
	lb := inv.Lab
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	pu, err := user.Lookup(lb.PassUser)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: lab pass_user %q names no account on this host (%v): create it first (useradd --system %s)", file, lb.PassUserLine, lb.PassUser, err, lb.PassUser)
	}
	g, err := user.LookupGroup(lb.Group)
	if err != nil {
		if msg, err := exec.Command("groupadd", lb.Group).CombinedOutput(); err != nil {
			return out, fmt.Errorf("groupadd %s: %v: %s", lb.Group, err, strings.TrimSpace(string(msg)))
		}
		if g, err = user.LookupGroup(lb.Group); err != nil {
			return out, err
		}
		say("group %s: created; add the lab's members to it (usermod -aG %s NAME; they log in again)", lb.Group, lb.Group)
	} else {
		say("group %s: there already", lb.Group)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	dir := filepath.Dir(lb.State)
	d := labfile.New(dir, lb.PassUser, uid, lb.Group, gid)
	d.Served = lb.Serve
	if serve && !lb.Serve {
		return out, fmt.Errorf("%s:%d: --serve sets the lab up for gssh serve alone, and its `lab:` block does not say so: add `serve: true` to it (every member's gssh reads it there), then run gssh lab init --serve again", file, lb.Line)
	}
	mode, perm := d.ModeText(), fmt.Sprintf("%04o", d.Perm())
	if err := d.ProtectedHardlinks(); err != nil {
		return out, err
	}
	var replaced []labfile.Replaced
	note := func(r labfile.Replaced) {
		replaced = append(replaced, r)
		say("%s: was not gssh's (%s): replaced by a fresh file of %s", r.Path, r.Found, lb.PassUser)
	}
	if parent := filepath.Dir(dir); !exists(parent) {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return out, err
		}
		say("%s: made (mode 0755)", parent)
	}
	for _, p := range []string{dir, lb.State + ".run"} {
		right := d.Sub(p).Check() == nil
		r, err := d.Sub(p).EnsureDir(p, p == dir)
		if err != nil {
			return out, err
		}
		switch {
		case r.Replaced != nil:
			note(*r.Replaced)
		case r.Created:
			say("%s: made (owner %s, group %s, mode %s)", p, lb.PassUser, lb.Group, mode)
		case right:
			say("%s: right already (owner %s, group %s, mode %s)", p, lb.PassUser, lb.Group, mode)
		default:
			say("%s: made owner %s, group %s, mode %s", p, lb.PassUser, lb.Group, mode)
		}
	}
	had, before := exists(lb.State), len(replaced)
	if _, err := state.Open(lb.State, state.Options{Shared: &state.Shared{Lab: d, Report: note}}); err != nil {
		return out, err
	}
	switch {
	case !had:
		say("%s: made (an empty queue; owner %s, group %s, mode %s)", lb.State, lb.PassUser, lb.Group, perm)
	case len(replaced) == before:
		say("%s: kept (owner %s or root, group %s, mode %s)", lb.State, lb.PassUser, lb.Group, perm)
	}
	events := eventlog.Path(lb.State)
	for _, p := range []string{lb.State + ".pass.lock", events, events + ".lock"} {
		var fill labfile.Fill
		if p == events {
			fill = labfile.CopyOld // its events
		} else if f, err := d.Open(p, os.O_RDONLY, labfile.LockFile); err == nil {
			f.Close() // a lock with a link a member made is kept (labfile.LockFile)
			say("%s: kept (owner %s or root, group %s, mode %s)", p, lb.PassUser, lb.Group, perm)
			continue
		}
		r, err := d.Ensure(p, fill)
		switch {
		case err != nil:
			return out, err
		case r.Replaced != nil:
			note(*r.Replaced)
		case r.Created:
			say("%s: made (owner %s, group %s, mode %s)", p, lb.PassUser, lb.Group, perm)
		default:
			say("%s: kept (owner %s or root, group %s, mode %s)", p, lb.PassUser, lb.Group, perm)
		}
	}
	if len(replaced) > 0 {
		log := eventlog.Open(events, eventlog.Options{Lab: &d, Now: now})
		for _, r := range replaced {
			log.Write(eventlog.Replaced(now(), r))
		}
		log.Close()
	}
	return out, nil
}

// exists reports whether there is an entry at p (not followed).
func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
