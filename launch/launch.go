// Package launch runs jobs on workers over a Runner and keeps track of them
// there, with nothing installed on the worker but a POSIX shell and the
// usual tools: setsid (util-linux; nohup where it is missing), ps, awk,
// grep, sed, cut, sort, stat, wc, head (-c) and tail (GNU, for --pid), and
// /proc.
//
// Start, Poll, Abandon, Cancel and Logs each take one host's Runner;
// Workers ties them to the hosts of a fleet, as control.Workers.
//
// Each launch attempt of a job has a directory on the worker,
// ~/.gssh/jobs/<cluster>-<id>.<attempt>/ (mode 0700; attempt 0, a job
// launched before attempts were counted, has ~/.gssh/jobs/<cluster>-<id>/),
// holding:
//
//	spec.json  the job record as submitted (for people reading the worker)
//	run.sh     the script gssh wrote: environment, workdir, the command
//	log        stdout and stderr of the job, as sbatch does by default
//	out        while a job with a log cap (Spec.LogLimit) runs: the FIFO
//	           its output goes through to the log (see logLimitSteps)
//	go         the start gate: made (atomically) by run.sh before it starts
//	           the command, or by Abandon so that it never does
//	abandoned  present when the attempt was abandoned before it started
//	pid        "PID STARTTICKS" of run.sh, the job's session leader
//	exit       how it ended, written atomically (exit.tmp, then mv) when
//	           it ends: a first line "exit N" (the command's exit status),
//	           "error <why>" (it could not start: the workdir) or
//	           "timeout" (run.sh's own walltime stop ended it), then,
//	           when the command ran and /proc/uptime could be read before
//	           and after it, a second line "runtime U0 U1": the worker's
//	           /proc/uptime (seconds, 2 decimals) just before the command
//	           started and just after it ended, so U1 − U0 is its run time
//	           on the worker's own monotonic clock. Exit files of a gssh
//	           before runtimes were recorded have the first line alone.
//	end        the end gate: made (atomically: a file of the maker's own,
//	           hard-linked to this name) by run.sh as its command ends,
//	           holding "exit", or by a stop before it marks the job,
//	           holding why; the first one decides how the job ended (see
//	           Stop), so a stop never overwrites an exit that came first
//	cancelled  present when gssh stopped the job: "cancelled" (gssh cancel),
//	           "timeout" (past its walltime: the controller's stop, or
//	           run.sh's own), "preempting" (preempted) or "hangup" (an
//	           interactive job's gssh run went away)
//
// A job of gssh run (Spec.Interactive) is launched by Attach instead: the
// same directory, files and start gate, but run.sh runs in the foreground
// of an SSH session with the caller's streams (on a PTY for --pty), and a
// second session, its keeper, stops the job when the first one's client
// goes away (see Attach).
//
// run.sh and spec.json reach the worker on the session's stdin. run.sh is
// started with no PTY, all three fds redirected and in its own session
// (`setsid -f`), so closing the SSH connection neither hangs nor kills it
// (corpus 059-062). Every value gssh places in a remote command (workdir,
// env values, each argv word, paths) is quoted with shellescape.Quote; a
// single-string command is the user's own shell command and runs under
// `sh -c`, by contract.
package launch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"al.essio.dev/pkg/shellescape"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/sshexec"
)

// Runner is what launch needs of sshexec.
type Runner interface {
	Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error)
}

// Streamer runs a command and copies its output as it comes (sshexec.Pool
// and sshexec.Local are both).
type Streamer interface {
	Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Shell is a host's runner that can also stream (sshexec.Pool and
// sshexec.Local are both).
type Shell interface {
	Runner
	Streamer
}

// StepError is a step (launch, poll, cancel, logs) that failed on a
// worker. Its message names the host once: for a command that exited
// non-zero, with the first lines of its stderr ("launch on gpu01: job
// directory … exists already"); for a transport failure, with its kind and
// detail. Err stays typed: an *sshexec.ExitError, or an *sshexec.Error
// wrapping a sentinel.
type StepError struct {
	Step, Host string
	Err        error
}

func (e *StepError) Error() string {
	var xe *sshexec.ExitError
	msg := sshexec.WithoutHost(e.Err)
	if errors.As(e.Err, &xe) && strings.TrimSpace(xe.Stderr) != "" {
		msg = firstLines(xe.Stderr, 3)
	}
	return e.Step + " on " + e.Host + ": " + msg
}

func (e *StepError) Unwrap() error { return e.Err }

// q quotes one value for the remote POSIX shell.
func q(s string) string { return shellescape.Quote(s) }

// DirName is the directory of a job's launch attempt, relative to the
// login user's home: .gssh/jobs/<cluster>-<id>.<attempt>. Attempt 0 is a
// job launched before attempts were counted: .gssh/jobs/<cluster>-<id>.
func DirName(cluster string, id job.ID, attempt int) string {
	if attempt <= 0 {
		return fmt.Sprintf(".gssh/jobs/%s-%d", cluster, id)
	}
	return fmt.Sprintf(".gssh/jobs/%s-%d.%d", cluster, id, attempt)
}

// dirOf is job j's directory as recorded at launch (absolute), or, before
// that, relative to the home.
func dirOf(cluster string, j job.Job) string {
	if j.Remote.Dir != "" {
		return j.Remote.Dir
	}
	return DirName(cluster, j.ID, j.Attempt)
}

// jobdirFn defines `jobdir DIR`, which sets d to DIR, taken relative to the
// login user's home unless absolute: the one way the scripts below find a
// job's directory.
const jobdirFn = `
jobdir() { case $1 in /*) d=$1 ;; *) d="$HOME/$1" ;; esac; }
`

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

// CheckSpec reports what in s cannot be launched: bytes that are not
// UTF-8 (the job is stored as JSON, which would change them), an empty command, a
// workdir that is relative (it would be taken from the job directory; ""
// is the home) or holds a newline or NUL, an environment variable name
// that is not a shell identifier, or one that would override gssh's own
// (GSSH_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER).
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
	// gssh's own tools are found before the job's environment applies: an
	// --env PATH (a conda bin) changes what the command finds, never what
	// run.sh runs.
	pin := "" // the pinning prefix of the command line, if any
	if len(j.Placement.CPUs) > 0 {
		pin = `${GSSH_PIN:+"$gssh_taskset" -c "$GSSH_PIN"} `
		list := gpuinfo.FormatCPUList(j.Placement.CPUs)
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
	note := "gssh: the log was truncated at " + sched.FormatBytes(limit) + " (--log-limit): the rest of the job's output was thrown away"
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
  echo ` + q("gssh: mkfifo failed in the job directory: the log is not capped at "+sched.FormatBytes(limit)+" (--log-limit)") + ` >&2
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

// exitDefinite is the launcher's exit status for a failure that leaves
// the attempt sure not to run (before run.sh was started, or after the
// launcher took the start gate itself). Any other exit status, a signal
// included, comes from a launcher cut short at an unknown point: the
// outcome is unknown.
const exitDefinite = 3

// exitDirExists is the launcher's exit status when the attempt's
// directory exists already (job.ErrDirExists): a definite failure too.
const exitDirExists = 4

// Start creates the directory of j's attempt (j.Attempt) on host, writes
// run.sh and spec.json there from the session's stdin, starts run.sh
// detached (setsid -f, all fds redirected) and waits up to 5 s for it to
// record its pid; if it has not by then, Start abandons the attempt (see
// Abandon) so that it can never start later.
//
// A definite failure (the home cannot be written, the disk is full,
// run.sh did not start and the attempt was abandoned, the host could not
// be reached) is a *StepError: the job did not start, and another attempt
// may. One that found the attempt's directory there already wraps
// job.ErrDirExists and the *StepError: nothing started, but another
// attempt must not be made (see ErrDirExists). An error that wraps
// job.ErrOutcomeUnknown means the job may be running (the session died or
// was cut off after the launch was sent): the caller must ask the worker
// (Poll, Abandon), never launch it blindly again.
func Start(ctx context.Context, run Runner, host, cluster string, j job.Job) (job.Remote, error) {
	script, err := RunScript(cluster, j)
	if err != nil {
		return job.Remote{}, err
	}
	spec, err := json.Marshal(j)
	if err != nil {
		return job.Remote{}, fmt.Errorf("launch: %w", err)
	}
	n := strconv.Itoa(len(script))
	cmd := aliveFn + claimsFn + jobdirFn + `fail() { echo "$1" >&2; exit ` + strconv.Itoa(exitDefinite) + `; }
` + makeDir(cluster, j, n) + `
cat >"$d/spec.json" || fail "cannot write $d/spec.json (disk full?)"
[ "$(wc -c <"$d/run.sh")" -eq ` + n + ` ] || fail "run.sh was cut short on the way (disk full?)"` + claimSteps(j, cluster) + `
cd "$d" || fail "cannot enter $d"
if setsid -f true </dev/null >/dev/null 2>&1; then
  setsid -f sh "$d/run.sh" </dev/null >>"$d/log" 2>&1
else
  nohup sh "$d/run.sh" </dev/null >>"$d/log" 2>&1 &
fi
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
if [ ! -s "$d/pid" ] && mkdir "$d/go" 2>/dev/null; then
  : >"$d/abandoned"; fail "run.sh did not start within 5s: this attempt is abandoned (see $d/log)"
fi
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
[ -s "$d/pid" ] || { echo "run.sh started but recorded no pid within 10s" >&2; exit 75; }` + claimPid + `
printf 'dir %s\n' "$d"; cat "$d/pid"`
	res, err := run.Run(ctx, host, cmd, strings.NewReader(script+string(spec)+"\n"))
	if err != nil {
		se := &StepError{"launch", host, err}
		var xe *sshexec.ExitError
		switch {
		case errors.As(err, &xe) && xe.Code == exitDefinite && xe.Signal == "":
			return job.Remote{}, se
		case errors.As(err, &xe) && xe.Code == exitDirExists && xe.Signal == "":
			return job.Remote{}, marked{job.ErrDirExists, se}
		case sshexec.MayHaveRun(err):
			// The launcher exited otherwise (killed by a signal, cut short)
			// or the session died after it was sent.
			return job.Remote{}, fmt.Errorf("%w: %w", job.ErrOutcomeUnknown, se)
		}
		return job.Remote{}, se // nothing reached the host
	}
	r, err := parseStarted(res.Stdout)
	if err != nil {
		return job.Remote{}, fmt.Errorf("%w: %w", job.ErrOutcomeUnknown, err)
	}
	return r, nil
}

// Abandon makes sure attempt j.Attempt of j never starts, unless it has
// already: it creates the attempt's directory when missing (so a launch
// still on its way finds it taken and fails) and takes the start gate
// (`mkdir go`, atomic, the same step run.sh takes before it starts the
// command). It reports true when the attempt is abandoned (nothing ran,
// nothing will), false when run.sh had passed the gate (it runs, or ran:
// Poll says which).
func Abandon(ctx context.Context, run Runner, host, cluster string, j job.Job) (bool, error) {
	script := jobdirFn + `umask 077
jobdir ` + q(dirOf(cluster, j)) + `
mkdir -p "$d" || exit 1
if mkdir "$d/go" 2>/dev/null; then : >"$d/abandoned"; echo abandoned
elif [ -e "$d/abandoned" ]; then echo abandoned
else echo started; fi`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return false, &StepError{"abandon", host, err}
	}
	switch out := strings.TrimSpace(string(res.Stdout)); out {
	case "abandoned":
		return true, nil
	case "started":
		return false, nil
	default:
		return false, fmt.Errorf("abandon on %s: unexpected answer %q", host, out)
	}
}

// marked is err, matching sentinel too (errors.Is), with err's message.
type marked struct{ sentinel, err error }

func (m marked) Error() string   { return m.err.Error() }
func (m marked) Unwrap() []error { return []error{m.sentinel, m.err} }

func parseStarted(out []byte) (job.Remote, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "dir ") {
		return job.Remote{}, fmt.Errorf("launch: unexpected answer %q", out)
	}
	r := job.Remote{Dir: strings.TrimPrefix(lines[0], "dir ")}
	if _, err := fmt.Sscanf(lines[1], "%d %d", &r.PID, &r.StartTicks); err != nil || r.PID <= 0 {
		return job.Remote{}, fmt.Errorf("launch: bad pid file %q", lines[1])
	}
	return r, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "; ")
}

// Poll checks jobs (all on host) in one session: the exit file when
// present, else whether the recorded pid is still the job (same start
// time, so a reused pid is not taken for it). A job whose directory has no
// pid file yet (claimed, launch unknown) is reported Lost only if the
// directory does not exist.
//
// Of an exit file it reads the first line (its first 300 bytes: an error
// text may be long) and the second line only when that is "runtime U0 U1"
// with two decimal numbers, so neither a long first line nor one that
// itself holds "runtime" hides or fakes it; a job that ended has
// Runtime U1 − U0 (0 when the line is absent, as in an exit file of a gssh
// before runtimes were recorded, malformed, or negative).
func Poll(ctx context.Context, run Runner, host, cluster string, jobs []job.Job) (map[job.ID]job.Status, error) {
	var in bytes.Buffer
	for _, j := range jobs {
		d := dirOf(cluster, j)
		if strings.ContainsAny(d, "\n") {
			return nil, fmt.Errorf("poll: job %d: directory name with a newline", j.ID)
		}
		pid, st := "-", "-"
		if j.Remote.PID > 0 {
			pid, st = strconv.Itoa(j.Remote.PID), strconv.FormatInt(j.Remote.StartTicks, 10)
		}
		fmt.Fprintf(&in, "%d %s %s %s %s\n", j.ID, attemptArg(j), pid, st, d)
	}
	script := aliveFn + procsFn + jobdirFn + exitfileFn + `
cid=` + q(cluster) + `
while read -r id att pid st dir; do
  [ "$att" = - ] && att=
  jobdir "$dir"
  if [ ! -d "$d" ]; then
    n=$(procs "$pid" "$st" "$id" "$cid" "$att" | sort -u | grep -vx "$$" | grep -c .)
    echo "$id missing $n $d"; continue
  fi
  if [ -e "$d/abandoned" ]; then echo "$id abandoned"; continue; fi
  if [ "$pid" = - ] && [ -s "$d/pid" ]; then read -r pid st <"$d/pid"; fi
  alive=
  if [ "$pid" != - ] && alive "$pid" "$st"; then alive=1; fi
  if [ -e "$d/cancelled" ] && [ -z "$alive" ]; then
    n=$(procs "$pid" "$st" "$id" "$cid" "$att" | sort -u | grep -vx "$$" | grep -c .)
    r=$(exitfile "$d/exit" 2>/dev/null | cut -d' ' -f1,2)
    echo "$id stopped $n ${r:-- -} $(head -c 20 "$d/cancelled")"
  elif [ -s "$d/exit" ] && [ -z "$alive" ]; then
    n=$(procs "$pid" "$st" "$id" "$cid" "$att" | sort -u | grep -vx "$$" | grep -c .)
    echo "$id exit $(stat -c %Y "$d/exit" 2>/dev/null || echo 0) $n $(exitfile "$d/exit")"
  elif [ -n "$alive" ]; then echo "$id running $pid $st $d"
  elif [ "$pid" = - ] && [ -d "$d/go" ] && ! grep -qsF -- "$d/run.sh" /proc/[0-9]*/cmdline; then echo "$id died"
  elif [ "$pid" = - ]; then echo "$id starting"
  else
    n=$(procs "$pid" "$st" "$id" "$cid" "$att" | sort -u | grep -vx "$$" | grep -c .)
    if [ "$n" -gt 0 ]; then echo "$id orphaned $n"; else echo "$id lost"; fi
  fi
done`
	res, err := run.Run(ctx, host, script, &in)
	if err != nil {
		return nil, &StepError{"poll", host, err}
	}
	return parsePoll(res.Stdout, host, ""), nil
}

// exitfileFn defines `exitfile FILE`, an exit file on one line for Poll:
// "U0 U1 FIRST", where U0 U1 are the values of its "runtime" line (the
// second line, when it is "runtime" and two numbers; "- -" otherwise) and
// FIRST its first line, cut at 300 bytes. The runtime values come first
// and are single words, so no text in FIRST can be taken for them.
const exitfileFn = `
exitfile() {
  LC_ALL=C awk 'NR == 1 { l = substr($0, 1, 300) }
    NR == 2 && /^runtime [0-9.]+ [0-9.]+$/ { r = $2 " " $3 }
    NR >= 2 { exit }
    END { if (r == "") r = "- -"; print r, l }' "$1"
}`

// parsePoll reads Poll's answer: one line per job, "ID WHAT ...". host
// names the worker in reasons; dir is the job's directory where the line
// does not give it.
func parsePoll(out []byte, host, dir string) map[job.ID]job.Status {
	m := map[job.ID]job.Status{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		id := job.ID(n)
		switch f[1] {
		case "running":
			st := job.Status{State: job.Running}
			if len(f) >= 4 {
				st.PID, _ = strconv.Atoi(f[2])
				st.StartTicks, _ = strconv.ParseInt(f[3], 10, 64)
			}
			if len(f) >= 5 {
				st.Dir = strings.Join(strings.Fields(line)[4:], " ")
			}
			m[id] = st
		case "stopped": // by gssh: cancelled, or past its walltime: ID stopped LEFTOVERS U0 U1 WHY
			st := job.Status{State: job.Cancelled, Reason: "cancelled"}
			why := ""
			if len(f) > 5 {
				why = f[5]
				st.Runtime = runtimeOf(f[3], f[4]) // the worker's walltime stop records it
			}
			switch why {
			case string(job.Timeout):
				st.State, st.Reason = job.Timeout, timeoutReason
			case markHangup:
				st.Reason = hangupReason
			case string(job.Preempting):
				st.Reason = "stopped for a preemption"
			}
			st.Orphans, _ = strconv.Atoi(f[2]) // a stop cut short
			m[id] = st
		case "died":
			m[id] = job.Status{State: job.Lost, Abandoned: true, Reason: "run.sh died before it recorded its pid: the command never started"}
		case "starting":
			m[id] = job.Status{State: job.Launching}
		case "missing": // ID missing LEFTOVERS DIR
			st := job.Status{State: job.Lost, Missing: true}
			d := dir
			if len(f) > 3 {
				st.Orphans, _ = strconv.Atoi(f[2])
				d = strings.Join(strings.Fields(line)[3:], " ")
			}
			st.Reason = fmt.Sprintf("its job directory %s on %s is gone (deleted by hand?): how the job ended is unknown", d, host)
			m[id] = st
		case "lost":
			m[id] = job.Status{State: job.Lost, Reason: "the job's processes are gone and it wrote no exit status (reboot, OOM killer, kill -9?)"}
		case "orphaned":
			n, _ := strconv.Atoi(f[2])
			m[id] = job.Status{State: job.Lost, Orphans: n, Reason: "the job's main process is gone and it wrote no exit status, but some of its processes still run"}
		case "abandoned":
			m[id] = job.Status{State: job.Lost, Abandoned: true, Reason: "the launch attempt was abandoned before it started"}
		case "exit": // ID exit MTIME LEFTOVERS U0 U1 FIRST-LINE...
			if len(f) < 7 {
				m[id] = job.Status{State: job.Failed, Reason: "unreadable exit file"}
				continue
			}
			st := exitStatus(strings.Join(f[6:], " "))
			st.Runtime = runtimeOf(f[4], f[5])
			if sec, err := strconv.ParseInt(f[2], 10, 64); err == nil && sec > 0 {
				st.EndedAt = time.Unix(sec, 0)
			}
			st.Orphans, _ = strconv.Atoi(f[3]) // left behind by the command
			m[id] = st
		}
	}
	return m
}

// runtimeOf is u1 − u0, two /proc/uptime readings ("12345.67"): 0 when
// either is not a plain decimal number (no sign, no exponent: "-" when the
// exit file has no runtime line) or u1 is before u0.
func runtimeOf(u0, u1 string) time.Duration {
	t0, ok0 := parseUptime(u0)
	t1, ok1 := parseUptime(u1)
	if !ok0 || !ok1 || t1 < t0 {
		return 0
	}
	return t1 - t0
}

// parseUptime reads one /proc/uptime value, seconds as digits with an
// optional fraction, exactly (no float rounding); false for anything
// else, values of 10⁹ s (31 years) or more included, so nothing overflows.
func parseUptime(s string) (time.Duration, bool) {
	sec, frac, _ := strings.Cut(s, ".")
	if sec == "" || len(sec) > 9 || strings.Trim(sec, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, false
	}
	d, err := time.ParseDuration(s + "s")
	return d, err == nil
}

// ExitStatus is how a job whose command exited with code ended, as Poll
// reports it from an exit file: succeeded, or failed with the code (and
// the signal of a code 128+N).
func ExitStatus(code int) job.Status { return exitStatus("exit " + strconv.Itoa(code)) }

// exitStatus reads the first line of an exit file: "exit N" or
// "error <why>" (its runtime line is Poll's: see runtimeOf).
func exitStatus(s string) job.Status {
	if why, ok := strings.CutPrefix(s, "error "); ok {
		return job.Status{State: job.Failed, Reason: why}
	}
	if s == string(job.Timeout) { // written by run.sh's own walltime stop
		return job.Status{State: job.Timeout, Reason: timeoutReason}
	}
	code, err := strconv.Atoi(strings.TrimPrefix(s, "exit "))
	if err != nil {
		return job.Status{State: job.Failed, Reason: "unreadable exit file: " + s}
	}
	st := job.Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0"}
	if code != 0 {
		st.State, st.Reason = job.Failed, fmt.Sprintf("exit status %d", code)
	}
	switch {
	case code > 128 && code < 128+65:
		st.Signal = sshexec.SignalName(code - 128)
		st.Reason = fmt.Sprintf("exit status %d: killed by signal %s", code, st.Signal)
	case code == 127: // the shell's code for a command it did not find
		st.Reason = "exit status 127 (command not found?)"
	case code == 126: // found, but it could not be run
		st.Reason = "exit status 126 (command not executable?)"
	}
	return st
}

// timeoutReason is the reason Poll gives a job stopped past its walltime
// (the controller records its own words, with the walltime).
const timeoutReason = "stopped: past its walltime"

// aliveFn defines alive PID TICKS: true when PID runs (not a zombie) and
// started at TICKS (/proc/PID/stat fields 3 and 22), so neither a reused
// pid nor an unreaped zombie passes for the job.
const aliveFn = `alive() { s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1; w=$2; set -- $s; [ "$1" != Z ] && [ "$1" != X ] && [ "${20}" = "$w" ]; }`

// procsFn defines procs PID TICKS JOBID CLUSTER ATTEMPT: the live
// processes of a job's attempt: the members of its session (when its
// leader PID is gone, or is still the job, never a reused pid), and every
// process whose environment carries its GSSH_JOB_ID and GSSH_CLUSTER_ID
// (children that started a session of their own) and, when ATTEMPT is
// not empty, its GSSH_ATTEMPT: a stray attempt left on a host that failed
// is stopped without touching the job's next attempt on the same host.
const procsFn = `
procs() {
  if [ "$1" != 0 ] && [ "$1" != - ] && { [ ! -r "/proc/$1/stat" ] || alive "$1" "$2"; }; then
    ps -e -o pid= -o sid= -o stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }'
  fi
  for f in $(grep -l -z -x "GSSH_JOB_ID=$3" /proc/[0-9]*/environ 2>/dev/null); do
    grep -q -z -x "GSSH_CLUSTER_ID=$4" "$f" 2>/dev/null || continue
    if [ -n "$5" ]; then grep -q -z -x "GSSH_ATTEMPT=$5" "$f" 2>/dev/null || continue; fi
    p=${f#/proc/}; echo "${p%/environ}"
  done
}`

// attemptArg is j's attempt as procs takes it: "-" for attempt 0 (a job
// launched before attempts were counted: its processes carry no
// GSSH_ATTEMPT, so any attempt matches).
func attemptArg(j job.Job) string {
	if j.Attempt <= 0 {
		return "-"
	}
	return strconv.Itoa(j.Attempt)
}

// DefaultGrace is how long Cancel waits between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// Cancel stops job j on host (gssh cancel): Stop, marked cancelled.
func Cancel(ctx context.Context, run Runner, host, cluster string, j job.Job, grace time.Duration) (job.Stopped, error) {
	return Stop(ctx, run, host, cluster, j, grace, job.Cancelled)
}

// Stop ends job j on host: SIGTERM to every process of the job's session
// (when the session leader is still the job: same start time) and to
// every process whose environment carries the job's GSSH_JOB_ID and
// GSSH_CLUSTER_ID (children that started their own session), then waits
// up to grace and sends SIGKILL to what is left (again, for a process
// forked meanwhile, until nothing is). It reports the processes it
// signalled.
//
// With why Cancelled, Timeout or Preempting (or the keeper's hangup) it
// first takes the job directory's end gate (see endGate) and marks the
// directory `cancelled`, holding why, so that Poll reports the job so and
// a run.sh not yet past its pid never runs the command. When the job had
// ended first — its command exited before the stop took the gate, or the
// worker's own walltime stop (run.sh's) marked it timeout — Stop marks
// nothing, ends only what the job left running, and reports how it ended
// in Stopped.Ended (as Poll would: an exit status with its run time, or
// Timeout), never a cancel that did not happen. With why "" (the
// leftovers of a job that ended) it marks nothing. With why Preempting it
// sends SIGTERM and returns at once, grace unused: the pass that preempts
// a job never waits on it, and a later pass sends SIGKILL (Stop with why
// "") to what is left after the job's grace. A grace of 0 (or less) sends
// SIGKILL at once, no SIGTERM first.
func Stop(ctx context.Context, run Runner, host, cluster string, j job.Job, grace time.Duration, why job.State) (job.Stopped, error) {
	res, err := run.Run(ctx, host, aliveFn+procsFn+jobdirFn+exitfileFn+`
jobdir `+q(dirOf(cluster, j))+stopSteps(cluster, j, grace, string(why)), nil)
	if err != nil {
		return job.Stopped{}, &StepError{"cancel", host, err}
	}
	return parseStopped(res.Stdout, host, dirOf(cluster, j)), nil
}

// parseStopped reads stopSteps' answer: "signalled N", after a line as
// Poll's (job id 0) when the job had ended before the stop.
func parseStopped(out []byte, host, dir string) job.Stopped {
	var s job.Stopped
	for _, line := range strings.Split(string(out), "\n") {
		fmt.Sscanf(line, "signalled %d", &s.Signalled)
	}
	if st, ok := parsePoll(out, host, dir)[0]; ok {
		st.Orphans = 0 // what it left running is Signalled
		s.Ended = &st
	}
	return s
}

// endGate is the shell of a stop that marks the job (why, quoted): the
// job directory's end gate decides, atomically, whether the stop or the
// command's own end (run.sh's fin) ended the job. Each side writes who it
// is to a file of its own and hard-links it to `end` (ln fails when `end`
// exists: the first one wins, on any POSIX filesystem, NFS included); the
// stop writes its `cancelled` mark only when it won. So a job whose
// command exited just before the stop keeps its exit status, and a job
// the stop marked is reported stopped even when its command exits in the
// instant after. It sets g_end to "exit" (the command ended first; also
// for a directory of a gssh before the gate that has an exit file and no
// mark), "timeout" (run.sh's own walltime stop marked it first, and why
// is another) or "" (the stop marks, or marked earlier, the job: it goes
// on). A mark already there from another stop is rewritten (a cancel of
// a preempting job), except by the keeper's hangup, which leaves it.
func endGate(why string) string {
	rewrite := `printf '%s\n' ` + q(why) + ` >"$d/cancelled"`
	if why == markHangup {
		rewrite = ":"
	}
	return `
g_end=
if [ ! -d "$d" ]; then :
elif [ -e "$d/cancelled" ]; then
  if [ "$(head -c 20 "$d/cancelled")" = timeout ] && [ ` + q(why) + ` != timeout ]; then g_end=timeout
  else ` + rewrite + `; fi
elif [ ! -e "$d/end" ] && [ -s "$d/exit" ]; then g_end=exit
else
  { printf '%s\n' ` + q(why) + ` >"$d/end.$$" && ln "$d/end.$$" "$d/end"; } 2>/dev/null; rm -f "$d/end.$$"
  if [ "$(head -n 1 "$d/end" 2>/dev/null)" = exit ]; then g_end=exit
  else printf '%s\n' ` + q(why) + ` >"$d/cancelled"; fi
fi
if [ "$g_end" = exit ]; then # run.sh writes its exit file just after the gate
  i=0; while [ ! -s "$d/exit" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
fi`
}

// stopSteps is Stop's script after `jobdir` (aliveFn, procsFn, jobdirFn
// and exitfileFn defined): with a why, the end gate (endGate); then it
// signals the job's processes (its pid from the pid file when j has none
// recorded) and prints "signalled N", after Poll's line for the job
// (with id 0) when the gate found it ended. For markHangup (an
// interactive job's keeper) it sends SIGHUP and SIGCONT a second before
// SIGTERM.
func stopSteps(cluster string, j job.Job, grace time.Duration, why string) string {
	return stopScript(cluster, j, grace, why, "", "")
}

// stopScript is stopSteps with two more steps, run only when the stop
// marked the job: marked, once the mark is written, and done, once its
// processes are gone (the worker's walltime stop says so in the log, and
// writes the exit file).
func stopScript(cluster string, j job.Job, grace time.Duration, why, marked, done string) string {
	gate, hup, report := "g_end=", "", ""
	switch why {
	case "":
	case markHangup:
		// A gssh cancel or a walltime that stopped the job first keeps
		// its word; the job's processes get the hangup a closed terminal
		// gives (SIGHUP, SIGCONT: editors save, shells write history)
		// and a second before SIGTERM.
		gate = endGate(why)
		hup = `[ -n "$list" ] && [ -z "$g_end" ] && { kill -HUP $list; kill -CONT $list; sleep 1; } 2>/dev/null`
	default:
		gate = endGate(why)
	}
	if why != "" {
		if marked != "" {
			gate += "\n[ -z \"$g_end\" ] && [ -d \"$d\" ] && { " + marked + "; }"
		}
		report = `
case $g_end in
exit) echo "0 exit $(stat -c %Y "$d/exit" 2>/dev/null || echo 0) 0 $(exitfile "$d/exit")" ;;
timeout) r=$(exitfile "$d/exit" 2>/dev/null | cut -d' ' -f1,2); echo "0 stopped 0 ${r:-- -} timeout" ;;
esac`
		if done != "" {
			report = "\n[ -z \"$g_end\" ] && [ -d \"$d\" ] && { " + done + "; }" + report
		}
	}
	termOnly := "" // a preemption: SIGTERM only, the grace is the later passes'
	if why == string(job.Preempting) {
		termOnly = `[ -z "$g_end" ] && { echo "signalled $n"; exit 0; }`
	}
	term := `[ -n "$list" ] && kill -TERM $list 2>/dev/null`
	if grace <= 0 && termOnly == "" {
		term = "" // no grace: SIGKILL at once (a preemption's grace is over: its SIGTERM went long ago)
	}
	steps := int(grace / (200 * time.Millisecond))
	return `
pid=` + strconv.Itoa(j.Remote.PID) + `; st=` + strconv.FormatInt(j.Remote.StartTicks, 10) + `
jid=` + q(strconv.FormatUint(uint64(j.ID), 10)) + `; cid=` + q(cluster) + `; att=` + q(strings.TrimPrefix(attemptArg(j), "-")) + `
` + gate + `
if [ "$pid" = 0 ] && [ -s "$d/pid" ]; then read -r pid st <"$d/pid"; fi
members() { procs "$pid" "$st" "$jid" "$cid" "$att"; }
list=$(members | sort -un | grep -vx "$$")
n=$(printf '%s\n' $list | grep -c .)
` + hup + `
` + term + `
` + termOnly + `
i=0
while [ $i -lt ` + strconv.Itoa(steps) + ` ]; do
  left=$(members | sort -un | grep -vx "$$")
  [ -z "$left" ] && break
  sleep 0.2; i=$((i+1))
done
left=$(members | sort -un | grep -vx "$$")
i=0 # a process forked just before the kill escapes the list: kill again what is left
while [ -n "$left" ] && [ $i -lt 10 ]; do
  kill -KILL $left 2>/dev/null; sleep 0.05
  left=$(members | sort -un | grep -vx "$$"); i=$((i+1))
done` + report + `
echo "signalled $n"`
}

// Logs writes the job's log to w: the last tail lines (all when tail < 0)
// and, with follow, what the job writes next until it ends (GNU tail
// --pid).
func Logs(ctx context.Context, s Streamer, host, cluster string, j job.Job, tail int, follow bool, w io.Writer) error {
	n := "+1"
	if tail >= 0 {
		n = strconv.Itoa(tail)
	}
	cmd := aliveFn + jobdirFn + `
jobdir ` + q(dirOf(cluster, j)) + `
[ -e "$d/log" ] || { echo "no log for this job on the worker ($d/log)" >&2; exit 1; }`
	if follow && j.Remote.PID > 0 {
		cmd += `
pid=` + strconv.Itoa(j.Remote.PID) + `; st=` + strconv.FormatInt(j.Remote.StartTicks, 10) + `
if alive "$pid" "$st"; then
  exec tail -n ` + n + ` -F --pid="$pid" "$d/log" 2>/dev/null
fi`
	}
	cmd += `
exec tail -n ` + n + ` "$d/log"`
	var stderr bytes.Buffer
	if err := s.Stream(ctx, host, cmd, nil, w, &stderr); err != nil {
		return &StepError{"logs", host, err}
	}
	return nil
}

// Workers does the worker side of jobs on the hosts they are placed on:
// Start, Poll, Cancel and Logs through each host's Shell. It is the real
// control.Workers.
type Workers struct {
	// Cluster is the state's cluster id (names job directories).
	Cluster string
	// Shell returns the runner of an inventory host, or an error naming a
	// host that is not in the inventory (any more).
	Shell func(host string) (Shell, error)
}

// Start launches j on j.Placement.Host; see Start.
func (w Workers) Start(ctx context.Context, j job.Job) (job.Remote, error) {
	sh, err := w.Shell(j.Placement.Host)
	if err != nil {
		return job.Remote{}, err
	}
	return Start(ctx, sh, j.Placement.Host, w.Cluster, j)
}

// Poll checks jobs, all placed on host; see Poll.
func (w Workers) Poll(ctx context.Context, host string, jobs []*job.Job) (map[job.ID]job.Status, error) {
	sh, err := w.Shell(host)
	if err != nil {
		return nil, err
	}
	js := make([]job.Job, len(jobs))
	for i, j := range jobs {
		js[i] = *j
	}
	m, err := Poll(ctx, sh, host, w.Cluster, js)
	return m, noContact(ctx, err)
}

// noContact marks err with job.ErrNoContact when it is a transport
// failure (an *sshexec.Error: the host was not reached, or stopped
// answering) and ctx was not cancelled; other errors are returned as they
// are.
func noContact(ctx context.Context, err error) error {
	var te *sshexec.Error
	if err == nil || ctx.Err() != nil || !errors.As(err, &te) {
		return err
	}
	return &contactError{err}
}

// contactError is an error of a host that did not answer: its text is the
// cause's, and it matches job.ErrNoContact as well as the cause.
type contactError struct{ err error }

func (e *contactError) Error() string   { return e.err.Error() }
func (e *contactError) Unwrap() []error { return []error{job.ErrNoContact, e.err} }

// Abandon makes sure j's attempt never starts, unless it has; see Abandon.
func (w Workers) Abandon(ctx context.Context, j job.Job) (bool, error) {
	sh, err := w.Shell(j.Placement.Host)
	if err != nil {
		return false, err
	}
	ok, err := Abandon(ctx, sh, j.Placement.Host, w.Cluster, j)
	return ok, noContact(ctx, err)
}

// Stop ends j where it runs; see Stop.
func (w Workers) Stop(ctx context.Context, j job.Job, grace time.Duration, why job.State) (job.Stopped, error) {
	sh, err := w.Shell(j.Placement.Host)
	if err != nil {
		return job.Stopped{}, err
	}
	n, err := Stop(ctx, sh, j.Placement.Host, w.Cluster, j, grace, why)
	return n, noContact(ctx, err)
}

// Logs writes j's log to out; see Logs.
func (w Workers) Logs(ctx context.Context, j job.Job, tail int, follow bool, out io.Writer) error {
	sh, err := w.Shell(j.Placement.Host)
	if err != nil {
		return err
	}
	return Logs(ctx, sh, j.Placement.Host, w.Cluster, j, tail, follow, out)
}
