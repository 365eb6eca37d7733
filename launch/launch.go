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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/gssh/gssh/job"
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
