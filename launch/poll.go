package launch

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec"
)

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
