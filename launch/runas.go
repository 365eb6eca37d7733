package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gssh/gssh/sshexec"
)

// A host of `run_as: sudo` (inventory.Host.RunAsSudo) runs each job as
// its owner: every command of a job (its launch, polls, stops, log reads,
// the reap of its leftovers, the removal of its directories) goes through
//
//	sudo -n -H -u USER -- /bin/sh -c SCRIPT gssh-sudo "$PATH" "$GSSH_CLAIMS_DIR"
//
// (or, where the login is USER already, the same script without sudo:
// a member's own gssh reading their job), so it runs under USER's uid,
// in USER's home (sudo -H: $HOME is the
// passwd entry's; job directories are ~USER/.gssh/jobs/...), with the
// login's PATH and GPU claims registry (sudo's env_reset would drop
// them). -n: sudo never asks for a password; a login with no rule for
// USER fails the step with ErrSudo, naming the rule to add. Before the
// command, a `sudo -n -u USER /bin/sh -c :` of its own tells a refusal by
// sudo from the command's own failure (exit 125, "gssh-sudo: ..." on
// stderr), so the refusal is never read as a job's exit.

// ErrSudo marks a step refused by sudo on the worker: the SSH login may
// not run commands as the job's user (no NOPASSWD rule), or there is no
// such user there. Nothing ran.
var ErrSudo = errors.New("sudo refused")

// sudoCheckCode is the exit status of a command whose sudo check failed.
const sudoCheckCode = 125

// sudoMark starts the stderr line of a failed sudo check.
const sudoMark = "gssh-sudo: "

// SudoCommand is cmd run as user through sudo, as described above. user
// is quoted; cmd is a shell script, run with its own shell's $HOME and
// working directory that home.
func SudoCommand(user, cmd string) string {
	inner := "cd \"$HOME\" 2>/dev/null || cd /\nPATH=$1; export PATH\nif [ -n \"$2\" ]; then GSSH_CLAIMS_DIR=$2; export GSSH_CLAIMS_DIR; fi\nshift 2\n" + cmd
	u := q(user)
	// "$@" is the sudo prefix, or nothing where the login is user: the
	// script is in the command once.
	return `if [ "$(id -un)" = ` + u + ` ]; then set --; else
  if ! s=$(sudo -n -H -u ` + u + ` -- /bin/sh -c : 2>&1 </dev/null); then printf '` + sudoMark + `%s %s\n' "$(id -un)" "$(printf '%s' "$s" | head -n 1)" >&2; exit ` + fmt.Sprint(sudoCheckCode) + `; fi
  set -- sudo -n -H -u ` + u + ` --
fi
exec "$@" /bin/sh -c ` + q(inner) + ` gssh-sudo "$PATH" "${` + ClaimsDirEnv + `-}"`
}

// sudoErr turns a failed sudo check in err (an *sshexec.ExitError of
// SudoCommand) into an error wrapping ErrSudo that says which rule to
// add; any other err is returned as it is.
func sudoErr(err error, user string) error {
	var ee *sshexec.ExitError
	if !errors.As(err, &ee) || ee.Code != sudoCheckCode {
		return err
	}
	line, _, _ := strings.Cut(ee.Stderr, "\n")
	rest, ok := strings.CutPrefix(line, sudoMark)
	if !ok {
		return err
	}
	login, why, _ := strings.Cut(rest, " ")
	return &sudoError{user: user, login: login, why: why}
}

// sudoError is a refusal by sudo on a run_as: sudo host (whose name the
// step's error gives: see StepError).
type sudoError struct{ user, login, why string }

func (e *sudoError) Error() string {
	if strings.Contains(e.why, "unknown user") {
		return fmt.Sprintf("run_as: sudo: %s has no account there (%s): a job's owner must exist on a run_as: sudo host under the same name, with a home it may write", e.user, e.why)
	}
	return fmt.Sprintf("run_as: sudo: %s may not run commands as %s there (%s): add a sudoers rule on the host, e.g. in /etc/sudoers.d/gssh: %s ALL=(%s) NOPASSWD: /bin/sh (or (%%GROUP) for every member of a group)",
		e.login, e.user, e.why, e.login, e.user)
}

func (e *sudoError) Unwrap() error { return ErrSudo }

// asUser is a Shell whose every command runs as user (SudoCommand).
type asUser struct {
	sh   Shell
	user string
}

// AsUser returns sh with every command run as user through sudo; see
// SudoCommand. An empty user (a job recorded with none) is refused by
// every command with ErrSudo, never run as the login.
func AsUser(sh Shell, user string) Shell { return asUser{sh: sh, user: user} }

func (a asUser) noUser() error {
	return &sudoError{user: "(none)", login: "the login", why: "the job records no user to run as"}
}

func (a asUser) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	if a.user == "" {
		return sshexec.Result{}, a.noUser()
	}
	res, err := a.sh.Run(ctx, host, SudoCommand(a.user, cmd), stdin)
	return res, sudoErr(err, a.user)
}

func (a asUser) Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error {
	if a.user == "" {
		return a.noUser()
	}
	return sudoErr(a.sh.Stream(ctx, host, SudoCommand(a.user, cmd), stdin, stdout, stderr), a.user)
}

// asUserInteractor is an Interactor whose every command runs as user
// (SudoCommand), the interactive one too.
type asUserInteractor struct {
	asUser
	ia Interactor
}

// AsUserInteractor is AsUser for an Interactor: the job's own session
// (gssh run's, on a terminal or not) runs as user through sudo too, its
// exit status passed through (a refusal by sudo is ErrSudo, as AsUser's).
// Without a terminal the command runs in a session of its own (setsid
// -w: sudo's child is no session leader, as sshd's command is), so that
// a signal passed on (Signal: the job's process group) reaches it; on a
// terminal Ctrl-C is the terminal's to give.
func AsUserInteractor(sh Interactor, user string) Interactor {
	return asUserInteractor{asUser: asUser{sh: sh, user: user}, ia: sh}
}

func (a asUserInteractor) Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *sshexec.Terminal) error {
	if a.user == "" {
		return a.noUser()
	}
	if tty == nil {
		cmd = "exec setsid -w /bin/sh -c " + q(cmd)
	}
	return sudoErr(a.ia.Interact(ctx, host, SudoCommand(a.user, cmd), stdin, stdout, stderr, tty), a.user)
}

// ownerGroup is the items a host's commands run as one user for: User
// "" is the login.
type ownerGroup[T any] struct {
	User  string
	Items []T
	At    []int // each item's index in what byOwner was given
}

// byOwner groups items by the user their commands run as on a host
// (owner's answer where sudo is set: a run_as: sudo host; else the
// login, ""), in the order each user first comes.
func byOwner[T any](items []T, sudo bool, owner func(T) string) []ownerGroup[T] {
	var gs []ownerGroup[T]
	for i, it := range items {
		u := ""
		if sudo {
			u = owner(it)
		}
		k := slices.IndexFunc(gs, func(g ownerGroup[T]) bool { return g.User == u })
		if k < 0 {
			gs = append(gs, ownerGroup[T]{User: u})
			k = len(gs) - 1
		}
		gs[k].Items = append(gs[k].Items, it)
		gs[k].At = append(gs[k].At, i)
	}
	return gs
}
