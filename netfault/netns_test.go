package netfault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// lab is two fleet hosts, n1 and n2, each an sshd listening inside a
// network namespace of its own, reached over a veth pair; the gssh binary
// built for the test, its inventory, state and ssh_config.
type lab struct {
	t       *testing.T
	dir     string
	gssh    string
	env     []string
	runs    string               // the file each job appends "id.attempt restarts" to
	links   map[string][2]string // host → its namespace and the veth end in it
	cluster string
}

// requireNetNS fails (CI) or skips the test unless it can make network
// namespaces: root and iproute2.
func requireNetNS(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "network namespaces need root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "ip (iproute2) not found: apt-get install -y iproute2"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so no skip)", why)
	}
	t.Skipf("%s (not CI: skipped; CI fails instead)", why)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// netns makes namespace ns with a veth pair: veth (this side, 10.213.k.1)
// and its peer veth+"p" inside ns (10.213.k.2, the host's address), and
// removes both at cleanup. Only addresses of this pair are used; the host
// is cut off by setting the peer down (lab.link), so this side's route
// stays and nothing for 10.213.k.2 ever leaves through another link.
func netns(t *testing.T, ns, veth string, k int) string {
	t.Helper()
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"p")
	t.Cleanup(func() { exec.Command("ip", "link", "del", veth).Run() })
	run(t, "ip", "link", "set", veth+"p", "netns", ns)
	run(t, "ip", "addr", "add", fmt.Sprintf("10.213.%d.1/30", k), "dev", veth)
	run(t, "ip", "link", "set", veth, "up")
	run(t, "ip", "netns", "exec", ns, "ip", "addr", "add", fmt.Sprintf("10.213.%d.2/30", k), "dev", veth+"p")
	run(t, "ip", "netns", "exec", ns, "ip", "link", "set", veth+"p", "up")
	run(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	return fmt.Sprintf("10.213.%d.2", k)
}

func newLab(t *testing.T) *lab {
	requireNetNS(t)
	sshtest.RequireSSHD(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := &lab{t: t, dir: dir, gssh: filepath.Join(dir, "gssh"), runs: filepath.Join(dir, "runs"), links: map[string][2]string{}}
	build := exec.Command("go", "build", "-tags", "gssh_test", "-o", l.gssh, "./cmd/gssh")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build gssh: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "bin") // nvidia-smi replays a100x4; ps is the real one
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "probe", "testdata", "fake-nvidia-smi"), filepath.Join(bin, "nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	key := sshtest.NewKey(t, dir, "")
	var inv, cfg, known strings.Builder
	inv.WriteString("policy:\n  placement: firstfit\n  down_after: 4s\n  lost_after: 4s\nhosts:\n")
	tag := strconv.Itoa(os.Getpid() % 100000)
	for k, h := range []string{"n1", "n2"} {
		ns, veth := "gsshnf"+tag+h, "gnf"+tag+h
		ip := netns(t, ns, veth, 100+k+os.Getpid()%50*2)
		l.links[h] = [2]string{ns, veth + "p"}
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{NetNS: ns, ListenIP: ip, AuthorizedKeys: []string{key.AuthorizedLine},
			SetEnv: map[string]string{"PATH": bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR": filepath.Join(root, "probe", "testdata", "fleet", "a100x4")}})
		fmt.Fprintf(&inv, "  - name: %s\n", h)
		fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n  Port %d\n", h, s.Host, s.Port)
		known.WriteString(s.KnownHostsLine + "\n")
	}
	fmt.Fprintf(&cfg, "Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  ConnectTimeout 2\n  ServerAliveInterval 1\n  ServerAliveCountMax 2\n", currentUser(t), key.Path)
	home := filepath.Join(dir, "home")
	for p, data := range map[string]string{
		filepath.Join(dir, "hosts.yaml"):           inv.String(),
		filepath.Join(home, ".ssh", "config"):      cfg.String(),
		filepath.Join(home, ".ssh", "known_hosts"): known.String(),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.env = append(os.Environ(), "HOME="+home, "SSH_AUTH_SOCK=", "GSSH_INVENTORY="+filepath.Join(dir, "hosts.yaml"),
		"GSSH_TEST_SYSTEM_INVENTORY="+filepath.Join(dir, "etc-gssh-hosts.yaml"), // the test build's machine-wide inventory: never the machine's
		"GSSH_STATE="+filepath.Join(dir, "state.db"), "GSSH_CLAIMS_DIR="+filepath.Join(dir, "claims"))
	return l
}

func currentUser(t *testing.T) string {
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// cli runs the gssh binary and returns its stdout, stderr and exit status.
func (l *lab) cli(args ...string) (string, string, int) {
	l.t.Helper()
	cmd := exec.Command(l.gssh, args...)
	cmd.Env = l.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if xe, ok := err.(*exec.ExitError); ok {
		code = xe.ExitCode()
	} else if err != nil {
		l.t.Fatalf("gssh %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// submit queues cmd (a shell command line) and returns the job's id.
func (l *lab) submit(args ...string) int {
	l.t.Helper()
	out, errs, code := l.cli(append([]string{"submit", "--json", "--mem", "1G"}, args...)...)
	var doc struct {
		ID int `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.ID == 0 {
		l.t.Fatalf("submit %v: exit %d\n%s%s", args, code, out, errs)
	}
	return doc.ID
}

type jobDoc struct {
	ID        int    `json:"id"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	Attempt   int    `json:"attempt"`
	Restarts  int    `json:"restarts"`
	Placement struct {
		Host string `json:"host"`
	} `json:"placement"`
	Remote struct {
		Dir string `json:"dir"` // .../<cluster-id>-<id>.<attempt>
	} `json:"remote"`
}

// cluster is the state's cluster id, read off a launched job's directory.
func (j jobDoc) cluster() string {
	c, _, _ := strings.Cut(filepath.Base(j.Remote.Dir), "-")
	return c
}

func (l *lab) show(id int) jobDoc {
	l.t.Helper()
	out, errs, code := l.cli("show", "--json", strconv.Itoa(id))
	var j jobDoc
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
		l.t.Fatalf("show %d: exit %d\n%s%s", id, code, out, errs)
	}
	return j
}

func (l *lab) link(host string, up bool) {
	l.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	run(l.t, "ip", "netns", "exec", l.links[host][0], "ip", "link", "set", l.links[host][1], state)
}

// procs counts the live processes of job id of the queue cluster (any
// attempt) by the GSSH_ATTEMPT in their environment: the copies that
// run, wherever. Other tests on the machine run jobs of the same ids in
// queues of their own: the cluster id tells them apart.
func procs(t *testing.T, cluster string, id int) map[string]int {
	t.Helper()
	out := map[string]int{}
	ents, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, e := range ents {
		data, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		vars := strings.Split(string(data), "\x00")
		if !slices.Contains(vars, "GSSH_JOB_ID="+strconv.Itoa(id)) || !slices.Contains(vars, "GSSH_CLUSTER_ID="+cluster) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(e), "stat"))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			continue
		}
		for _, v := range vars {
			if a, ok := strings.CutPrefix(v, "GSSH_ATTEMPT="); ok {
				out[a]++
			}
		}
	}
	return out
}

// waitFor runs passes until cond holds, for at most d.
func (l *lab) waitFor(d time.Duration, what string, cond func() bool) {
	l.t.Helper()
	for end := time.Now().Add(d); ; {
		out, errs, code := l.cli("schedule")
		if cond() {
			return
		}
		if time.Now().After(end) {
			hosts, _, _ := l.cli("hosts")
			l.t.Fatalf("after %s: %s did not happen; the last pass exited %d:\n%s%s\ngssh hosts:\n%s", d, what, code, out, errs, hosts)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// A host cut off for less than down_after changes nothing: its job
// finishes. Cut off for longer, it goes down: its --requeue job runs
// elsewhere, and `gssh logs -f` of a job there says the host stopped
// answering within ServerAliveInterval × ServerAliveCountMax. When it
// answers again the old copy is killed: no duplicate survives.
func TestNetworkPartition(t *testing.T) {
	l := newLab(t)
	cmd := "echo $GSSH_JOB_ID.$GSSH_ATTEMPT $GSSH_RESTART_COUNT >>" + l.runs + "; sleep %d"

	// A short cut: one failed contact, the job goes on and ends well.
	short := l.submit("--host", "n1", "--", "sh", "-c", fmt.Sprintf(cmd, 6))
	if j := l.show(short); j.State != "running" || j.Placement.Host != "n1" {
		t.Fatalf("job %d: %s on %q, want running on n1", short, j.State, j.Placement.Host)
	}
	l.link("n1", false)
	_, errs, code := l.cli("schedule")
	if code != 2 || !strings.Contains(errs, "n1") || !strings.Contains(errs, "failed contact 1 in a row") {
		t.Errorf("schedule with n1 cut off: exit %d, stderr %q; want 2 and the failure counted", code, errs)
	}
	time.Sleep(time.Second)
	l.link("n1", true)
	l.waitFor(20*time.Second, "the short job's end", func() bool { return l.show(short).State == "succeeded" })
	if j := l.show(short); j.Attempt != 1 {
		t.Errorf("job %d: attempt %d, want 1", short, j.Attempt)
	}

	// A long cut: down, unknown, then requeued onto n2.
	req := l.submit("--requeue", "--host", "auto", "--", "sh", "-c", fmt.Sprintf(cmd, 300))
	first := l.show(req)
	if first.State != "running" || first.Placement.Host != "n1" || first.cluster() == "" {
		t.Fatalf("job %d: %s on %q in %q, want running on n1 (first fit)", req, first.State, first.Placement.Host, first.Remote.Dir)
	}
	cluster := first.cluster()
	logs := exec.Command(l.gssh, "logs", "-f", strconv.Itoa(req))
	logs.Env = l.env
	var logErr bytes.Buffer
	logs.Stderr = &logErr
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	l.link("n1", false)
	cut := time.Now()
	logsDone := make(chan error, 1)
	go func() { logsDone <- logs.Wait() }()
	select {
	case <-logsDone:
		if took := time.Since(cut); took > 6*time.Second {
			t.Errorf("logs -f ended %s after the cut; want within ServerAliveInterval × ServerAliveCountMax (2 s) and a little", took)
		}
		if e := logErr.String(); !strings.Contains(e, "n1") || !strings.Contains(e, "stopped answering") {
			t.Errorf("logs -f stderr %q: want it to say n1 stopped answering", e)
		}
	case <-time.After(20 * time.Second):
		logs.Process.Kill()
		t.Errorf("logs -f still running 20 s after n1 was cut off")
	}
	l.waitFor(30*time.Second, "the job unknown", func() bool { return l.show(req).State == "unknown" })
	if j := l.show(req); !strings.Contains(j.Reason, "n1 has not answered since") {
		t.Errorf("unknown job's reason %q", j.Reason)
	}
	out, _, _ := l.cli("hosts", "--host", "n1")
	if !strings.Contains(out, "down (") || !strings.Contains(out, "last failed contact") {
		t.Errorf("gssh hosts with n1 down:\n%s", out)
	}
	l.waitFor(30*time.Second, "the job requeued onto n2", func() bool {
		j := l.show(req)
		return j.State == "running" && j.Placement.Host == "n2"
	})
	if j := l.show(req); j.Attempt != 2 || j.Restarts != 1 {
		t.Errorf("requeued job: attempt %d restarts %d, want 2 and 1", j.Attempt, j.Restarts)
	}
	if p := procs(t, cluster, req); p["1"] == 0 || p["2"] == 0 {
		t.Fatalf("processes of job %d by attempt: %v; want attempt 1 still on cut-off n1, attempt 2 on n2", req, p)
	}

	// n1 answers again: its copy is killed, the one on n2 runs on.
	l.link("n1", true)
	l.waitFor(30*time.Second, "the stray copy killed", func() bool { return procs(t, cluster, req)["1"] == 0 })
	if p := procs(t, cluster, req); p["2"] == 0 {
		t.Errorf("attempt 2 gone too: %v", p)
	}
	if j := l.show(req); j.State != "running" || j.Placement.Host != "n2" {
		t.Errorf("job %d after n1 came back: %s on %s", req, j.State, j.Placement.Host)
	}
	if out, _, _ := l.cli("hosts", "--host", "n1"); !strings.Contains(out, "\tok") {
		t.Errorf("gssh hosts after n1 came back:\n%s", out)
	}
	l.cli("cancel", strconv.Itoa(req))
	runs, _ := os.ReadFile(l.runs)
	want := fmt.Sprintf("%d.1 0\n%d.1 0\n%d.2 1\n", short, req, req)
	if string(runs) != want {
		t.Errorf("runs:\n%s\nwant:\n%s", runs, want)
	}
}
