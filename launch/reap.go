package launch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/reap"
)

// Reap kills targets on host (reap.Targets: orphans of gssh jobs, foreign
// processes where the inventory says so) in one session: SIGTERM, up to
// grace for them to end, then SIGKILL (a grace of 0 or less: SIGKILL at
// once). Before it signals a process it checks, on the worker, that the
// process is still the one the probe saw: the same pid with the same
// start time (/proc/PID/stat field 22, so a reused pid is never
// signalled), and that it still carries what made it a target: for an
// orphan of job J's attempt A, GSSH_JOB_ID=J, GSSH_CLUSTER_ID and
// GSSH_ATTEMPT=A in its environment (no GSSH_ATTEMPT for attempt 0), so
// that killing a stale attempt never kills the job's next attempt on the
// same host; for an orphan found by its session, that session (whose
// leader is gone or is still the job's: same start time), with no
// GSSH_JOB_ID and the login's own uid; for a foreign process, a readable
// environment with no GSSH_JOB_ID. A process that fails its check is
// reap.Gone and gets no signal.
//
// The targets travel on the session's stdin, never in the command line.
// It returns each target's outcome by pid; a target the worker did not
// answer for is missing from the map. The error is a *StepError (the
// host could not be reached, the script failed).
func Reap(ctx context.Context, run Runner, host string, targets []reap.Target, grace time.Duration) (map[int]reap.Outcome, error) {
	if len(targets) == 0 {
		return map[int]reap.Outcome{}, nil
	}
	var in strings.Builder
	for _, t := range targets {
		switch {
		case t.PID <= 0 || t.StartTicks < 0:
			continue
		case t.Kind == reap.KindForeign:
			fmt.Fprintf(&in, "%d %d foreign - - -\n", t.PID, t.StartTicks)
		case t.Session > 0:
			fmt.Fprintf(&in, "%d %d session %d %d -\n", t.PID, t.StartTicks, t.Session, max(t.LeaderTicks, 0))
		case t.Job > 0 && isHex(t.Cluster) && t.Attempt >= 0:
			fmt.Fprintf(&in, "%d %d env %d %s %d\n", t.PID, t.StartTicks, t.Job, t.Cluster, t.Attempt)
		}
	}
	res, err := run.Run(ctx, host, aliveFn+reapScript(grace), strings.NewReader(in.String()))
	if err != nil {
		return nil, &StepError{"reap", host, err}
	}
	out := map[int]reap.Outcome{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch o := reap.Outcome(f[1]); o {
		case reap.Terminated, reap.Killed, reap.Gone, reap.Denied, reap.Survived:
			out[pid] = o
		}
	}
	return out, nil
}

// isHex reports whether s is a cluster id as the state makes them: hex
// digits only (it reaches grep as a fixed string anyway).
func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// reapScript is Reap's script after aliveFn: it reads "PID TICKS MODE A
// B C" lines (numbers and a hex cluster id, checked again here) and
// prints "PID OUTCOME" for each.
func reapScript(grace time.Duration) string {
	steps := int(grace / (200 * time.Millisecond))
	term, ended := "1", string(reap.Terminated)
	if grace <= 0 {
		term, ended = "", string(reap.Gone) // no SIGTERM: one that ends before the SIGKILL ended on its own
	}
	return `
me=$(id -u)
# same PID TICKS MODE A B C: the process the probe saw, with its marks.
same() {
  pid=$1 st=$2 mode=$3 a=$4 b=$5 c=$6 f=/proc/$1/environ
  alive "$pid" "$st" || return 1
  case $mode in
  env)
    grep -q -z -x -F "GSSH_JOB_ID=$a" "$f" 2>/dev/null && grep -q -z -x -F "GSSH_CLUSTER_ID=$b" "$f" 2>/dev/null || return 1
    if [ "$c" = 0 ]; then ! grep -q -z '^GSSH_ATTEMPT=' "$f" 2>/dev/null; else grep -q -z -x -F "GSSH_ATTEMPT=$c" "$f" 2>/dev/null; fi ;;
  session)
    { : <"$f"; } 2>/dev/null || return 1
    ! grep -q -z '^GSSH_JOB_ID=' "$f" 2>/dev/null || return 1
    [ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$me" ] || return 1
    sid=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f4)
    [ "$sid" = "$a" ] || return 1
    [ ! -e "/proc/$a" ] || alive "$a" "$b" ;;
  foreign)
    { : <"$f"; } 2>/dev/null || return 1
    ! grep -q -z '^GSSH_JOB_ID=' "$f" 2>/dev/null ;;
  *) return 1 ;;
  esac
}
num() { case $1 in ''|*[!0-9]*) return 1 ;; esac; }
targets=
while read -r pid st mode a b c; do
  num "$pid" && num "$st" || continue
  case $mode in
  env) num "$a" && num "$c" || continue; case $b in ''|*[!0-9a-f]*) continue ;; esac ;;
  session) num "$a" && num "$b" || continue ;;
  esac
  if same "$pid" "$st" "$mode" "$a" "$b" "$c"; then targets="$targets $pid:$st"; else echo "$pid gone"; fi
done
sent=
if [ -n "` + term + `" ]; then
  for t in $targets; do
    pid=${t%:*}; st=${t#*:}
    if kill -TERM "$pid" 2>/dev/null; then sent="$sent $t"
    elif alive "$pid" "$st"; then echo "$pid denied"
    else echo "$pid gone"; fi
  done
  i=0
  while [ $i -lt ` + strconv.Itoa(steps) + ` ]; do
    left=
    for t in $sent; do alive "${t%:*}" "${t#*:}" && left="$left $t"; done
    [ -z "$left" ] && break
    sleep 0.2; i=$((i+1))
  done
else
  sent=$targets
fi
killed=
for t in $sent; do
  pid=${t%:*}; st=${t#*:}
  if ! alive "$pid" "$st"; then echo "$pid ` + ended + `"; continue; fi
  if kill -KILL "$pid" 2>/dev/null; then killed="$killed $t"
  elif alive "$pid" "$st"; then echo "$pid denied"
  else echo "$pid ` + ended + `"; fi
done
i=0
while [ $i -lt 40 ]; do
  left=
  for t in $killed; do alive "${t%:*}" "${t#*:}" && left="$left $t"; done
  [ -z "$left" ] && break
  sleep 0.05; i=$((i+1))
done
for t in $killed; do
  if alive "${t%:*}" "${t#*:}"; then echo "${t%:*} survived"; else echo "${t%:*} killed"; fi
done
`
}

// Reap kills targets on host; see Reap.
// On a run_as: sudo host, each job's leftovers are reaped as the job's
// owner (Target.User), one command per owner; foreign processes as the
// login.
func (w Workers) Reap(ctx context.Context, host string, targets []reap.Target, grace time.Duration) (map[int]reap.Outcome, error) {
	login, err := w.Shell(host)
	if err != nil {
		return nil, err
	}
	out := map[int]reap.Outcome{}
	for _, g := range byOwner(targets, w.sudo(host), func(t reap.Target) string {
		if t.Kind == reap.KindForeign {
			return ""
		}
		return t.User
	}) {
		sh := login
		if g.User != "" {
			sh = AsUser(login, g.User)
		}
		m, err := Reap(ctx, sh, host, g.Items, grace)
		if err != nil {
			return out, err
		}
		for pid, o := range m {
			out[pid] = o
		}
	}
	return out, nil
}
