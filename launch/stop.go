package launch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
)

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
