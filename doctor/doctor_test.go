package doctor

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
)

func TestCUDA(t *testing.T) {
	for v, want := range map[string]string{
		"12.2": "the driver supports CUDA 12.2; PyTorch wheels cu118, cu121 work, cu124, cu126, cu128, cu129, cu130 do not",
		"11.4": "no PyTorch CUDA wheel of cu118, cu121, cu124, cu126, cu128, cu129, cu130 works (upgrade the driver)",
		"13.0": "PyTorch wheels cu118, cu121, cu124, cu126, cu128, cu129, cu130 work",
	} {
		if c := cudaCheck(v); c.Verdict != Info || !strings.Contains(c.Detail, want) {
			t.Errorf("CUDA %s: %+v; want %q", v, c, want)
		}
	}
	if c := cudaCheck("N/A"); c.Name != "" {
		t.Errorf("an unreadable version: %+v, want no check", c)
	}
}

func TestClock(t *testing.T) {
	sent := time.Unix(1_800_000_000, 0)
	recv := sent.Add(200 * time.Millisecond)
	for remote, want := range map[string]Verdict{
		"1800000000.1": OK, "1800000005.0": Warn, "1799999000": Fail, "garbage": Warn,
	} {
		if _, v, _, _ := clockCheck(remote, sent, recv); v != want {
			t.Errorf("remote %s: %s, want %s", remote, v, want)
		}
	}
	if _, _, d, _ := clockCheck("1799999990.1", sent, recv); !strings.Contains(d, "10s behind") {
		t.Errorf("behind: %s", d)
	}
}

// TestChecks: findings of each kind make the checks they should, a host
// not reached skips what needs it, and the login's own output fails the
// shell check.
func TestChecks(t *testing.T) {
	ok := gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: make([]gpuinfo.GPU, 2), Driver: "535.1", Source: "nvml", CUDA: "12.2"}
	now := time.Now()
	shell := "gssh-doctor\nsetsid yes\nsudo no\njobdir ok 104857600\ncachedir ok 104857600\ncuda 12.2\n"
	verdicts := func(cs []Check) map[string]Verdict {
		m := map[string]Verdict{}
		for _, c := range cs {
			m[c.Name] = c.Verdict
			if c.Host != "h" {
				t.Errorf("check %+v: host %q", c, c.Host)
			}
			if (c.Verdict == Fail || c.Verdict == Warn) && c.Fix == "" {
				t.Errorf("check %+v: no fix", c)
			}
		}
		return m
	}
	got := verdicts(Checks(Findings{Host: "h", Snapshot: ok, Reached: true, Shell: shell, Time: strconvF(now), Sent: now, Received: now, Sudo: true}))
	for name, want := range map[string]Verdict{"ssh": OK, "shell output": OK, "nvidia-smi": OK, "helper": OK, "cuda": Info, "job directory": OK, "helper cache": OK, "setsid": OK, "sudo": Fail, "clock": OK} {
		if got[name] != want {
			t.Errorf("healthy host, %s: %s, want %s", name, got[name], want)
		}
	}
	got = verdicts(Checks(Findings{Host: "h", Snapshot: ok, Reached: true, Shell: "Welcome!\n" + strings.Replace(shell, "jobdir ok 104857600", "jobdir no /h/.gssh/jobs: Permission denied", 1), Time: strconvF(now), Sent: now, Received: now}))
	if got["shell output"] != Fail || got["job directory"] != Fail {
		t.Errorf("noise and an unwritable job dir: %v", got)
	}
	for answer, want := range map[string]Verdict{"cachedir ok 1024": Warn, "cachedir no /h/.cache/gssh: Read-only file system": Warn} {
		got = verdicts(Checks(Findings{Host: "h", Snapshot: ok, Reached: true, Shell: strings.Replace(shell, "cachedir ok 104857600", answer, 1), Time: strconvF(now), Sent: now, Received: now}))
		if got["helper cache"] != want {
			t.Errorf("%q: helper cache %s, want %s", answer, got["helper cache"], want)
		}
	}
	got = verdicts(Checks(Findings{Host: "h", Snapshot: gpuinfo.Snapshot{State: gpuinfo.HostAuthFailed, Error: "refused"}}))
	if got["ssh"] != Fail || got["nvidia-smi"] != Skip || got["clock"] != Skip {
		t.Errorf("unreached: %v", got)
	}
	got = verdicts(Checks(Findings{Host: "h", Snapshot: ok, Reached: true, ShellErr: errors.New("exit status 1")}))
	if got["shell output"] != Fail || got["job directory"] != "" {
		t.Errorf("a script that failed: %v", got)
	}
}

func strconvF(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }

func TestPersistence(t *testing.T) {
	for modes, want := range map[string]Verdict{"Enabled Enabled ": OK, "Enabled Disabled ": Warn, "": "", "[N/A] ": ""} {
		if c := persistenceCheck(modes); c.Verdict != want {
			t.Errorf("%q: %+v, want %q", modes, c, want)
		}
	}
	if c := persistenceCheck("Disabled Enabled Disabled"); !strings.Contains(c.Detail, "off on GPU 0, 2:") || c.Fix == "" {
		t.Errorf("which GPUs: %+v", c)
	}
}

func TestAgree(t *testing.T) {
	mem := func(n uint64) *uint64 { return &n }
	gpus := func(uuids ...string) []gpuinfo.GPU {
		var out []gpuinfo.GPU
		for i, u := range uuids {
			out = append(out, gpuinfo.GPU{Index: i, UUID: u, MemTotal: mem(80 << 30)})
		}
		return out
	}
	ok := gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: gpus("GPU-a", "GPU-b")}
	for name, c := range map[string]struct {
		smi  gpuinfo.Snapshot
		want Verdict
	}{
		"same":         {ok, OK},
		"fewer":        {gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: gpus("GPU-a")}, Fail},
		"another UUID": {gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: gpus("GPU-a", "GPU-c")}, Fail},
		"smi fails":    {gpuinfo.Snapshot{State: gpuinfo.HostDriverMismatch, Error: "mismatch"}, Warn},
		"other memory": {gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: []gpuinfo.GPU{{Index: 0, UUID: "GPU-a", MemTotal: mem(40 << 30)}, {Index: 1, UUID: "GPU-b", MemTotal: mem(80 << 30)}}}, Warn},
		"within 1%":    {gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: []gpuinfo.GPU{{Index: 0, UUID: "GPU-a", MemTotal: mem(80<<30 - 300<<20)}, {Index: 1, UUID: "GPU-b", MemTotal: mem(80 << 30)}}}, OK},
	} {
		if got := agreeCheck(ok, c.smi); got.Verdict != c.want || (got.Verdict != OK && got.Fix == "") {
			t.Errorf("%s: %+v, want %s", name, got, c.want)
		}
	}
}

// TestChecksSMICUDA: the CUDA version nvidia-smi gives stands where NVML
// gave none; a local host has no clock check and says no SSH is needed.
func TestChecksSMICUDA(t *testing.T) {
	snap := gpuinfo.Snapshot{State: gpuinfo.HostOK, GPUs: make([]gpuinfo.GPU, 1), Source: "nvidia-smi", SourceWhy: "no helper"}
	cs := Checks(Findings{Host: "ctl", Local: true, Snapshot: snap, Reached: true, Shell: "gssh-doctor\nsetsid yes\njobdir ok 9999999\ncuda 12.4\n"})
	var cuda, clock, ssh string
	for _, c := range cs {
		switch c.Name {
		case "cuda":
			cuda = c.Detail
		case "clock":
			clock = c.Detail
		case "ssh":
			ssh = c.Detail
		}
	}
	if !strings.Contains(cuda, "CUDA 12.4; PyTorch wheels cu118, cu121, cu124 work") || clock != "" || !strings.Contains(ssh, "no SSH needed") {
		t.Errorf("cuda %q, clock %q, ssh %q", cuda, clock, ssh)
	}
}

func TestSSHFix(t *testing.T) {
	for why, want := range map[string]string{
		"connect to x:22: x: cannot resolve \"x\": no such host":                     "does not resolve",
		"root@x:22: no key to offer: no ssh-agent key and no readable identity file": "no key to offer",
		"ssh handshake with x:22: ssh: handshake failed: EOF":                        "MaxStartups",
	} {
		st := gpuinfo.HostUnreachable
		if strings.Contains(why, "no key") {
			st = gpuinfo.HostAuthFailed
		}
		if _, fix := sshFix("gpu01", st, why); !strings.Contains(fix, want) {
			t.Errorf("%q: fix %q, want %q in it", why, fix, want)
		}
	}
	if _, fix := sshFix("gpu01", gpuinfo.HostKeyUnknown, "x"); !strings.Contains(fix, "ssh gpu01 once") {
		t.Errorf("the host's name is not in the fix: %q", fix)
	}
}
