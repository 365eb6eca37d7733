package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// errOf is the stderr an *exec.ExitError kept, if any.
func errOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestServedLabSudo: a served lab whose worker is `run_as: sudo`. The
// daemon (the pass account) logs in as itself and runs each job through
// sudo as its owner: without a sudoers rule the launch fails, naming the
// rule to add; with the rule the test writes, alice's and bob's jobs run
// under their own uids, in their own homes, and alice's cancel stops hers
// there.
func TestServedLabSudo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sudo"); err != nil {
		skipOutsideCI(t, "sudo not found: apt-get install -y sudo")
	}
	l := newLab(t, true)
	alice, bob, pass := l.alice, l.bob, l.pass
	doc := fmt.Sprintf("hosts:\n  - name: w1\n    run_as: sudo\nlab:\n  state: %s\n  pass_user: %s\n  group: %s\n  serve: true\n", l.statePath, pass.name, l.group)
	if err := os.WriteFile(l.inv, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := l.startServe(t)
	defer stop(false)

	// No rule yet: the launch is refused by sudo, and says what to add.
	out, errs, code := l.gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "true")
	if code != 0 {
		t.Fatalf("alice's submit: exit %d: %s%s", code, out, errs)
	}
	show, errs, _ := l.gssh(alice, "show", "1")
	for _, want := range []string{"launch on w1: run_as: sudo: " + pass.name + " may not run commands as " + alice.name + " there", pass.name + " ALL=(" + alice.name + ") NOPASSWD: /bin/sh"} {
		if !strings.Contains(show+errs, want) {
			t.Errorf("job 1 without a sudoers rule: want %q in:\n%s%s", want, show, errs)
		}
	}

	// The rule: the pass account may run /bin/sh as any member of the lab.
	rule := filepath.Join("/etc/sudoers.d", "gssh-test-"+l.tag)
	if err := os.WriteFile(rule, []byte(pass.name+" ALL=(%"+l.group+") NOPASSWD: /bin/sh\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(rule) })
	if out, err := exec.Command("visudo", "-c", "-f", rule).CombinedOutput(); err != nil {
		t.Fatalf("visudo -c %s: %v: %s", rule, err, out)
	}

	for _, u := range []*labUser{alice, bob} {
		out, errs, code := l.gssh(u, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "sh", "-c", `id -un; id -u; echo "$HOME"; pwd`)
		if code != 0 || !strings.Contains(out, "running on w1:") {
			t.Fatalf("%s's submit: exit %d: %s%s", u.name, code, out, errs)
		}
		id := strings.Fields(out)[1]
		if out, errs, code := l.gssh(u, "wait", id); code != 0 {
			t.Fatalf("%s's wait %s: exit %d: %s%s", u.name, id, code, out, errs)
		}
		want := fmt.Sprintf("%s\n%d\n%s\n%s\n", u.name, u.uid, u.home, l.work)
		if out, errs, code := l.gssh(u, "logs", id); code != 0 || out != want {
			t.Errorf("%s's job %s printed %q (exit %d, %s); want %q: it runs as its owner", u.name, id, out, code, errs, want)
		}
		if show, _, _ := l.gssh(u, "show", id); !strings.Contains(show, "job dir:     "+filepath.Join(u.home, ".gssh", "jobs")) {
			t.Errorf("%s's job %s: its directory is not in %s's home:\n%s", u.name, id, u.name, show)
		}
	}

	// gssh run through the daemon: alice's job runs as her, in the
	// foreground of her gssh run: her stdin reaches it, its output and
	// exit status come back; Ctrl-C (SIGINT to her gssh run) reaches it.
	cmd := l.command(alice, []string{"GSSH_INVENTORY=" + l.inv}, "run", "-q", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "sh", "-c", `id -un; cat; exit 3`)
	cmd.Stdin = strings.NewReader("from alice's terminal\n")
	got, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || string(got) != alice.name+"\nfrom alice's terminal\n" {
		t.Errorf("alice's gssh run: %q, %v (%s); want her name, her input and exit status 3", got, err, errOf(err))
	}
	cmd = l.command(alice, []string{"GSSH_INVENTORY=" + l.inv}, "run", "-q", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--",
		"sh", "-c", `trap "echo got INT; exit 5" INT; echo ready; sleep 301 & wait`)
	var runOut strings.Builder
	ready := make(chan struct{})
	cmd.Stdout = writerFunc(func(b []byte) (int, error) {
		if runOut.WriteString(string(b)); strings.Contains(runOut.String(), "ready") {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}
		return len(b), nil
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
		cmd.Process.Signal(os.Interrupt)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 || !strings.Contains(runOut.String(), "got INT") {
		t.Errorf("alice's gssh run, Ctrl-C: %q, %v; want the job's trap and exit status 5", runOut.String(), err)
	}
	if pids := pgrep(t, alice.name, "sleep 301"); len(pids) != 0 {
		t.Errorf("after alice's gssh run ended: her sleep 301 still runs: %v", pids)
	}

	// Alice's long job runs as her; her cancel stops it there.
	out, errs, code = l.gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", l.work, "--", "sleep", "300")
	if code != 0 || !strings.Contains(out, "running on w1:") {
		t.Fatalf("alice's submit of sleep 300: exit %d: %s%s", code, out, errs)
	}
	id := strings.Fields(out)[1]
	if pids := pgrep(t, alice.name, "sleep 300"); len(pids) != 1 {
		t.Errorf("alice's sleep 300: processes of %s %v, want one", alice.name, pids)
	}
	if out, errs, code := l.gssh(alice, "cancel", "--grace", "1s", id); code != 0 {
		t.Errorf("alice's cancel %s: exit %d: %s%s", id, code, out, errs)
	}
	if out, errs, code := l.gssh(alice, "wait", id); code == 0 || !strings.Contains(errs, "cancelled") {
		t.Errorf("alice's wait %s after her cancel: exit %d: %s%s; want it cancelled", id, code, out, errs)
	}
	if pids := pgrep(t, alice.name, "sleep 300"); len(pids) != 0 {
		t.Errorf("after alice's cancel: her sleep 300 still runs: %v", pids)
	}
}

// pgrep lists the pids of user's processes whose command line is cmd.
func pgrep(t *testing.T, user, cmd string) []string {
	t.Helper()
	out, _ := exec.Command("pgrep", "-u", user, "-x", "-f", cmd).Output()
	return strings.Fields(string(out))
}
