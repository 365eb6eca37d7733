// Package doctor turns what gssh doctor found on a host into checks:
// each a verdict and, when something is wrong, what to do about it. It
// is pure: the findings (a probe's snapshot, a shell's answers) come in,
// the checks go out, so every verdict is testable without a host.
package doctor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/units"
)

// Verdict is one check's outcome.
type Verdict string

// The verdicts: ok; warn (it works, but not as well as it could); fail
// (gssh cannot work there until it is fixed); skip (not checked: an
// earlier check failed); info (a fact to know, such as the CUDA version).
const (
	OK   Verdict = "ok"
	Warn Verdict = "warn"
	Fail Verdict = "fail"
	Skip Verdict = "skip"
	Info Verdict = "info"
)

// Check is one check of one host.
type Check struct {
	Host    string  `json:"host"`
	Name    string  `json:"check"` // "ssh", "shell output", "nvidia-smi", ...
	Verdict Verdict `json:"verdict"`
	Detail  string  `json:"detail"`        // what was found
	Fix     string  `json:"fix,omitempty"` // what to do, when not ok
}

// Findings are what gssh doctor read on one host.
type Findings struct {
	Host string
	// Snapshot is the host's GPU probe (its State says whether SSH and
	// nvidia-smi worked); Reached whether SSH reached it at all.
	Snapshot gpuinfo.Snapshot
	Reached  bool
	// Shell is the answer of the doctor's script (Script), run over SSH
	// as the jobs are: its stdout, and the error of running it.
	Shell    string
	ShellErr error
	// Time is the host's answer to ClockScript; Sent and Received
	// bracket that command on the controller's clock (its time is
	// compared with their midpoint).
	Time           string
	Sent, Received time.Time
	// Local: the host is this machine (no SSH, no login).
	Local bool
	// Sudo: the host runs jobs as their owners (run_as: sudo).
	Sudo bool
	// Foreign are the host's GPU processes that are no gssh job's, in
	// words ("GPU 0: pid 4242 (python, alice), 20.0 GiB").
	Foreign []string
	// SMI is nvidia-smi's own view of the GPUs where the probe was NVML's
	// (nil: not read), to see that the two agree.
	SMI *gpuinfo.Snapshot
}

// Script is the shell script gssh doctor runs on a host; with smi (its
// probe found nvidia-smi answering), it also asks nvidia-smi for the
// GPUs' persistence mode and the CUDA version the driver supports. Its
// stdout, read by Checks, is: a line "gssh-doctor" (what comes before it
// is the login shell's own output), then "key value" lines.
func Script(smi bool) string {
	s := `printf 'gssh-doctor\n'
if command -v setsid >/dev/null 2>&1; then echo 'setsid yes'; else echo 'setsid no'; fi
if command -v sudo >/dev/null 2>&1 && sudo -n true </dev/null >/dev/null 2>&1; then echo 'sudo yes'; else echo 'sudo no'; fi
d="$HOME/.gssh/jobs"
if err=$(mkdir -p "$d" 2>&1) && t="$d/.doctor.$$" && : >"$t" 2>/dev/null && rm -f "$t"; then
  echo "jobdir ok $(df -Pk "$d" 2>/dev/null | awk 'NR == 2 { print $4 }')"
else
  echo "jobdir no $d: $(printf '%s' "$err" | head -n 1)"
fi
c="$HOME/.cache/gssh"
if err=$(mkdir -p "$c" 2>&1) && t="$c/.doctor.$$" && : >"$t" 2>/dev/null && rm -f "$t"; then
  echo "cachedir ok $(df -Pk "$c" 2>/dev/null | awk 'NR == 2 { print $4 }')"
else
  echo "cachedir no $c: $(printf '%s' "$err" | head -n 1)"
fi`
	if smi {
		s += `
if command -v timeout >/dev/null 2>&1; then
  printf 'persistence %s\n' "$(timeout 5 nvidia-smi --query-gpu=persistence_mode --format=csv,noheader 2>/dev/null | tr '\n' ' ')"
  printf 'cuda %s\n' "$(timeout 5 nvidia-smi --version 2>/dev/null | sed -n 's/^CUDA Version *: *//p' | head -n 1)"
fi`
	}
	return s
}

// helperRoomKiB is the free space the helper cache should have: the
// helper (about 10 MiB) and a second one while gssh is upgraded.
const helperRoomKiB = 64 << 10

// ClockScript is the command whose answer (seconds since the epoch) is
// Findings.Time: a command of its own, so that its round trip is short
// and its midpoint close to when the host read its clock.
const ClockScript = `date +%s.%N 2>/dev/null || date +%s`

// Checks are the checks of one host's findings, in the order of gssh
// doctor's table.
func Checks(f Findings) []Check {
	var out []Check
	add := func(name string, v Verdict, detail, fix string) {
		out = append(out, Check{Host: f.Host, Name: name, Verdict: v, Detail: detail, Fix: fix})
	}
	st := f.Snapshot.State
	if !f.Reached {
		detail, fix := sshFix(f.Host, st, f.Snapshot.Error)
		add("ssh", Fail, detail, fix)
		for _, n := range []string{"shell output", "nvidia-smi", "helper", "job directory", "helper cache", "setsid", "clock"} {
			add(n, Skip, "not checked: the host cannot be reached", "")
		}
		return out
	}
	if f.Local {
		add("ssh", OK, "this machine: no SSH needed", "")
	} else {
		add("ssh", OK, "reached", "")
	}

	noise, answers, ok := parseShell(f.Shell)
	switch {
	case f.ShellErr != nil:
		add("shell output", Fail, "the check script failed: "+oneLine(f.ShellErr.Error()), "run `ssh "+f.Host+" true` by hand (with -F for gssh's --ssh-config) to see why a command fails there")
	case !ok:
		add("shell output", Fail, fmt.Sprintf("the check script's output did not come back: %q", clip(f.Shell)), "the login shell or a ForceCommand replaces commands: let `ssh "+f.Host+" cmd` run cmd")
	case noise != "":
		add("shell output", Fail, fmt.Sprintf("the login prints %q before every command", clip(noise)),
			"print it only on a terminal: wrap it in `if [ -t 1 ]; then ... fi` in ~/.bashrc or the ForceCommand (output that is not the command's breaks gssh's protocol)")
	default:
		add("shell output", OK, "commands print only their own output", "")
	}

	detail, v, fix := smiCheck(f.Snapshot)
	add("nvidia-smi", v, detail, fix)
	if st == gpuinfo.HostOK || st == gpuinfo.HostDegraded {
		switch {
		case f.Snapshot.Source == "nvml":
			add("helper", OK, "the NVML helper reads the GPUs", "")
		case f.Snapshot.SourceWhy != "":
			add("helper", Warn, "the GPUs are read with nvidia-smi: "+f.Snapshot.SourceWhy,
				"keep gssh-helper beside gssh (make builds it) or set $GSSH_HELPER; docs/probing.md says what else keeps it from running (without it probes are slower and know less)")
		}
		cuda := f.Snapshot.CUDA
		if cuda == "" && ok {
			cuda = answers["cuda"] // nvidia-smi's "CUDA Version"
		}
		if c := cudaCheck(cuda); c.Name != "" {
			add(c.Name, c.Verdict, c.Detail, c.Fix)
		}
		if f.SMI != nil && f.Snapshot.Source == "nvml" {
			c := agreeCheck(f.Snapshot, *f.SMI)
			add(c.Name, c.Verdict, c.Detail, c.Fix)
		}
	}

	if !ok {
		return out
	}
	jobdir := answers["jobdir"]
	switch j, rest, _ := strings.Cut(jobdir, " "); {
	case j == "ok":
		kib, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
		switch {
		case err != nil:
			add("job directory", OK, "~/.gssh/jobs is writable (its free space unknown)", "")
		case kib < 1<<20:
			add("job directory", Warn, fmt.Sprintf("~/.gssh/jobs is writable, with %s free", units.FormatMem(kib<<10)),
				"free some space: each job's log and files go there (keep_job_dirs trims old ones)")
		default:
			add("job directory", OK, fmt.Sprintf("~/.gssh/jobs is writable, %s free", units.FormatMem(kib<<10)), "")
		}
	default:
		add("job directory", Fail, "cannot write "+strings.TrimSpace(rest),
			"make ~/.gssh/jobs a directory the login may write (jobs keep their run.sh, pid, log and exit status there)")
	}
	switch c, rest, _ := strings.Cut(answers["cachedir"], " "); {
	case f.Local:
		// The local host runs the helper where it is: nothing is pushed.
	case c == "ok":
		kib, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
		switch {
		case err != nil:
			add("helper cache", OK, "~/.cache/gssh is writable (its free space unknown)", "")
		case kib < helperRoomKiB:
			add("helper cache", Warn, fmt.Sprintf("~/.cache/gssh is writable, with %s free", units.FormatMem(kib<<10)),
				"free some space: gssh pushes its helper (some MiB) there, and probes with nvidia-smi where it cannot")
		default:
			add("helper cache", OK, fmt.Sprintf("~/.cache/gssh is writable, %s free", units.FormatMem(kib<<10)), "")
		}
	case c == "no":
		add("helper cache", Warn, "cannot write "+strings.TrimSpace(rest),
			"make ~/.cache/gssh a directory the login may write: gssh pushes its helper there, and probes with nvidia-smi where it cannot")
	}
	if answers["setsid"] == "yes" {
		add("setsid", OK, "setsid is there", "")
	} else {
		add("setsid", Fail, "no setsid on the PATH of non-interactive logins", "install util-linux (setsid): gssh starts each job in a session of its own")
	}
	if f.Sudo {
		if answers["sudo"] == "yes" {
			add("sudo", OK, "sudo -n runs without a password", "")
		} else {
			add("sudo", Fail, "sudo -n true fails (no sudo, or it asks for a password)",
				"add a NOPASSWD rule for the login, e.g. in /etc/sudoers.d/gssh: LOGIN ALL=(%GROUP) NOPASSWD: /bin/sh")
		}
	}
	if c := persistenceCheck(answers["persistence"]); c.Name != "" {
		add(c.Name, c.Verdict, c.Detail, c.Fix)
	}
	if !f.Local {
		add(clockCheck(f.Time, f.Sent, f.Received))
	}
	for _, p := range f.Foreign {
		add("gpu processes", Info, p, "a process gssh did not start holds GPU memory: jobs placed there see less free")
	}
	return out
}

// parseShell splits the script's stdout into what came before its
// marker (the login's own output) and its key-value lines; ok false when
// the marker never came.
func parseShell(out string) (noise string, answers map[string]string, ok bool) {
	before, after, ok := strings.Cut(out, "gssh-doctor\n")
	if !ok {
		return "", nil, false
	}
	answers = map[string]string{}
	for _, line := range strings.Split(after, "\n") {
		if k, v, found := strings.Cut(line, " "); found {
			answers[k] = v
		}
	}
	return before, answers, true
}

// sshFix says why host could not be reached and what to do, from its
// probe's state and error.
func sshFix(host string, st gpuinfo.HostState, why string) (detail, fix string) {
	detail = string(st) + ": " + oneLine(why)
	switch {
	case strings.Contains(why, "cannot resolve"):
		return detail, "the name does not resolve: fix it, or give the address (HostName in ~/.ssh/config, or address: in the inventory)"
	case st == gpuinfo.HostAuthFailed && strings.Contains(why, "no key to offer"):
		return detail, "gssh has no key to offer (the host was not contacted): ssh-add a key (gssh uses ssh-agent), or set IdentityFile for " + host + " in ~/.ssh/config"
	case st == gpuinfo.HostUnreachable && (strings.Contains(why, "handshake") && (strings.Contains(why, "EOF") || strings.Contains(why, "reset"))):
		return detail, "the server closed the connection during the handshake: sshd's MaxStartups (10 at once by default) refuses connections when many come together (many hosts behind one sshd or jump host): check fewer hosts at once, or raise MaxStartups"
	}
	switch st {
	case gpuinfo.HostUnreachable:
		return detail, "check " + host + " is up, and its HostName and Port (ssh -G " + host + " shows them); a firewall may drop port 22"
	case gpuinfo.HostTimeout:
		return detail, "the host did not answer in time: check it is up and not overloaded, or raise ConnectTimeout for it in ~/.ssh/config (or --connect-timeout, where ssh_config sets none)"
	case gpuinfo.HostAuthFailed:
		return detail, "give " + host + " a key it accepts: ssh-add the key (gssh uses ssh-agent), or IdentityFile in ~/.ssh/config; gssh never asks for a password"
	case gpuinfo.HostKeyUnknown:
		return detail, "ssh " + host + " once and accept its key (it goes to known_hosts), or set StrictHostKeyChecking accept-new for it"
	case gpuinfo.HostKeyMismatch:
		return detail, "the host's key changed: if you know why (a reinstall), ssh-keygen -R " + host + " and connect once; else someone may be in between"
	case gpuinfo.HostUnknownHost:
		return detail, "add the host to the inventory, or fix its name (DNS, or HostName in ~/.ssh/config)"
	case gpuinfo.HostConfigError:
		return detail, "fix the ssh_config lines the error names"
	}
	return detail, "see the error; ssh -v " + host + " says more"
}

// smiCheck is the nvidia-smi check of a probe's snapshot.
func smiCheck(s gpuinfo.Snapshot) (detail string, v Verdict, fix string) {
	switch s.State {
	case gpuinfo.HostOK:
		return fmt.Sprintf("%d GPU(s), driver %s", len(s.GPUs), s.Driver), OK, ""
	case gpuinfo.HostDegraded:
		return fmt.Sprintf("%d GPU(s), some failed: %s", len(s.GPUs), oneLine(s.Error)), Warn, "gssh gpus shows which; a lost GPU needs a reset or a reboot (check dmesg for Xid errors)"
	case gpuinfo.HostNoDevices:
		return "no GPUs found", Warn, "a host without GPUs takes no jobs: check the GPUs are seated and the driver sees them (nvidia-smi -L)"
	case gpuinfo.HostSMIMissing:
		return "nvidia-smi is not on the PATH of non-interactive logins", Fail, "install the NVIDIA driver's utilities, or put nvidia-smi's directory in the PATH of non-interactive shells (/etc/environment; ~/.ssh/environment only where sshd has PermitUserEnvironment yes)"
	case gpuinfo.HostDriverNotLoaded:
		return "nvidia-smi cannot talk to the driver: " + oneLine(s.Error), Fail, "load the driver (modprobe nvidia) or reboot; check the driver is installed for the running kernel"
	case gpuinfo.HostDriverMismatch:
		return "the driver's kernel module and its library differ: " + oneLine(s.Error), Fail, "the driver was upgraded without a reboot: reboot, or unload and reload the nvidia kernel modules"
	case gpuinfo.HostNVMLNotFound:
		return "nvidia-smi cannot load libnvidia-ml: " + oneLine(s.Error), Fail, "put the driver's library directory in the non-interactive environment (LD_LIBRARY_PATH, or ldconfig)"
	case gpuinfo.HostTimeout:
		return "nvidia-smi did not answer in time: " + oneLine(s.Error), Fail, "a GPU may be stuck (check dmesg for Xid errors; a reset or reboot frees it), or the host is only slow: raise --probe-timeout; persistence mode (nvidia-smi -pm 1) makes nvidia-smi start faster"
	}
	return string(s.State) + ": " + oneLine(s.Error), Fail, "run nvidia-smi on the host to see what it says"
}

// torchWheels are PyTorch's CUDA wheel tags and the CUDA version each
// needs of the driver (its major.minor, times ten).
var torchWheels = []struct {
	tag  string
	cuda int
}{{"cu118", 118}, {"cu121", 121}, {"cu124", 124}, {"cu126", 126}, {"cu128", 128}, {"cu129", 129}, {"cu130", 130}}

// cudaCheck says which CUDA the driver supports (nvidia-smi's "CUDA
// Version", NVML's cuda driver version), and so which PyTorch wheels run.
func cudaCheck(v string) Check {
	major, minor, ok := strings.Cut(strings.TrimSpace(v), ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil {
		return Check{}
	}
	have := ma*10 + mi
	var work, not []string
	for _, w := range torchWheels {
		if w.cuda <= have {
			work = append(work, w.tag)
		} else {
			not = append(not, w.tag)
		}
	}
	detail := fmt.Sprintf("the driver supports CUDA %s", v)
	switch {
	case len(work) == 0:
		detail += "; no PyTorch CUDA wheel of " + strings.Join(not, ", ") + " works (upgrade the driver)"
	case len(not) == 0:
		detail += "; PyTorch wheels " + strings.Join(work, ", ") + " work"
	default:
		detail += "; PyTorch wheels " + strings.Join(work, ", ") + " work, " + strings.Join(not, ", ") + " do not"
	}
	return Check{Name: "cuda", Verdict: Info, Detail: detail}
}

// agreeCheck compares the NVML helper's view of the GPUs with
// nvidia-smi's: the same GPUs (count, UUIDs by index) with the same
// memory (within 1 %: nvidia-smi rounds to MiB, NVML's total may leave
// out what the driver reserves).
func agreeCheck(nvml, smi gpuinfo.Snapshot) Check {
	c := Check{Name: "nvml and nvidia-smi"}
	fix := "two driver installs may be in the way (a library in LD_LIBRARY_PATH or /usr/local of another version than the kernel module): nvidia-smi -q and ldconfig -p | grep nvidia-ml show which"
	switch {
	case smi.State != gpuinfo.HostOK && smi.State != gpuinfo.HostDegraded:
		c.Verdict, c.Detail, c.Fix = Warn, "NVML reads the GPUs, nvidia-smi does not: "+string(smi.State)+": "+oneLine(smi.Error), fix
		return c
	case len(nvml.GPUs) != len(smi.GPUs):
		c.Verdict, c.Detail, c.Fix = Fail, fmt.Sprintf("NVML sees %d GPUs, nvidia-smi %d", len(nvml.GPUs), len(smi.GPUs)), fix
		return c
	}
	for i := range nvml.GPUs {
		a, b := nvml.GPUs[i], smi.GPUs[i]
		switch {
		case a.UUID != b.UUID:
			c.Verdict, c.Detail, c.Fix = Fail, fmt.Sprintf("GPU %d is %s to NVML, %s to nvidia-smi", a.Index, a.UUID, b.UUID), fix
			return c
		case a.MemTotal != nil && b.MemTotal != nil && !near(*a.MemTotal, *b.MemTotal):
			c.Verdict, c.Detail, c.Fix = Warn, fmt.Sprintf("GPU %d has %s to NVML, %s to nvidia-smi", a.Index, units.FormatMem(*a.MemTotal), units.FormatMem(*b.MemTotal)), fix
			return c
		}
	}
	c.Verdict, c.Detail = OK, fmt.Sprintf("both see the same %d GPU(s)", len(nvml.GPUs))
	return c
}

// near reports whether a and b differ by at most 1 %.
func near(a, b uint64) bool {
	d := max(a, b) - min(a, b)
	return d*100 <= max(a, b)
}

// persistenceCheck reads nvidia-smi's persistence_mode of each GPU (in
// index order, "Enabled" or "Disabled", space-separated); no check when
// it could not be read (an old or hung nvidia-smi).
func persistenceCheck(modes string) Check {
	words := strings.Fields(modes)
	if len(words) == 0 {
		return Check{}
	}
	var off []string
	for i, w := range words {
		switch w {
		case "Enabled":
		case "Disabled":
			off = append(off, strconv.Itoa(i))
		default:
			return Check{}
		}
	}
	if len(off) == 0 {
		return Check{Name: "persistence mode", Verdict: OK, Detail: "on for every GPU"}
	}
	return Check{Name: "persistence mode", Verdict: Warn, Detail: "off on GPU " + strings.Join(off, ", ") + ": each nvidia-smi and NVML start loads the driver again (slow probes)",
		Fix: "turn it on: nvidia-smi -pm 1 as root, or run nvidia-persistenced"}
}

// clockCheck compares the host's clock (remote: seconds since the epoch,
// as date +%s.%N prints them) with the midpoint of the controller's sent
// and received.
func clockCheck(remote string, sent, received time.Time) (string, Verdict, string, string) {
	secs, err := strconv.ParseFloat(strings.TrimSpace(remote), 64)
	if err != nil || sent.IsZero() {
		return "clock", Warn, "the host's time could not be read", "check that date works on the host"
	}
	mid := sent.Add(received.Sub(sent) / 2)
	skew := time.Unix(0, int64(secs*1e9)).Sub(mid)
	d := skew.Abs().Round(10 * time.Millisecond)
	word := "ahead"
	if skew < 0 {
		word = "behind"
	}
	switch {
	case d < time.Second:
		return "clock", OK, fmt.Sprintf("within 1s of the controller's (%s)", d), ""
	case d < time.Minute:
		return "clock", Warn, fmt.Sprintf("%s %s the controller's", d, word), "run a time service (chrony, systemd-timesyncd) on both: logs and events compare times"
	}
	return "clock", Fail, fmt.Sprintf("%s %s the controller's", d.Round(time.Second), word), "set the clock and run a time service (chrony, systemd-timesyncd): walltimes are measured on the worker, but begins, logs and events compare times"
}

// oneLine is s's first line.
func oneLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// clip is s cut to 80 characters.
func clip(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}
