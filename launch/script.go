package launch

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Size limits of a job, checked at submit so that nothing is accepted
// that would then fail every launch. The launch payload (run.sh and
// spec.json) travels on the session's stdin, so only what the job itself
// hands to the kernel is bounded: Linux refuses one argument or
// environment string over 128 KiB (MAX_ARG_STRLEN) in execve.
const (
	MaxSpecBytes = 1 << 20     // the command, --env values, workdir and name together
	MaxWordBytes = 128<<10 - 1 // one word of the command (or the shell string), or one KEY=VALUE
)

func specSize(s job.Spec) int {
	n := len(s.Workdir) + len(s.Name)
	for _, a := range s.Argv {
		n += len(a)
	}
	for _, e := range s.Env {
		n += len(e.Key) + len(e.Value)
	}
	return n
}

// longWord returns a word of s (or a KEY=VALUE) over MaxWordBytes, if any.
func longWord(s job.Spec) (string, int) {
	for i, a := range s.Argv {
		if len(a) > MaxWordBytes {
			return fmt.Sprintf("word %d of the command", i+1), len(a)
		}
	}
	for _, e := range s.Env {
		if n := len(e.Key) + 1 + len(e.Value); n > MaxWordBytes {
			return "--env " + e.Key, n
		}
	}
	return "", 0
}

// notUTF8 names the first part of s that is not valid UTF-8, if any.
func notUTF8(s job.Spec) string {
	for i, a := range s.Argv {
		if !utf8.ValidString(a) {
			return fmt.Sprintf("word %d of the command", i+1)
		}
	}
	for _, e := range s.Env {
		if !utf8.ValidString(e.Key + e.Value) {
			return "--env " + strings.ToValidUTF8(e.Key, "?")
		}
	}
	switch {
	case !utf8.ValidString(s.Workdir):
		return "--workdir"
	case !utf8.ValidString(s.Name):
		return "--name"
	}
	return ""
}

// MaxNameBytes is the longest job name (--name), in bytes.
const MaxNameBytes = 200

// withNUL names the first word of s's command or value of its
// environment that holds a NUL byte ("" when none does).
func withNUL(s job.Spec) string {
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Sprintf("word %d of the command", i+1)
		}
	}
	for _, e := range s.Env {
		if strings.IndexByte(e.Value, 0) >= 0 {
			return "--env " + e.Key
		}
	}
	return ""
}

// CheckSpec reports what in s cannot be launched: bytes that are not
// UTF-8 (the job is stored as JSON, which would change them), an empty command, a
// workdir that is relative (it would be taken from the job directory; ""
// is the home) or holds a newline or NUL, an environment variable name
// that is not a shell identifier, or one that would override gssh's own
// (GSSH_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), a name with control
// characters or longer than MaxNameBytes, a NUL in the command or the
// environment.
func CheckSpec(s job.Spec) error {
	wd := s.Workdir
	switch {
	case len(s.Argv) == 0 || (s.Shell && strings.TrimSpace(s.Argv[0]) == ""):
		return errors.New("empty command: give the command after --, e.g. gssh submit -- python train.py")
	case strings.ContainsAny(wd, "\n\x00"):
		return fmt.Errorf("--workdir %q: a newline or NUL cannot be in a directory name", wd)
	case wd != "" && !path.IsAbs(wd) && wd != "~" && !strings.HasPrefix(wd, "~/") && !userHome.MatchString(wd):
		return fmt.Errorf("--workdir %q is relative: give an absolute path, or ~ for the worker's home (gssh submit resolves a relative one against the current directory)", wd)
	case specSize(s) > MaxSpecBytes:
		return fmt.Errorf("the command, its --env values and --workdir take %d KiB; the most is %d KiB: put the command in a script on the worker", specSize(s)>>10, MaxSpecBytes>>10)
	}
	if what := notUTF8(s); what != "" {
		return fmt.Errorf("%s is not valid UTF-8: gssh keeps jobs as JSON, which cannot carry those bytes; put them in a script on the worker, or pass them as $'\\xNN' inside a shell command", what)
	}
	if what, n := longWord(s); n > 0 {
		return fmt.Errorf("%s takes %d KiB; Linux passes at most %d KiB in one argument or environment string (MAX_ARG_STRLEN): put it in a file on the worker", what, n>>10, (MaxWordBytes+1)>>10)
	}
	if strings.IndexFunc(s.Name, unicode.IsControl) >= 0 {
		return fmt.Errorf("--name %q: control characters (newlines, tabs, escapes) are not allowed in a job name", s.Name)
	}
	if len(s.Name) > MaxNameBytes {
		return fmt.Errorf("--name: %d bytes; a job name takes at most %d (gssh ps shows it on one line)", len(s.Name), MaxNameBytes)
	}
	if what := withNUL(s); what != "" {
		return fmt.Errorf("%s holds a NUL byte, which no command line or environment can carry", what)
	}
	for _, e := range s.Env {
		switch {
		case !envKey.MatchString(e.Key):
			return fmt.Errorf("--env %q=...: the name must be letters, digits and _ (not starting with a digit)", e.Key)
		case strings.HasPrefix(e.Key, "GSSH_"), e.Key == "CUDA_VISIBLE_DEVICES", e.Key == "CUDA_DEVICE_ORDER":
			return fmt.Errorf("--env %s: gssh sets this one itself", e.Key)
		}
	}
	return nil
}

// RunScript returns run.sh for job j of cluster. It first takes the
// attempt's start gate (`mkdir go`, atomic: see Abandon) and leaves at
// once, running nothing, when the attempt was abandoned; then it records
// its pid and start time, leaves when the job was cancelled meanwhile (the
// `cancelled` mark is read after the pid is written, and Cancel writes it
// before it reads the pid, so one of them always sees the other), exports
// CUDA_VISIBLE_DEVICES (GPU or MIG UUIDs; an index for a GPU without UUID,
// with CUDA_DEVICE_ORDER=PCI_BUS_ID always set, corpus 063), GSSH_JOB_ID,
// GSSH_CLUSTER_ID, GSSH_ATTEMPT, GSSH_RESTART_COUNT (Job.Restarts: the
// requeues after it had started, as Slurm's SLURM_RESTART_COUNT) and the
// --env values, changes to the
// workdir (failing the job with that reason when it does not exist), runs
// the command and writes its exit status to `exit` atomically.
//
// It reads the worker's uptime (/proc/uptime) just before the command and
// again just after it: `exit` is then "exit N" and a second line
// "runtime U0 U1", both values as /proc/uptime gives them (seconds, 2
// decimals). Where /proc/uptime cannot be read, either time, `exit` has
// the first line alone, as before runtimes were recorded. A job whose
// workdir is missing never started its command: its `exit` is the
// "error workdir ..." line alone, with no runtime line (Poll reports
// Runtime 0). The two readings live in GSSH_U0 and GSSH_U1, unset first
// so never exported to the command; the GSSH_ prefix is gssh's own
// (CheckSpec), so they cannot clash with an --env variable.
//
// A job with --mem M gets GSSH_MEM_PER_GPU: M in MiB, as Slurm's
// SLURM_MEM_PER_GPU (a framework's memory cap can be set from it). A job
// given a block of ports (Placement.PortBase) gets GSSH_PORT_BASE and
// GSSH_PORT_COUNT.
//
// A job with --cpus N gets GSSH_CPUS=N. When its placement pins it to CPU
// ids (Placement.CPUs) the command runs under `taskset -c LIST` (so do
// its children, a login shell's included); where taskset is missing, or
// refuses the list, the command runs unpinned and one line in the log
// says so. A job without --cpus gets the script it always did.
func RunScript(cluster string, j job.Job) (string, error) {
	if err := CheckSpec(j.Spec); err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# gssh job %d of cluster %s. Written by gssh: every value below is quoted.\n", j.ID, cluster)
	w("d=$PWD\n")
	w("if ! mkdir \"$d/go\" 2>/dev/null; then echo 'gssh: this launch attempt was abandoned before it started: nothing was run' >&2; exit 0; fi\n")
	w("st=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)\n")
	w("if ! { printf '%%s %%s\\n' \"$$\" \"$st\" >\"$d/pid.tmp\" && mv -f \"$d/pid.tmp\" \"$d/pid\"; }; then echo 'gssh: cannot record the pid (disk full?): nothing was run' >&2; exit 1; fi\n")
	b.WriteString(finFn)
	w("if [ -e \"$d/cancelled\" ]; then echo 'gssh: cancelled before it started: nothing was run' >&2; exit 0; fi\n")
	w("export CUDA_VISIBLE_DEVICES=%s\n", q(strings.Join(j.Placement.GPUs, ",")))
	w("export CUDA_DEVICE_ORDER=PCI_BUS_ID\n")
	w("export GSSH_JOB_ID=%s GSSH_CLUSTER_ID=%s GSSH_ATTEMPT=%s\n", q(strconv.FormatUint(uint64(j.ID), 10)), q(cluster), q(strconv.Itoa(j.Attempt)))
	w("export GSSH_RESTART_COUNT=%s\n", q(strconv.Itoa(j.Restarts)))
	if a := j.Spec.Array; a != nil {
		w("export GSSH_ARRAY_JOB_ID=%s GSSH_ARRAY_TASK_ID=%s GSSH_ARRAY_TASK_COUNT=%s\n", q(strconv.FormatUint(uint64(a.Job), 10)), q(strconv.Itoa(a.Task)), q(strconv.Itoa(a.Tasks)))
	}
	if j.Spec.CPUs > 0 {
		w("export GSSH_CPUS=%s\n", q(strconv.Itoa(j.Spec.CPUs)))
	}
	if j.Spec.MemPerGPU > 0 {
		w("export GSSH_MEM_PER_GPU=%s\n", q(strconv.FormatUint(j.Spec.MemPerGPU>>20, 10)))
	}
	if p := j.Placement; p.PortBase > 0 {
		w("export GSSH_PORT_BASE=%s GSSH_PORT_COUNT=%s\n", q(strconv.Itoa(p.PortBase)), q(strconv.Itoa(p.PortCount)))
	}
	// gssh's own tools are found before the job's environment applies: an
	// --env PATH (a conda bin) changes what the command finds, never what
	// run.sh runs.
	pin := "" // the pinning prefix of the command line, if any
	if len(j.Placement.CPUs) > 0 {
		pin = `${GSSH_PIN:+"$gssh_taskset" -c "$GSSH_PIN"} `
		list := units.Ranges(j.Placement.CPUs, 2)
		w("unset GSSH_PIN\n")
		w("if ! gssh_taskset=$(command -v taskset); then echo %s >&2\n", q("gssh: taskset not found on this host: the job runs unpinned (it was given CPUs "+list+")"))
		w("elif ! \"$gssh_taskset\" -c %s true >/dev/null 2>&1; then echo %s >&2\n", q(list), q("gssh: taskset -c "+list+" refused: the job runs unpinned"))
		w("else GSSH_PIN=%s; fi\n", q(list))
	}
	switch {
	case j.Spec.Login:
		w("gssh_bash=$(command -v bash) || gssh_bash=bash\n")
	case j.Spec.Shell:
		w("gssh_sh=$(command -v sh) || gssh_sh=/bin/sh\n")
	}
	wd := workdir(j.Spec.Workdir)
	w("if ! cd %s 2>/dev/null; then\n", wd)
	w("  printf 'gssh: workdir %%s does not exist on %%s (or may not be entered)\\n' %s %s >&2\n", q(j.Spec.Workdir), q(cmp.Or(j.Placement.Host, "this host")))
	w("  fin %s; exit 1\nfi\n", q("error workdir "+j.Spec.Workdir+" does not exist on the worker"))
	b.WriteString(readU0)
	b.WriteString(walltimeSteps(cluster, j))
	in := " </dev/null" // a batch job reads nothing
	if j.Spec.Interactive != nil {
		// The command reads the terminal of gssh run. Signals that end
		// the command (Ctrl-C, a hangup, gssh cancel's SIGTERM) only
		// interrupt run.sh's wait, so it lives to write the exit file; a
		// handler, not an ignored signal, so the command still gets the
		// default actions (a subshell resets handled signals too).
		in = ""
		w("trap : INT HUP TERM QUIT\n")
	}
	// The command runs in a subshell that takes the job's environment and
	// becomes the command (exec).
	var env strings.Builder
	for _, e := range j.Spec.Env {
		fmt.Fprintf(&env, "export %s=%s; ", e.Key, q(e.Value))
	}
	words := make([]string, len(j.Spec.Argv))
	for i, a := range j.Spec.Argv {
		words[i] = q(a)
	}
	var cmd string
	switch {
	case j.Spec.Login && j.Spec.Shell:
		cmd = `"$gssh_bash" -lc ` + q(j.Spec.Argv[0])
	case j.Spec.Login:
		cmd = `"$gssh_bash" -lc '"$@"' gssh-job ` + strings.Join(words, " ")
	case j.Spec.Shell:
		cmd = `"$gssh_sh" -c ` + q(j.Spec.Argv[0])
	default:
		cmd = strings.Join(words, " ")
	}
	if j.Spec.Interactive == nil && j.Spec.LogLimit > 0 {
		b.WriteString(logLimitSteps(j.Spec.LogLimit, fmt.Sprintf("( %sexec %s%s )", env.String(), pin, cmd)))
		return b.String(), nil
	}
	w("( %sexec %s%s )%s\n", env.String(), pin, cmd, in)
	if j.Spec.Interactive != nil {
		w("rc=$?; fin \"exit $rc\"; exit $rc\n") // gssh run's session ends with the command's status
		return b.String(), nil
	}
	w("fin \"exit $?\"\n")
	return b.String(), nil
}

// logLimitSteps runs command (a subshell that execs the job's command)
// with its output capped at limit bytes in the log (Spec.LogLimit), and
// ends run.sh as the uncapped form does, with the command's exit status.
// No Go process runs on the worker: the command's stdout and stderr go,
// together and in the order written, into a FIFO in the job directory,
// read by a subshell that copies the first limit bytes to the log with
// `head -c` (which reads no byte past them; under `stdbuf -o0` where
// GNU coreutils has it, so what the job writes reaches the log at once,
// not in 4 KiB pieces), then, if more come, writes
// one line saying the log was truncated and reads the rest into
// /dev/null, so the command never blocks nor gets SIGPIPE. The reader
// ignores SIGTERM and SIGHUP (a cancel's, a walltime stop's): it ends
// when the last writer has, after copying what the command wrote. run.sh
// waits up to 2 s for it after the command, so a pass that records the
// end does not take it for a leftover; a reader kept by a leftover that
// holds the FIFO open is killed with it. Where mkfifo fails, the
// command runs uncapped and the log says so.
func logLimitSteps(limit uint64, command string) string {
	n := strconv.FormatUint(limit, 10)
	note := "gssh: the log was truncated at " + units.FormatBytes(limit) + " (--log-limit): the rest of the job's output was thrown away"
	return `rm -f "$d/out"
if mkfifo -m 600 "$d/out" 2>/dev/null; then
  gssh_head=head; command -v stdbuf >/dev/null 2>&1 && gssh_head='stdbuf -o0 head'
  ( trap '' TERM HUP INT; $gssh_head -c ` + n + `; case $(head -c 1 | wc -c) in *1*) printf '
%s
' ` + q(note) + `; exec cat >/dev/null ;; esac ) <"$d/out" &
  gssh_lim=$!
  ` + command + ` </dev/null >"$d/out" 2>&1
  gssh_rc=$?
  i=0; while kill -0 "$gssh_lim" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
  rm -f "$d/out"
  fin "exit $gssh_rc"
else
  echo ` + q("gssh: mkfifo failed in the job directory: the log is not capped at "+units.FormatBytes(limit)+" (--log-limit)") + ` >&2
  ` + command + ` </dev/null
  fin "exit $?"
fi
`
}

// finFn defines `fin LINE`, run.sh's one way to end: it first takes the
// job directory's end gate for the command's own end (see endGate: a stop
// that comes later then finds the job ended and says how, rather than
// marking it stopped), then writes the exit file atomically (exit.tmp,
// then mv): LINE, then "runtime U0 U1" when the command's start was read
// from /proc/uptime (GSSH_U0, set by readU0 just before the command) and
// /proc/uptime reads again now (GSSH_U1). It writes the exit file also
// when a stop took the gate first (the mark decides, the run time is
// kept), with the first line "timeout" when that stop was run.sh's own
// walltime stop (see walltimeSteps). POSIX sh only: run.sh's sh may be
// dash, bash or busybox.
const finFn = `unset GSSH_U0 GSSH_U1
fin() {
  { printf 'exit\n' >"$d/end.$$" && ln "$d/end.$$" "$d/end"; } 2>/dev/null; rm -f "$d/end.$$"
  if [ "$(head -n 1 "$d/end" 2>/dev/null)" = timeout ]; then set -- timeout; fi # its own walltime stop won
  GSSH_U1=
  if [ -n "$GSSH_U0" ]; then { read -r GSSH_U1 </proc/uptime; } 2>/dev/null || GSSH_U1=; GSSH_U1=${GSSH_U1%% *}; fi
  if [ -n "$GSSH_U1" ]; then printf '%s\nruntime %s %s\n' "$1" "$GSSH_U0" "$GSSH_U1"; else printf '%s\n' "$1"; fi >"$d/exit.tmp" && mv -f "$d/exit.tmp" "$d/exit"
}
`

// readU0 sets GSSH_U0 to the worker's uptime (the first field of
// /proc/uptime), or to "" when it cannot be read: the line just before
// the command.
const readU0 = `{ read -r GSSH_U0 </proc/uptime; } 2>/dev/null || GSSH_U0=; GSSH_U0=${GSSH_U0%% *}
`

// walltimeSteps is the part of run.sh that enforces j's walltime
// (Spec.Timeout: the controller fills in the policy's default_timeout)
// on the worker itself, so that a job stops on time while the controller
// is down or cron is late: just before the command, run.sh starts a
// watchdog in a session of its own (setsid) and without the job's GSSH_*
// marks, so it is never taken for one of the job's processes. The
// watchdog measures the walltime on the worker's own monotonic clock
// (/proc/uptime, from the command's start: GSSH_U0), whatever its wall
// clock says; at the limit it stops the job as the controller's walltime
// stop does (the end gate, the `cancelled` mark "timeout", SIGTERM,
// SIGKILL after DefaultGrace, one line in the job's log) and writes the
// exit file "timeout" with the command's run time, which the next pass
// records as timeout. It wakes at least every 5 s and leaves as soon as
// the job's run.sh is gone, or when the job was stopped otherwise (a
// mark). A job without a walltime, an interactive one (its gssh run
// enforces it), and a host without setsid or /proc/uptime get no
// watchdog (the controller's pass enforces the walltime alone; the log
// says so).
func walltimeSteps(cluster string, j job.Job) string {
	w := j.Spec.Timeout
	if w <= 0 || j.Spec.Interactive != nil {
		return ""
	}
	cs := (w + 10*time.Millisecond - 1) / (10 * time.Millisecond) // centiseconds, rounded up
	limit, grace := w.String(), DefaultGrace.String()
	watch := aliveFn + procsFn + exitfileFn + `
d=$1; u0=$2; lpid=$3; lst=$4
cs() { case $1 in *[!0-9.]*) return 1 ;; [0-9]*.[0-9][0-9]) echo $(( ${1%.*} * 100 + 1${1#*.} - 100 )) ;; *) return 1 ;; esac; }
e=$(cs "$u0") || exit 0
e=$((e + ` + strconv.FormatInt(int64(cs), 10) + `))
while alive "$lpid" "$lst"; do
  { read -r now _ </proc/uptime; } 2>/dev/null && n=$(cs "$now") || exit 0
  l=$((e - n))
  if [ $l -le 0 ]; then
    [ -e "$d/cancelled" ] && exit 0 # stopped otherwise already
` + stopScript(cluster, job.Job{ID: j.ID, Attempt: j.Attempt}, DefaultGrace, string(job.Timeout),
		`echo `+q("gssh: the job reached its walltime of "+limit+" on this host: SIGTERM, then SIGKILL after "+grace)+` >&2`,
		`{ read -r u1 _ </proc/uptime; } 2>/dev/null; [ -s "$d/exit" ] || { printf 'timeout\nruntime %s %s\n' "$u0" "${u1:-$u0}" >"$d/exit.wd" && mv -f "$d/exit.wd" "$d/exit"; }`) + `
    exit 0
  fi
  [ $l -gt 500 ] && l=500
  sleep $((l / 100)).$((l % 100 / 10))$((l % 10)) 2>/dev/null || sleep 1
done`
	return `if [ -n "$GSSH_U0" ] && command -v setsid >/dev/null 2>&1; then
  ( unset GSSH_JOB_ID GSSH_CLUSTER_ID GSSH_ATTEMPT GSSH_RESTART_COUNT GSSH_ARRAY_JOB_ID GSSH_ARRAY_TASK_ID GSSH_ARRAY_TASK_COUNT GSSH_CPUS GSSH_PIN
    exec setsid sh -c ` + q(watch) + ` gssh-walltime "$d" "$GSSH_U0" "$$" "$st" ) </dev/null >/dev/null &
else echo ` + q("gssh: no setsid or /proc/uptime on this host: the walltime of "+limit+" is enforced by gssh's passes alone") + ` >&2
fi
`
}

// userHome matches "~user" and "~user/dir": a user name the shell may see
// unquoted (tilde expansion needs that) and nothing else.
var userHome = regexp.MustCompile(`^~([A-Za-z_][A-Za-z0-9._-]*)(/.*)?$`)

// workdir renders the workdir for `cd`: "~" and "~/x" mean the login
// user's home on the worker, "~user" and "~user/x" that user's; everything
// else is quoted as it is.
func workdir(wd string) string {
	switch m := userHome.FindStringSubmatch(wd); {
	case wd == "" || wd == "~":
		return `"$HOME"`
	case strings.HasPrefix(wd, "~/"):
		return `"$HOME"/` + q(wd[2:])
	case m != nil && m[2] == "":
		return "~" + m[1]
	case m != nil:
		return "~" + m[1] + "/" + q(m[2][1:])
	}
	return q(wd)
}
