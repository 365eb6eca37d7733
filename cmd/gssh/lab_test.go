package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/testenv"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// labUser is an OS user the shared-lab test made, with a home of its own
// (its ~/.ssh: config, key, known_hosts).
type labUser struct {
	name     string
	uid, gid uint32
	home     string
}

// sharedLab is the shared-lab tests' set-up: three OS users made for
// them (members alice and bob, and the pass account), a group, the lab's
// setgid state directory, and one real sshd worker w1 whose nvidia-smi
// replays a100x4 (GPUs 0-2 carry other people's processes, GPU 3 is
// idle), every user logging in as themselves. Everything is removed when
// the test ends.
type sharedLab struct {
	t     *testing.T
	tag   string // the prefix of the users' and the group's names
	root  string // traversable by the users; everything lies under it
	bin   string // the gssh binary
	group string
	gid   int
	work  string // a workdir every user (and job) may write in
	// stateDir is the lab's setgid group directory (2770); statePath the
	// state file in it that inv names.
	stateDir, statePath, inv string
	alice, bob, pass         *labUser
	served                   bool // serve: true: the queue is gssh serve's alone
}

// labCount counts the shared labs this test binary made (their names'
// last letter).
var labCount atomic.Int32

// accountsMu keeps the shared-lab tests' useradd, userdel, groupadd and
// groupdel one at a time: run at once, they fail to lock /etc/passwd.
var accountsMu sync.Mutex

// accounts runs one of them (a tool managing OS users and groups),
// failing t if it fails; t nil (a cleanup) ignores the failure.
func accounts(t *testing.T, tool string, args ...string) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	if t == nil {
		exec.Command(tool, args...).Run()
		return
	}
	t.Helper()
	mustRun(t, "", tool, args...)
}

// newSharedLab sets up a shared lab, or skips the test where it cannot
// (not root, no useradd): under CI=true it fails instead. Its inventory
// inv has TestSharedLab's policy (alice weight 1 and admin, bob weight 2).
func newSharedLab(t *testing.T) *sharedLab {
	t.Helper()
	return newLab(t, false)
}

// newLab is newSharedLab; served sets the lab up for gssh serve alone
// (serve: true, gssh lab init --serve).
func newLab(t *testing.T, served bool) *sharedLab {
	t.Helper()
	sshtest.RequireSSHD(t)
	if os.Geteuid() != 0 {
		skipOutsideCI(t, "the shared-lab test makes OS users (useradd, groupadd): run it as root")
	}
	for _, tool := range []string{"useradd", "groupadd", "userdel", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOutsideCI(t, "%s not found: apt-get install -y passwd", tool)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Everything the users read lies under root, traversable by them (a
	// t.TempDir() is 0700).
	root, err := os.MkdirTemp("", "gssh-lab-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	mustRun(t, "", "chmod", "755", root)
	bin := filepath.Join(buildGssh(t), "gssh") // noSystemInventory: testhooks.go

	// Each lab its own names: the shared-lab tests run in parallel.
	tag := fmt.Sprintf("gl%d%c", os.Getpid()%100000, 'a'+labCount.Add(1)-1)
	group := tag + "g"
	accounts(t, "groupadd", group)
	t.Cleanup(func() { accounts(nil, "groupdel", group) })
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)

	// The worker: one real sshd whose nvidia-smi replays a100x4, every
	// user logging in as themselves; job dirs go to a HOME all may write
	// in (the pass account's jobs only ever land there).
	fakes := filepath.Join(root, "bin")
	os.Mkdir(fakes, 0o755)
	// Copies, not links into the repo: a clone may lie in a directory
	// the users cannot traverse (mktemp -d makes 0700).
	for name, target := range map[string]string{"nvidia-smi": "fake-nvidia-smi", "ps": "fake-ps"} {
		mustRun(t, "", "cp", filepath.Join(repo, "probe", "testdata", target), filepath.Join(fakes, name))
	}
	fixture := filepath.Join(root, "a100x4")
	mustRun(t, "", "cp", "-r", filepath.Join(repo, "probe", "testdata", "fleet", "a100x4"), fixture)
	mustRun(t, "", "chmod", "-R", "a+rX", fakes, fixture)
	whome := filepath.Join(root, "worker-home")
	claims := filepath.Join(root, "claims") // the worker's GPU claims: every login's
	if err := os.Mkdir(claims, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(claims, 0o1777); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "work")
	// One HOME for every login on this test worker: its job directory is
	// everyone's (each attempt's directory is its login's own, 0700).
	for _, d := range []string{whome, work, filepath.Join(whome, ".gssh"), filepath.Join(whome, ".gssh", "jobs")} {
		os.Mkdir(d, 0o755)
		mustRun(t, "", "chmod", "1777", d)
	}

	users := map[string]*labUser{}
	var keys []sshtest.Key
	for _, role := range []string{"a", "b", "p"} {
		name := tag + role
		home := filepath.Join(root, "home-"+name)
		accounts(t, "useradd", "-M", "-d", home, "-s", "/bin/sh", "-p", "*", "-G", group, name)
		t.Cleanup(func() { accounts(nil, "userdel", name) })
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		ugid, _ := strconv.Atoi(u.Gid)
		if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, sshtest.NewKey(t, filepath.Join(home, ".ssh"), ""))
		users[role] = &labUser{name: name, uid: uint32(uid), gid: uint32(ugid), home: home}
	}
	var authorized []string
	for _, k := range keys {
		authorized = append(authorized, k.AuthorizedLine)
	}
	w := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: "127.0.3.1", AuthorizedKeys: authorized, SetEnv: map[string]string{
		"PATH":              fakes + ":/usr/bin:/bin",
		"GSSH_FAKE_SMI_DIR": fixture,
		"HOME":              whome,
		"GSSH_CLAIMS_DIR":   claims,
	}})
	// sshd reads authorized_keys as the user logging in.
	mustRun(t, "", "chmod", "755", w.Dir, filepath.Dir(w.Dir))
	mustRun(t, "", "chmod", "644", filepath.Join(w.Dir, "authorized_keys"))
	host, port, _ := strings.Cut(w.Addr, ":")
	for i, role := range []string{"a", "b", "p"} {
		u := users[role]
		cfg := fmt.Sprintf("Host w1\n  HostName %s\n  Port %s\nHost *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n", host, port, u.name, keys[i].Path)
		for p, data := range map[string]string{"config": cfg, "known_hosts": w.KnownHostsLine + "\n"} {
			if err := os.WriteFile(filepath.Join(u.home, ".ssh", p), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mustRun(t, "", "chown", "-R", u.name+":"+strconv.Itoa(int(u.gid)), u.home)
	}

	// The lab: its inventory (root's, 0644), and its state directory and
	// files, as root's gssh lab init makes them.
	stateDir := filepath.Join(root, "lab", "state")
	if err := os.MkdirAll(filepath.Dir(stateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(stateDir, "state.db")
	l := &sharedLab{t: t, tag: tag, root: root, bin: bin, group: group, gid: gid, work: work,
		stateDir: stateDir, statePath: statePath, inv: filepath.Join(root, "lab", "hosts.yaml"),
		alice: users["a"], bob: users["b"], pass: users["p"], served: served}
	l.writeInventory(l.inv, statePath, l.pass.name, fmt.Sprintf("  users: {%s: {weight: 1, admin: true}, %s: {weight: 2}}\n", l.alice.name, l.bob.name))
	l.labInit()
	return l
}

// labInit runs gssh lab init as root over the lab inventory, failing the
// test unless it succeeds; it returns what it printed.
func (l *sharedLab) labInit() string {
	l.t.Helper()
	return l.labInitOf(l.inv)
}

// labInitOf is labInit over the lab inventory inv.
func (l *sharedLab) labInitOf(inv string) string {
	l.t.Helper()
	args := []string{"lab", "init"}
	if l.served {
		args = append(args, "--serve")
	}
	cmd := exec.Command(l.bin, args...)
	cmd.Env = []string{"HOME=" + l.root, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GSSH_INVENTORY=" + inv, noSystemInventory}
	out, err := cmd.CombinedOutput()
	l.t.Logf("root$ gssh lab init\n%s", out)
	if err != nil {
		l.t.Fatalf("gssh lab init: %v", err)
	}
	return string(out)
}

// writeInventory writes a lab inventory to path: host w1, the lab block
// (state, passUser, the lab's group) and policy, the policy block's
// indented lines.
func (l *sharedLab) writeInventory(path, state, passUser, policy string) {
	l.t.Helper()
	serve := ""
	if l.served {
		serve = "  serve: true\n"
	}
	doc := fmt.Sprintf("hosts:\n  - name: w1\nlab:\n  state: %s\n  pass_user: %s\n  group: %s\n%spolicy:\n%s", state, passUser, l.group, serve, policy)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// gssh runs the gssh binary as u over the lab inventory inv, logging the
// command and what it printed.
func (l *sharedLab) gssh(u *labUser, args ...string) (stdout, stderr string, code int) {
	l.t.Helper()
	return l.gsshWith(u, []string{"GSSH_INVENTORY=" + l.inv}, args...)
}

// gsshWith runs the gssh binary as u (its uid, its group and the lab's)
// in its home, with env added to a bare environment, and logs it.
func (l *sharedLab) gsshWith(u *labUser, env []string, args ...string) (stdout, stderr string, code int) {
	l.t.Helper()
	stdout, stderr, code = l.gsshQuiet(u, env, args...)
	l.t.Logf("%s$ gssh %s\n%s%s(exit %d)", u.name, strings.Join(args, " "), stdout, stderr, code)
	return stdout, stderr, code
}

// gsshQuiet is gsshWith without the log: for the commands a test repeats
// many times.
func (l *sharedLab) gsshQuiet(u *labUser, env []string, args ...string) (stdout, stderr string, code int) {
	l.t.Helper()
	cmd := l.command(u, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		l.t.Fatalf("gssh %v as %s: %v", args, u.name, err)
	}
	return out.String(), errb.String(), code
}

// command is the gssh binary's command line args as u (its uid, its
// group and the lab's) in its home, with env added to a bare
// environment: not started.
func (l *sharedLab) command(u *labUser, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(l.bin, args...)
	cmd.Dir = u.home
	cmd.Env = append([]string{"HOME=" + u.home, "PATH=/usr/bin:/bin", "USER=" + u.name, "SSH_AUTH_SOCK=", noSystemInventory}, env...)
	groups := []uint32{uint32(l.gid)}
	if slices.Contains(env, "GSSH_TEST_NO_GROUP=1") { // the user as one outside the lab's group
		groups = []uint32{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: groups}}
	return cmd
}

// skipOutsideCI skips the test, except under CI=true, where what it
// lacks is a missing install step: a failure.
func skipOutsideCI(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Need(t, format, args...)
}

// TestSharedLab runs the gssh binary as three OS users made for it (two
// members and the pass account) over one shared state on a real sshd
// worker: members only record, the pass account's passes launch and
// carry out a member's cancel, and the state file and pass lock stay
// 0660 in the lab's setgid group directory.
func TestSharedLab(t *testing.T) {
	t.Parallel() // beside the scripts: it mostly waits on its jobs
	l := newSharedLab(t)
	alice, bob, pass := l.alice, l.bob, l.pass
	bin, work, group, gid, tag := l.bin, l.work, l.group, l.gid, l.tag
	stateDir, statePath, labInv := l.stateDir, l.statePath, l.inv
	writeLab := func(path, passUser string) {
		t.Helper()
		l.writeInventory(path, statePath, passUser, fmt.Sprintf("  users: {%s: {weight: 1, admin: true}, %s: {weight: 2}}\n", alice.name, bob.name))
	}
	gssh, gsshWith := l.gssh, l.gsshWith

	want := func(what, got, sub string) {
		t.Helper()
		if !strings.Contains(got, sub) {
			t.Fatalf("%s: want %q in:\n%s", what, sub, got)
		}
	}

	// Both members submit into the one queue; neither runs a pass.
	outA := filepath.Join(work, "a.out")
	out, errs, code := gssh(alice, "submit", "--host", "w1", "--mem", "1G", "--workdir", work, "--", "sh", "-c", `id -un >"$1"`, "sh", outA)
	if code != 0 {
		t.Fatalf("alice's submit: exit %d: %s", code, errs)
	}
	want("alice's submit", out, "job 1 queued: the next pass starts it (the lab's passes are run by "+pass.name+")")
	out, _, code = gssh(bob, "submit", "--host", "w1", "--mem", "1G", "--workdir", work, "--", "sleep", "300")
	if code != 0 {
		t.Fatalf("bob's submit: exit %d", code)
	}
	want("bob's submit", out, "job 2 queued: the next pass starts it")
	if _, err := os.Stat(outA); err == nil {
		t.Fatal("job 1 ran before any pass of the pass account")
	}
	out, _, _ = gssh(bob, "ps")
	want("ps", out, "1\t"+alice.name+"\tqueued")
	want("ps", out, "2\t"+bob.name+"\tqueued")

	// A member cannot cancel, hold or change another member's job; an
	// admin (alice) may.
	for _, args := range [][]string{{"cancel", "1"}, {"hold", "1"}, {"update", "1", "--name", "mine"}} {
		_, errs, code = gssh(bob, args...)
		if code == 0 || !strings.Contains(errs, "job 1 is not yours: it is "+alice.name+"'s") {
			t.Fatalf("bob's %v of alice's job: exit %d: %s", args, code, errs)
		}
	}
	if out, errs, code := gssh(alice, "hold", "2"); code != 0 {
		t.Fatalf("alice (an admin) holding bob's job: exit %d: %s%s", code, out, errs)
	}
	gssh(alice, "release", "2")

	// Priorities 0-3 are the lab's admins' (alice), not the queue's
	// every member's: nobody owns a lab's queue.
	_, errs, code = gssh(bob, "submit", "--priority", "2", "--host", "w1", "--mem", "1G", "--workdir", work, "--", "true")
	if code != 1 || !strings.Contains(errs, "nothing was submitted") {
		t.Fatalf("bob's --priority 2: exit %d: %s", code, errs)
	}
	out, _, _ = gssh(bob, "ps", "-a")
	if strings.Contains(out, "\n3\t") {
		t.Fatalf("a refused submit was stored:\n%s", out)
	}

	// Someone outside the lab's group is told why the queue is closed to
	// them, and how to join.
	_, errs, code = l.gsshWith(alice, []string{"GSSH_INVENTORY=" + l.inv, "GSSH_TEST_NO_GROUP=1"}, "ps")
	if code != 3 || !strings.Contains(errs, "the lab's queue is group "+l.group+"'s") || !strings.Contains(errs, "usermod -aG "+l.group+" "+alice.name) {
		t.Fatalf("ps outside the group: exit %d: %s", code, errs)
	}

	// Hosts are the lab's: only an admin (alice) or the pass user drains
	// and resumes them.
	_, errs, code = gssh(bob, "drain", "w1")
	if code != 1 || !strings.Contains(errs, "only the lab's admins and its pass user may drain and resume hosts: you are "+bob.name) {
		t.Fatalf("bob's drain: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{{"drain", "w1", "--reason", "test"}, {"resume", "w1"}} {
		if out, errs, code := gssh(alice, args...); code != 0 {
			t.Fatalf("alice's (an admin's) %v: exit %d: %s%s", args, code, out, errs)
		}
	}

	// A member is no pass user.
	_, errs, code = gssh(alice, "schedule")
	if code == 0 {
		t.Fatal("alice's gssh schedule succeeded")
	}
	want("alice's schedule", errs, "only the lab's pass user runs scheduling passes")
	want("alice's schedule", errs, "you are "+alice.name)
	_, errs, code = gssh(alice, "reap")
	if code == 0 {
		t.Fatal("alice's gssh reap succeeded")
	}
	want("alice's reap", errs, "only the lab's pass user reaps")
	want("alice's reap", errs, "gssh reap --dry-run shows what it would kill")

	// The pass account's pass launches both, as itself.
	out, errs, code = gssh(pass, "schedule")
	if code != 0 {
		t.Fatalf("the pass account's schedule: exit %d: %s", code, errs)
	}
	var ran []byte
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ran, err = os.ReadFile(outA); err == nil && len(ran) > 0 {
			break
		}
	}
	if got := strings.TrimSpace(string(ran)); got != pass.name {
		t.Fatalf("alice's job ran as %q, want the pass account %q", got, pass.name)
	}

	// The event log is a day old (its first line, put there by hand):
	// bob's cancel appends to it (a member never rotates: the file is the
	// pass account's, which no member can rename in the sticky
	// directory), and the pass account's next write rotates it.
	events := filepath.Join(stateDir, "events.log")
	logged, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	old := fmt.Sprintf(`{"time":%q,"event":"job_submit","job":99}`+"\n", time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339))
	if err := os.WriteFile(events, append([]byte(old), logged...), 0); err != nil {
		t.Fatal(err)
	}

	// Bob's cancel is recorded; the next pass carries it out.
	out, _, code = gssh(bob, "cancel", "2")
	if code != 0 {
		t.Fatalf("bob's cancel: exit %d", code)
	}
	want("bob's cancel", out, "job 2: cancel recorded; the next pass stops it")
	out, _, _ = gssh(alice, "ps")
	want("ps after the recorded cancel", out, "2\t"+bob.name+"\trunning")
	gssh(pass, "schedule")
	out, _, _ = gssh(alice, "show", "2")
	want("show 2", out, "cancelled by "+bob.name)
	out, _, _ = gssh(alice, "ps", "-a")
	want("ps -a", out, "1\t"+alice.name+"\tsucceeded")
	want("ps -a", out, "2\t"+bob.name+"\tcancelled")

	// A queued job a member cancels is dropped at once, with no pass.
	gssh(alice, "submit", "--hold", "--host", "w1", "--workdir", work, "--", "true")
	out, _, _ = gssh(alice, "cancel", "3")
	want("cancel of a queued job", out, "job 3 cancelled")

	// A personal queue next to the shared one, of another login on the
	// worker, never gets the GPU the shared queue holds: the worker's
	// claims say whose it is.
	gssh(bob, "submit", "--host", "w1", "--workdir", work, "--", "sleep", "300") // exclusive: the idle GPU 3
	if _, errs, code := gssh(pass, "schedule"); code != 0 {
		t.Fatalf("pass: exit %d: %s", code, errs)
	}
	out, _, _ = gssh(alice, "ps")
	want("ps", out, "4	"+bob.name+"	running")
	personal := filepath.Join(alice.home, "personal.yaml")
	if err := os.WriteFile(personal, []byte("hosts:\n  - name: w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(personal, int(alice.uid), int(alice.gid))
	penv := []string{"GSSH_INVENTORY=" + personal, "GSSH_STATE=" + filepath.Join(alice.home, "own.db")}
	out, errs, code = gsshWith(alice, penv, "submit", "--host", "w1", "--workdir", work, "--", "true")
	if code != 0 {
		t.Fatalf("alice's personal submit: exit %d: %s", code, errs)
	}
	want("alice's personal queue next to the shared one", out, "job 1 queued: ")
	want("alice's personal queue next to the shared one", out, "GPU 3: held by another gssh queue: cluster ")
	want("alice's personal queue next to the shared one", out, "user "+bob.name+", job 4")
	gsshWith(alice, penv, "cancel", "1")
	gssh(bob, "cancel", "4")
	gssh(pass, "schedule")

	// A member's gssh run: the pass account's pass places it, and the
	// member's own gssh runs it in the foreground, with the member's SSH
	// identity; the passes leave it to that gssh, which records its end.
	type result struct {
		out, errs string
		code      int
	}
	doneRun := make(chan result, 1)
	go func() {
		o, e, c := gssh(alice, "run", "--host", "w1", "--mem", "1G", "--workdir", work, "--", "sh", "-c", "id -un; sleep 1; exit 3")
		doneRun <- result{o, e, c}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if out, _, _ := gssh(bob, "ps"); strings.Contains(out, "5\t"+alice.name+"\tqueued") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's gssh run queued no job 5")
		}
	}
	gssh(pass, "schedule") // places it: alice's gssh attaches
	time.Sleep(500 * time.Millisecond)
	gssh(pass, "schedule") // polls nothing of it: out of the pass account's reach
	var rr result
	select {
	case rr = <-doneRun:
	case <-time.After(30 * time.Second):
		t.Fatal("alice's gssh run did not end")
	}
	if rr.code != 3 || strings.TrimSpace(rr.out) != alice.name {
		t.Fatalf("alice's gssh run: exit %d, stdout %q, stderr %s; want exit 3 and her own login", rr.code, rr.out, rr.errs)
	}
	gssh(pass, "schedule")
	out, _, _ = gssh(bob, "show", "5")
	want("show 5", out, "state:       failed")
	want("show 5", out, "exit code:   3")

	// The event log holds every member's changes and the pass account's,
	// the rotated file included.
	out, errs, _ = gssh(alice, "events", "--json")
	for _, sub := range []string{`"event":"job_submit","job":99}`,
		`"event":"job_submit","job":1,"user":"` + alice.name + `"`, `"event":"job_start","job":1,"user":"` + alice.name + `"`,
		`"event":"job_cancel","job":2,"user":"` + bob.name + `"`, `"by":"` + bob.name + `"`,
		`"event":"job_end","job":2,"user":"` + bob.name + `","host":"w1","gpus":[0],"state":"cancelled"`,
		`"event":"job_start","job":5,"user":"` + alice.name + `"`, `"event":"job_end","job":5,"user":"` + alice.name + `","host":"w1","gpus":[0],"state":"failed"`} {
		want("gssh events", out, sub)
	}
	if errs != "" {
		t.Errorf("gssh events: %s", errs)
	}
	rotated, _ := filepath.Glob(filepath.Join(stateDir, "events-*.log.gz"))
	if len(rotated) != 1 {
		t.Errorf("rotated event logs %q; want one, compressed", rotated)
	}
	for _, p := range append([]string{statePath, statePath + ".pass.lock", events, events + ".lock"}, rotated...) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
			t.Errorf("%s: mode %04o, gid %d; want 0660 in group %s (%d)", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, group, gid)
		}
	}

	// Bad input. A personal inventory with a lab block of its own: the
	// lab wins and says so; alone, its lab block is ignored.
	personal = filepath.Join(alice.home, "mine.yaml")
	if err := os.WriteFile(personal, []byte("hosts:\n  - name: w1\nlab:\n  state: /tmp/elsewhere.db\n  pass_user: "+alice.name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code = gssh(alice, "--inventory", personal, "ps", "-a")
	if code != 0 {
		t.Fatalf("ps with a personal inventory: exit %d", code)
	}
	want("personal inventory in lab mode", errs, "inventory "+personal+" is ignored")
	want("personal inventory in lab mode", out, "2\t"+bob.name+"\tcancelled")
	cmd := exec.Command(bin, "--inventory", personal, "ps")
	cmd.Env = []string{"HOME=" + alice.home, "PATH=/usr/bin:/bin", noSystemInventory}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("personal mode: %v: %s", err, b)
	}
	want("a lab block in a personal inventory", string(b), personal+":3: its `lab:` block is ignored")

	// A state directory of the wrong mode, then of the wrong owner: every
	// command stops, saying to run gssh lab init.
	mustRun(t, "", "chmod", "g-s", stateDir)
	_, errs, code = gssh(alice, "ps")
	if code != exitState {
		t.Errorf("ps with a state dir not setgid: exit %d, want %d", code, exitState)
	}
	want("state dir not setgid", errs, "as root: gssh lab init")
	mustRun(t, "", "chmod", "3770", stateDir)
	mustRun(t, "", "chown", "root", stateDir)
	_, errs, _ = gssh(pass, "schedule")
	want("state dir of another owner", errs, "is a directory (mode 3770) of root, group "+group+"; a lab's is a directory of the pass account "+pass.name)
	l.labInit()

	// pass_user naming no account.
	writeLab(labInv, tag+"nobody")
	_, errs, code = gssh(alice, "ps")
	if code != exitUsage {
		t.Errorf("pass_user naming no account: exit %d, want %d", code, exitUsage)
	}
	want("pass_user naming no account", errs, labInv+":5: lab pass_user \""+tag+"nobody\" names no account on this host")
}

// mustRun runs a command as the test (root), failing the test on error.
func mustRun(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, b)
	}
}

// noSystemInventory is the environment entry that keeps a test build of
// gssh (-tags gssh_test) from reading the machine's /etc/gssh/hosts.yaml:
// its machine-wide inventory is a path no machine has, so a test's gssh
// knows only the inventories the test gives it, and looks for a lab as
// gssh does (a lab inventory named by $GSSH_INVENTORY).
const noSystemInventory = testInventoryEnv + "=/nonexistent/gssh-test/hosts.yaml"
