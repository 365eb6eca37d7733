// Package launch runs jobs on workers over a Runner and keeps track of them
// there, with nothing installed on the worker but a POSIX shell and the
// usual tools (setsid, ps, tail, sha-free).
//
// Each job has a directory on the worker, ~/.gssh/jobs/<cluster>-<id>/
// (mode 0700), holding:
//
//	spec.json  the job record as submitted (for people reading the worker)
//	run.sh     the script gssh wrote: environment, workdir, the command
//	log        stdout and stderr of the job, as sbatch does by default
//	pid        "PID STARTTICKS" of run.sh, the job's session leader
//	exit       "exit N" or "error <why>", written atomically when it ends
//	cancelled  present when gssh cancel stopped the job
//
// run.sh is started with no PTY, all three fds redirected and in its own
// session (`setsid -f`), so closing the SSH connection neither hangs nor
// kills it (corpus 059-062). Every value gssh places in a remote command
// (workdir, env values, each argv word, paths) is quoted with
// shellescape.Quote; a single-string command is the user's own shell
// command and runs under `sh -c`, by contract.
package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

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

// q quotes one value for the remote POSIX shell.
func q(s string) string { return shellescape.Quote(s) }

// DirName is the job directory relative to the login user's home.
func DirName(cluster string, id job.ID) string {
	return fmt.Sprintf(".gssh/jobs/%s-%d", cluster, id)
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckSpec reports what in s cannot be launched: an empty command, an
// environment variable name that is not a shell identifier, or one that
// would override gssh's own (GSSH_*, CUDA_VISIBLE_DEVICES,
// CUDA_DEVICE_ORDER).
func CheckSpec(s job.Spec) error {
	if len(s.Argv) == 0 || (s.Shell && strings.TrimSpace(s.Argv[0]) == "") {
		return errors.New("empty command: give the command after --, e.g. gssh submit -- python train.py")
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

// RunScript returns run.sh for job j of cluster: it records its pid and
// start time, exports CUDA_VISIBLE_DEVICES (GPU or MIG UUIDs; an index for
// a GPU without UUID, with CUDA_DEVICE_ORDER=PCI_BUS_ID always set, corpus
// 063), GSSH_JOB_ID, GSSH_CLUSTER_ID and the --env values, changes to the
// workdir (failing the job with that reason when it does not exist), runs
// the command and writes its exit status to `exit` atomically.
func RunScript(cluster string, j job.Job) (string, error) {
	if err := CheckSpec(j.Spec); err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# gssh job %d of cluster %s. Written by gssh: every value below is quoted.\n", j.ID, cluster)
	w("d=$PWD\n")
	w("st=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)\n")
	w("printf '%%s %%s\\n' \"$$\" \"$st\" >\"$d/pid.tmp\" && mv -f \"$d/pid.tmp\" \"$d/pid\"\n")
	w("fin() { printf '%%s\\n' \"$1\" >\"$d/exit.tmp\" && mv -f \"$d/exit.tmp\" \"$d/exit\"; }\n")
	w("export CUDA_VISIBLE_DEVICES=%s\n", q(strings.Join(j.Placement.GPUs, ",")))
	w("export CUDA_DEVICE_ORDER=PCI_BUS_ID\n")
	w("export GSSH_JOB_ID=%s GSSH_CLUSTER_ID=%s\n", q(strconv.FormatUint(uint64(j.ID), 10)), q(cluster))
	for _, e := range j.Spec.Env {
		w("export %s=%s\n", e.Key, q(e.Value))
	}
	wd := workdir(j.Spec.Workdir)
	w("if ! cd %s 2>/dev/null; then\n", wd)
	w("  printf 'gssh: workdir %%s does not exist on %%s (or may not be entered)\\n' %s \"$(hostname)\" >&2\n", q(j.Spec.Workdir))
	w("  fin %s; exit 1\nfi\n", q("error workdir "+j.Spec.Workdir+" does not exist on the worker"))
	if j.Spec.Shell {
		w("sh -c %s </dev/null\n", q(j.Spec.Argv[0]))
	} else {
		words := make([]string, len(j.Spec.Argv))
		for i, a := range j.Spec.Argv {
			words[i] = q(a)
		}
		w("%s </dev/null\n", strings.Join(words, " "))
	}
	w("fin \"exit $?\"\n")
	return b.String(), nil
}

// workdir renders the workdir for `cd`: "~" and "~/x" mean the worker's
// home; everything else is quoted as it is.
func workdir(wd string) string {
	switch {
	case wd == "" || wd == "~":
		return `"$HOME"`
	case strings.HasPrefix(wd, "~/"):
		return `"$HOME"/` + q(wd[2:])
	}
	return q(wd)
}

// Start creates the job directory on host, writes spec.json and run.sh,
// starts run.sh detached (setsid -f, all fds redirected) and waits up to
// 5 s for it to record its pid. It fails when the directory exists already
// (the job was launched before: reconcile instead), when the home directory
// cannot be written (disk full, read-only), or when run.sh does not start.
func Start(ctx context.Context, run Runner, host, cluster string, j job.Job) (job.Remote, error) {
	script, err := RunScript(cluster, j)
	if err != nil {
		return job.Remote{}, err
	}
	spec, err := json.Marshal(j)
	if err != nil {
		return job.Remote{}, fmt.Errorf("launch: %w", err)
	}
	cmd := `set -e; umask 077
d="$HOME"/` + q(DirName(cluster, j.ID)) + `
mkdir -p "$HOME/.gssh/jobs"
if ! mkdir "$d" 2>/dev/null; then
  if [ -e "$d" ]; then echo "job directory $d exists already" >&2; else mkdir "$d"; fi; exit 1
fi
cat >"$d/run.sh"
printf '%s\n' ` + q(string(spec)) + ` >"$d/spec.json"
cd "$d"
if setsid -f true </dev/null >/dev/null 2>&1; then
  setsid -f sh "$d/run.sh" </dev/null >>"$d/log" 2>&1
else
  nohup sh "$d/run.sh" </dev/null >>"$d/log" 2>&1 &
fi
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
if [ ! -s "$d/pid" ]; then echo "run.sh did not start within 5s; see $d/log" >&2; exit 1; fi
printf 'dir %s\n' "$d"; cat "$d/pid"`
	res, err := run.Run(ctx, host, cmd, strings.NewReader(script))
	if err != nil {
		var xe *sshexec.ExitError
		if errors.As(err, &xe) {
			return job.Remote{}, fmt.Errorf("launch on %s: %s", host, strings.TrimSpace(firstLines(xe.Stderr, 3)))
		}
		return job.Remote{}, fmt.Errorf("launch on %s: %w", host, err)
	}
	return parseStarted(res.Stdout)
}

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

// Status is what Poll found of one job on its worker.
type Status struct {
	State    job.State // Running, Succeeded, Failed, Cancelled or Lost
	ExitCode *int
	Signal   string // when the exit status was 128+N: the signal N's name
	Reason   string
	// Missing: the job directory does not exist on the worker (a job
	// claimed but never launched, or a directory someone removed).
	Missing bool
	// Orphans counts the job's processes still running although its
	// session leader is gone without an exit status (kill -9 of run.sh):
	// they must be reaped before the job's GPUs are given to another.
	Orphans int
	// EndedAt is when the exit file was written (its mtime), when known.
	EndedAt time.Time
}

// Poll checks jobs (all on host) in one session: the exit file when
// present, else whether the recorded pid is still the job (same start
// time, so a reused pid is not taken for it). A job whose directory has no
// pid file yet (claimed, launch unknown) is reported Lost only if the
// directory does not exist.
func Poll(ctx context.Context, run Runner, host, cluster string, jobs []job.Job) (map[job.ID]Status, error) {
	var in bytes.Buffer
	for _, j := range jobs {
		d := j.Remote.Dir
		if d == "" {
			d = DirName(cluster, j.ID)
		}
		if strings.ContainsAny(d, "\n") {
			return nil, fmt.Errorf("poll: job %d: directory name with a newline", j.ID)
		}
		pid, st := "-", "-"
		if j.Remote.PID > 0 {
			pid, st = strconv.Itoa(j.Remote.PID), strconv.FormatInt(j.Remote.StartTicks, 10)
		}
		fmt.Fprintf(&in, "%d %s %s %s\n", j.ID, pid, st, d)
	}
	script := aliveFn + procsFn + `
cid=` + q(cluster) + `
while read -r id pid st d; do
  case $d in /*) ;; *) d="$HOME/$d" ;; esac
  if [ ! -d "$d" ]; then echo "$id missing"; continue; fi
  if [ "$pid" = - ] && [ -s "$d/pid" ]; then read -r pid st <"$d/pid"; fi
  alive=
  if [ "$pid" != - ] && alive "$pid" "$st"; then alive=1; fi
  if [ -s "$d/exit" ]; then echo "$id exit $(stat -c %Y "$d/exit" 2>/dev/null || echo 0) $(head -c 300 "$d/exit" | tr '\n' ' ')"
  elif [ -n "$alive" ]; then echo "$id running $pid $st"
  elif [ -e "$d/cancelled" ]; then echo "$id cancelled"
  elif [ "$pid" = - ]; then echo "$id starting"
  else
    n=$(procs "$pid" "$st" "$id" "$cid" | sort -u | grep -vx "$$" | grep -c .)
    if [ "$n" -gt 0 ]; then echo "$id orphaned $n"; else echo "$id lost"; fi
  fi
done`
	res, err := run.Run(ctx, host, script, &in)
	if err != nil {
		return nil, fmt.Errorf("poll %s: %w", host, err)
	}
	return parsePoll(res.Stdout), nil
}

func parsePoll(out []byte) map[job.ID]Status {
	m := map[job.ID]Status{}
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
			m[id] = Status{State: job.Running}
		case "cancelled":
			m[id] = Status{State: job.Cancelled, Reason: "cancelled"}
		case "starting":
			m[id] = Status{State: job.Launching}
		case "missing":
			m[id] = Status{State: job.Lost, Reason: "the job directory is gone from the worker", Missing: true}
		case "lost":
			m[id] = Status{State: job.Lost, Reason: "the job's processes are gone and it wrote no exit status (reboot, OOM killer, kill -9?)"}
		case "orphaned":
			n, _ := strconv.Atoi(f[2])
			m[id] = Status{State: job.Lost, Orphans: n, Reason: "the job's main process is gone and it wrote no exit status, but some of its processes still run"}
		case "exit":
			if len(f) < 4 {
				m[id] = Status{State: job.Failed, Reason: "unreadable exit file"}
				continue
			}
			st := exitStatus(strings.Join(f[3:], " "))
			if sec, err := strconv.ParseInt(f[2], 10, 64); err == nil && sec > 0 {
				st.EndedAt = time.Unix(sec, 0)
			}
			m[id] = st
		}
	}
	return m
}

// exitStatus reads the exit file: "exit N" or "error <why>".
func exitStatus(s string) Status {
	if why, ok := strings.CutPrefix(s, "error "); ok {
		return Status{State: job.Failed, Reason: why}
	}
	code, err := strconv.Atoi(strings.TrimPrefix(s, "exit "))
	if err != nil {
		return Status{State: job.Failed, Reason: "unreadable exit file: " + s}
	}
	st := Status{State: job.Succeeded, ExitCode: &code, Reason: "exit status 0"}
	if code != 0 {
		st.State, st.Reason = job.Failed, fmt.Sprintf("exit status %d", code)
	}
	if code > 128 && code < 128+65 {
		st.Signal = signalName(code - 128)
		st.Reason = fmt.Sprintf("exit status %d: killed by signal %s", code, st.Signal)
	}
	return st
}

func signalName(n int) string {
	names := map[int]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
		10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM"}
	if s, ok := names[n]; ok {
		return s
	}
	return strconv.Itoa(n)
}

// aliveFn defines alive PID TICKS: true when PID runs (not a zombie) and
// started at TICKS (/proc/PID/stat fields 3 and 22), so neither a reused
// pid nor an unreaped zombie passes for the job.
const aliveFn = `alive() { s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1; w=$2; set -- $s; [ "$1" != Z ] && [ "$1" != X ] && [ "${20}" = "$w" ]; }`

// procsFn defines procs PID TICKS JOBID CLUSTER: the live processes of a
// job: the members of its session (when its leader PID is gone, or is
// still the job, never a reused pid), and every process whose environment
// carries its GSSH_JOB_ID and GSSH_CLUSTER_ID (children that started a
// session of their own).
const procsFn = `
procs() {
  if [ "$1" != 0 ] && [ "$1" != - ] && { [ ! -r "/proc/$1/stat" ] || alive "$1" "$2"; }; then
    ps -e -o pid= -o sid= -o stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }'
  fi
  for f in $(grep -l -z -x "GSSH_JOB_ID=$3" /proc/[0-9]*/environ 2>/dev/null); do
    grep -q -z -x "GSSH_CLUSTER_ID=$4" "$f" 2>/dev/null && { p=${f#/proc/}; echo "${p%/environ}"; }
  done
}`

// DefaultGrace is how long Cancel waits between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// Cancel stops job j on host: SIGTERM to every process of the job's
// session (when the session leader is still the job: same start time) and
// to every process whose environment carries the job's GSSH_JOB_ID and
// GSSH_CLUSTER_ID (children that started their own session), then waits up
// to grace and sends SIGKILL to what is left. It marks the job directory
// `cancelled` and returns the number of processes it signalled.
func Cancel(ctx context.Context, run Runner, host, cluster string, j job.Job, grace time.Duration) (int, error) {
	d := j.Remote.Dir
	if d == "" {
		d = DirName(cluster, j.ID)
	}
	steps := int(grace / (200 * time.Millisecond))
	script := aliveFn + procsFn + `
d=` + q(d) + `; case $d in /*) ;; *) d="$HOME/$d" ;; esac
pid=` + strconv.Itoa(j.Remote.PID) + `; st=` + strconv.FormatInt(j.Remote.StartTicks, 10) + `
jid=` + q(strconv.FormatUint(uint64(j.ID), 10)) + `; cid=` + q(cluster) + `
if [ "$pid" = 0 ] && [ -s "$d/pid" ]; then read -r pid st <"$d/pid"; fi
[ -d "$d" ] && : >"$d/cancelled"
members() { procs "$pid" "$st" "$jid" "$cid"; }
list=$(members | sort -un | grep -vx "$$")
n=$(printf '%s\n' $list | grep -c .)
[ -n "$list" ] && kill -TERM $list 2>/dev/null
i=0
while [ $i -lt ` + strconv.Itoa(steps) + ` ]; do
  left=$(members | sort -un | grep -vx "$$")
  [ -z "$left" ] && break
  sleep 0.2; i=$((i+1))
done
left=$(members | sort -un | grep -vx "$$")
[ -n "$left" ] && kill -KILL $left 2>/dev/null
echo "signalled $n"`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return 0, fmt.Errorf("cancel on %s: %w", host, err)
	}
	var n int
	fmt.Sscanf(strings.TrimSpace(string(res.Stdout)), "signalled %d", &n)
	return n, nil
}

// Logs writes the job's log to w: the last tail lines (all when tail < 0)
// and, with follow, what the job writes next until it ends (GNU tail
// --pid).
func Logs(ctx context.Context, s Streamer, host, cluster string, j job.Job, tail int, follow bool, w io.Writer) error {
	d := j.Remote.Dir
	if d == "" {
		d = DirName(cluster, j.ID)
	}
	n := "+1"
	if tail >= 0 {
		n = strconv.Itoa(tail)
	}
	cmd := aliveFn + `
d=` + q(d) + `; case $d in /*) ;; *) d="$HOME/$d" ;; esac
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
	err := s.Stream(ctx, host, cmd, nil, w, &stderr)
	if err != nil {
		var xe *sshexec.ExitError
		if errors.As(err, &xe) {
			return fmt.Errorf("logs on %s: %s", host, strings.TrimSpace(xe.Stderr))
		}
		return fmt.Errorf("logs on %s: %w", host, err)
	}
	return nil
}
