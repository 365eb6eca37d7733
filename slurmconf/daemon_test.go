package slurmconf_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/slurmconf"
	"github.com/gssh/gssh/testenv"
)

// slurmTool finds a Slurm program on PATH or in /usr/sbin (where
// Debian's slurmctld and slurmd are), or skips the test (fails it under
// CI=true: .ci/run installs slurm-wlm).
func slurmTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	testenv.Need(t, "%s not found: apt-get install -y slurm-wlm", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// localHost is this machine as the probe reads it (the same parser, on
// the same files), with two A100s: slurmd runs as it.
func localHost(t *testing.T, name string) slurmconf.Host {
	t.Helper()
	var facts []string
	for _, p := range []string{"/proc/meminfo", "/proc/self/status"} {
		b, err := os.ReadFile(p)
		if err != nil {
			testenv.Need(t, "no %s (slurmd reads this machine's CPUs and memory from it): %v", p, err)
		}
		facts = append(facts, strings.Split(string(b), "\n")...)
	}
	hi, _ := gpuinfo.ParseHostInfo(facts)
	if hi == nil || hi.CPUs == nil || hi.MemTotal == nil {
		testenv.Need(t, "this machine's CPUs and memory cannot be read from /proc: %+v", hi)
	}
	return slurmconf.Host{Name: name, Addr: "127.0.0.1", Labels: []string{"a100", "nvlink"}, CPUs: hi.CPUs, MemTotal: hi.MemTotal,
		GPUs: []gpuinfo.GPU{gpu(0, "NVIDIA A100-SXM4-80GB"), gpu(1, "NVIDIA A100-SXM4-80GB")}}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// forTest makes the generated slurm.conf run here, changing only what
// ties it to a real cluster (each key must be in the generated header,
// once): auth/none for munge, this user for the slurm account, the
// state, spool, logs and pid files under dir, free ports, no cgroups.
// The node, partition, GRES and priority lines are left as generated.
func forTest(t *testing.T, conf, dir, controller, me string) string {
	t.Helper()
	set := map[string]string{
		"SlurmctldHost":     controller + "(127.0.0.1)",
		"AuthType":          "auth/none",
		"CredType":          "cred/none",
		"SlurmUser":         me,
		"StateSaveLocation": filepath.Join(dir, "state"),
		"SlurmdSpoolDir":    filepath.Join(dir, "spool"),
		"SlurmctldLogFile":  filepath.Join(dir, "slurmctld.log"),
		"SlurmdLogFile":     filepath.Join(dir, "slurmd.log"),
		"ProctrackType":     "proctrack/linuxproc",
		"TaskPlugin":        "task/none",
	}
	seen := map[string]int{}
	var b strings.Builder
	for l := range strings.Lines(conf) {
		k, _, _ := strings.Cut(l, "=")
		if v, ok := set[k]; ok {
			seen[k]++
			l = k + "=" + v + "\n"
		}
		b.WriteString(l)
	}
	for k := range set {
		if seen[k] != 1 {
			t.Fatalf("the generated slurm.conf has %d %s lines, want 1:\n%s", seen[k], k, conf)
		}
	}
	fmt.Fprintf(&b, "SlurmdUser=%s\nSlurmctldPort=%d\nSlurmdPort=%d\nSlurmctldPidFile=%s\nSlurmdPidFile=%s\n",
		me, freePort(t), freePort(t), filepath.Join(dir, "slurmctld.pid"), filepath.Join(dir, "slurmd.pid"))
	return b.String()
}

// daemon starts a Slurm daemon in the foreground, stopped at cleanup.
func daemon(t *testing.T, env []string, log string, name string, args ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
}

// Debian's Slurm daemons take the generated files: slurmctld reads every
// node line (CPUs, RealMemory, Gres with mixed types and MIG profiles,
// features) and the partition; slurmd, started as the node of this
// machine (NodeAddr 127.0.0.1), registers with the CPUs and memory the
// probe's parser read here and the GPUs of gres.conf's File= lines, and
// the node goes IDLE, not INVALID: RealMemory is under what slurmd finds.
// The device files are ordinary files under the test's directory in
// place of /dev/nvidiaN (slurmd logs that they are no devices, and takes
// them); auth/none stands in for munge.
func TestSlurmDaemons(t *testing.T) {
	ctld, slurmd := slurmTool(t, "slurmctld"), slurmTool(t, "slurmd")
	sinfo, scontrol := slurmTool(t, "sinfo"), slurmTool(t, "scontrol")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(hostname, ".")
	mig := hosts()[2]
	mig.Name, mig.Addr, mig.Via = "h100mig", "127.0.0.2", nil // no slurmd answers there
	mixed := hosts()[1]
	mixed.Addr = "127.0.0.3"
	f := slurmconf.Generate([]slurmconf.Host{localHost(t, short), mig, mixed}, slurmconf.Options{Controller: short,
		FairShareWeight: 1, AgeWeight: 1, SizeWeight: 0.1, HalfLife: 24 * time.Hour})

	dir := t.TempDir()
	for _, d := range []string{"state", "spool", "dev"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(dir, "dev", fmt.Sprintf("nvidia%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Count(f.GresConf, "File=/dev/nvidia") != 5 { // 2 here, 3 on mixed
		t.Fatalf("gres.conf:\n%s", f.GresConf)
	}
	gres := strings.ReplaceAll(f.GresConf, "File=/dev/nvidia", "File="+filepath.Join(dir, "dev", "nvidia"))
	conf := forTest(t, f.SlurmConf, dir, short, me.Username)
	for name, text := range map[string]string{"slurm.conf": conf, "gres.conf": gres} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "SLURM_CONF="+filepath.Join(dir, "slurm.conf"))
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range []string{"slurm.conf", "gres.conf", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"} {
				b, _ := os.ReadFile(filepath.Join(dir, l))
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	run := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	waitFor := func(what string, ok func() (string, bool)) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			out, done := ok()
			if done {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 15 s; last: %s", what, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	daemon(t, env, filepath.Join(dir, "slurmctld.out"), ctld, "-D")
	waitFor("slurmctld answers", func() (string, bool) {
		out, err := run(sinfo, "-h", "-N", "-o", "%N")
		return out, err == nil && strings.TrimSpace(out) != ""
	})
	daemon(t, env, filepath.Join(dir, "slurmd.out"), slurmd, "-D", "-N", short)
	node := waitFor("slurmd's node idle", func() (string, bool) {
		out, _ := run(scontrol, "show", "node", short)
		return out, regexp.MustCompile(`\bState=(IDLE|\S*(INVALID|DRAIN))`).MatchString(out) // INVALID: no use waiting
	})
	if !regexp.MustCompile(`\bState=IDLE\b`).MatchString(node) {
		t.Fatalf("slurmd's node is not idle:\n%s", node)
	}
	for _, want := range []string{"Gres=gpu:a100-sxm4-80gb:2", "AvailableFeatures=a100,nvlink", "NodeAddr=127.0.0.1",
		fmt.Sprintf("CPUTot=%d", *localHost(t, short).CPUs), fmt.Sprintf("RealMemory=%d", slurmconf.RealMemory(*localHost(t, short).MemTotal))} {
		if !strings.Contains(node, want) {
			t.Errorf("scontrol show node %s lacks %s:\n%s", short, want, node)
		}
	}
	if strings.Contains(node, "Reason=") {
		t.Errorf("the node carries a reason (drained?):\n%s", node)
	}

	out, err := run(sinfo, "-h", "-N", "-o", "%N %P %G")
	if err != nil {
		t.Fatalf("sinfo: %v: %s", err, out)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			got[f[0]] = f[1] + " " + f[2]
		}
	}
	want := map[string]string{
		short:     "gpu* gpu:a100-sxm4-80gb:2",
		"h100mig": "gpu* gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2,gpu:h100_80gb_hbm3:1",
		"mixed":   "gpu* gpu:rtx_4090:2,gpu:tesla_t4:1",
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("sinfo -N: %s: %q, want %q\n%s", n, got[n], w, out)
		}
	}
	if len(got) != len(want) {
		t.Errorf("sinfo -N lists %d nodes, want %d:\n%s", len(got), len(want), out)
	}
	mout, _ := run(scontrol, "show", "node", "mixed")
	for _, w := range []string{"CPUTot=16", "RealMemory=64226", "AvailableFeatures=ws"} {
		if !strings.Contains(mout, w) {
			t.Errorf("scontrol show node mixed lacks %s:\n%s", w, mout)
		}
	}
}
