package launch_test

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec"
)

// fakeSudo is a sudo that writes its arguments, one per line, to
// $SUDO_LOG, refuses the users in $SUDO_REFUSE as sudo -n does, and
// otherwise runs what follows `--` (as the caller: the test is not root)
// with HOME set to $SUDO_HOME, as -H does.
const fakeSudo = `#!/bin/sh
printf '%s\n' "$@" >>"$SUDO_LOG"
printf '%s\n' ---- >>"$SUDO_LOG"
[ "$1 $2 $3" = "-n -H -u" ] || { echo "sudo: bad usage" >&2; exit 1; }
u=$4
case " $SUDO_REFUSE " in *" $u "*) echo "sudo: a password is required" >&2; exit 1 ;; esac
case " $SUDO_UNKNOWN " in *" $u "*) echo "sudo: unknown user $u" >&2; exit 1 ;; esac
shift 5
HOME=$SUDO_HOME exec "$@"
`

func sudoEnv(t *testing.T, refuse string) (sshexec.Local, string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	home := filepath.Join(dir, "home")
	os.Mkdir(bin, 0o755)
	os.Mkdir(home, 0o755)
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(fakeSudo), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "sudo.log")
	return sshexec.Local{Env: []string{"PATH=" + bin + ":/usr/bin:/bin", "SUDO_LOG=" + log, "SUDO_HOME=" + home, "SUDO_REFUSE=" + refuse, "SUDO_UNKNOWN=ghost", launch.ClaimsDirEnv + "=/claims dir"}}, log, home
}

// Every command runs through sudo as the user, the user's name quoted
// however hostile, in the user's home, with the login's PATH and claims
// registry.
func TestAsUserRunsThroughSudo(t *testing.T) {
	for _, user := range []string{"alice", "a b", "x'; touch /tmp/gssh-pwned; '", "$(id)", "-rf"} {
		local, logf, home := sudoEnv(t, "")
		sh := launch.AsUser(local, user)
		res, err := sh.Run(context.Background(), "w1", `pwd; echo "$PATH"; echo "$GSSH_CLAIMS_DIR"; cat`, strings.NewReader("on stdin\n"))
		if err != nil {
			t.Fatalf("user %q: %v", user, err)
		}
		if got, want := string(res.Stdout), home+"\n"+strings.TrimPrefix(local.Env[0], "PATH=")+"\n/claims dir\non stdin\n"; got != want {
			t.Errorf("user %q: printed %q, want %q", user, got, want)
		}
		b, _ := os.ReadFile(logf)
		calls := strings.Split(strings.TrimSuffix(string(b), "----\n"), "----\n")
		if len(calls) != 2 {
			t.Fatalf("user %q: %d sudo calls, want the check and the command:\n%s", user, len(calls), b)
		}
		for _, c := range calls {
			args := strings.Split(c, "\n")
			if len(args) < 6 || args[3] != user || args[4] != "--" || args[5] != "/bin/sh" {
				t.Errorf("user %q: sudo called with %q", user, args)
			}
		}
		if _, err := os.Stat("/tmp/gssh-pwned"); err == nil {
			t.Fatalf("user %q ran a command", user)
		}
	}
}

// A login that is the user already runs the command itself: no sudo,
// no rule needed.
func TestAsUserSelf(t *testing.T) {
	local, logf, _ := sudoEnv(t, "")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	res, err := launch.AsUser(local, me.Username).Run(context.Background(), "w1", "id -un", nil)
	if err != nil || string(res.Stdout) != me.Username+"\n" {
		t.Errorf("as %s: %q, %v", me.Username, res.Stdout, err)
	}
	if b, err := os.ReadFile(logf); err == nil {
		t.Errorf("sudo was called: %s", b)
	}
}

// A user sudo refuses fails with ErrSudo naming the rule to add; a
// command's own failure is its exit, whatever it prints.
func TestAsUserSudoRefused(t *testing.T) {
	local, _, _ := sudoEnv(t, "bob")
	_, err := launch.AsUser(local, "bob").Run(context.Background(), "w1", "true", nil)
	login := os.Getenv("USER")
	if !errors.Is(err, launch.ErrSudo) || !strings.Contains(err.Error(), "may not run commands as bob there (sudo: a password is required)") || !strings.Contains(err.Error(), "NOPASSWD: /bin/sh") {
		t.Errorf("bob refused: %v (login %s)", err, login)
	}
	_, err = launch.AsUser(local, "alice").Run(context.Background(), "w1", "echo 'sudo: not me' >&2; exit 125", nil)
	var ee *sshexec.ExitError
	if errors.Is(err, launch.ErrSudo) || !errors.As(err, &ee) || ee.Code != 125 {
		t.Errorf("a command's own exit 125: %v, want it as it is", err)
	}
	_, err = launch.AsUser(local, "ghost").Run(context.Background(), "w1", "true", nil)
	if !errors.Is(err, launch.ErrSudo) || !strings.Contains(err.Error(), "ghost has no account there (sudo: unknown user ghost): a job's owner must exist") {
		t.Errorf("an owner with no account: %v, want it said so (no sudoers rule helps)", err)
	}
	if _, err := launch.AsUser(local, "").Run(context.Background(), "w1", "true", nil); !errors.Is(err, launch.ErrSudo) {
		t.Errorf("no user: %v, want ErrSudo (never the login)", err)
	}
}
