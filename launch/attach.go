package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sshexec"
)

// Interactor is a host's shell that can also run a command a person is at
// (sshexec.Pool and sshexec.Local are both).
type Interactor interface {
	Shell
	Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *sshexec.Terminal) error
}

// markHangup is what the keeper of an interactive job writes to its
// `cancelled` file when it stops the job because its gssh run went away.
const markHangup = "hangup"

// orphanGrace is what the processes an interactive job left behind
// when run.sh ended get between SIGTERM and SIGKILL (as
// control.DefaultOrphanGrace).
const orphanGrace = 2 * time.Second

// hangupReason is Poll's reason for a job stopped so.
const hangupReason = "its gssh run went away (terminal closed, killed, or the connection dropped); its processes were stopped"

// makeDir is the part of a launcher after `jobdir` and `fail` are
// defined: it unsets the GSSH_* of a job the launcher may itself run in,
// makes the attempt's directory (failing when it exists) and writes
// run.sh, its first n bytes of stdin.
func makeDir(cluster string, j job.Job, n string) string {
	return `unset GSSH_JOB_ID GSSH_CLUSTER_ID GSSH_ATTEMPT GSSH_ARRAY_JOB_ID GSSH_ARRAY_TASK_ID GSSH_ARRAY_TASK_COUNT GSSH_CPUS # a gssh run inside a job: run.sh is not that job's
umask 077
jobdir ` + q(DirName(cluster, j.ID, j.Attempt)) + `
mkdir -p "$HOME/.gssh/jobs" || fail "cannot make $HOME/.gssh/jobs"
if ! mkdir "$d" 2>/dev/null; then
  [ -e "$d" ] && fail "job directory $d exists already"
  mkdir "$d" || fail "cannot make $d"
fi
head -c ` + n + ` >"$d/run.sh" || fail "cannot write $d/run.sh (disk full?)"`
}

// ErrNotStarted wraps an Attach that ended before the job's command
// started: nothing ran, and the attempt never will.
var ErrNotStarted = errors.New("the interactive job did not start")

// Attach runs attempt j.Attempt of the interactive job j (gssh run: j has
// Spec.Interactive, and is claimed: launching, placed on host) in the
// foreground, over two sessions of host's shell:
//
//   - the keeper makes the attempt's directory and writes run.sh and
//     spec.json there as Start does; once run.sh has recorded its pid it
//     reports it (started is called with what the worker recorded: the
//     caller records the job running), and then it stays, reading its
//     stdin. When that ends (Attach returns, or the gssh run process died
//     and took its connection with it) and the job has written no exit
//     status, the keeper stops the job as Stop does, marked "hangup"
//     (Poll reports it cancelled, saying why): a dropped connection never
//     leaves the job's processes, nor so its GPUs, behind.
//   - the job itself, `exec sh run.sh` in the directory, with the
//     caller's stdin, stdout and stderr, on a pseudo-terminal when tty is
//     non-nil. run.sh is then the session leader of its SSH session (sshd
//     starts each session's command with setsid; sshexec.Local too).
//
// It returns the job session's outcome: nil (exit status 0), an
// *sshexec.ExitError with the command's exit status (or, when run.sh was
// killed, the signal), or an error. An error wrapping ErrNotStarted means
// nothing ran: the directory could not be made (an attempt abandoned by a
// pass, a cancel), run.sh did not record its pid within 10 s (the keeper
// then abandoned the attempt), or started returned an error (the job was
// cancelled meanwhile: the keeper stops it). Attach returns after the
// keeper is done, so a job that outlived its session is stopped by then.
func Attach(ctx context.Context, sh Interactor, host, cluster string, j job.Job, stdin io.Reader, stdout, stderr io.Writer, tty *sshexec.Terminal, started func(job.Remote) error) error {
	if j.Spec.Interactive == nil {
		return fmt.Errorf("job %d is not interactive: a pass launches it", j.ID)
	}
	script, err := RunScript(cluster, j)
	if err != nil {
		return err
	}
	spec, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	spec = append(spec, '\n')
	n, m := strconv.Itoa(len(script)), strconv.Itoa(len(spec))
	keeper := aliveFn + procsFn + jobdirFn + `fail() { echo "$1" >&2; exit ` + strconv.Itoa(exitDefinite) + `; }
` + makeDir(cluster, j, n) + `
head -c ` + m + ` >"$d/spec.json" || fail "cannot write $d/spec.json (disk full?)"
[ "$(wc -c <"$d/run.sh")" -eq ` + n + ` ] || fail "run.sh was cut short on the way (disk full?)"
printf 'gssh: job %s is interactive (gssh run): its output went to the terminal of gssh run\n' ` + q(strconv.FormatUint(uint64(j.ID), 10)) + ` >"$d/log"
printf 'dir %s\n' "$d"
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
if [ ! -s "$d/pid" ] && mkdir "$d/go" 2>/dev/null; then : >"$d/abandoned"; echo abandoned; exit 0; fi
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
printf 'pid %s\n' "$(cat "$d/pid")"
trap '' HUP PIPE INT TERM
exec 3<&0 </dev/null >/dev/null 2>&1
( read -r lpid lst <"$d/pid"
  while alive "$lpid" "$lst"; do sleep 0.2; done` + stopSteps(cluster, j, orphanGrace, "") + `
) 3<&- &
cat <&3 >/dev/null
[ -s "$d/exit" ] && exit 0` + stopSteps(cluster, j, DefaultGrace, markHangup)

	// The keeper outlives ctx by its stop at most: it must stop the job
	// when gssh run gives up too.
	kctx, kcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer kcancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var kerr error
	var kstderr strings.Builder
	var wg sync.WaitGroup
	wg.Go(func() {
		kerr = sh.Stream(kctx, host, keeper, inR, outW, &syncWriter{w: &kstderr})
		outW.Close()
	})
	finish := func() {
		inW.Close() // the keeper's cue: the job's session is over
		t := time.AfterFunc(DefaultGrace+30*time.Second, kcancel)
		defer t.Stop()
		wg.Wait()
		io.Copy(io.Discard, outR)
	}
	defer finish()
	go func() {
		inW.Write([]byte(script))
		inW.Write(spec)
	}()
	lines := bufio.NewScanner(outR)
	dir, ok := "", lines.Scan()
	if ok {
		dir, ok = strings.CutPrefix(lines.Text(), "dir ")
	}
	if !ok {
		finish()
		return fmt.Errorf("%w: %w", ErrNotStarted, &StepError{"attach", host, keeperErr(kerr, kstderr.String())})
	}
	jerr := make(chan error, 1)
	cmd := "cd " + q(dir) + " && exec sh ./run.sh"
	go func() { jerr <- sh.Interact(ctx, host, cmd, stdin, stdout, stderr, tty) }()
	var r job.Remote
	if lines.Scan() {
		if pidLine, ok := strings.CutPrefix(lines.Text(), "pid "); ok {
			r, err = parseStarted([]byte("dir " + dir + "\n" + pidLine))
		} else {
			err = errors.New(lines.Text())
		}
	} else {
		err = keeperErr(kerr, kstderr.String())
	}
	if err == nil {
		err = started(r)
	}
	if err != nil {
		// The job's session ends by itself: run.sh finds the gate taken,
		// or the keeper stops it.
		finish()
		<-jerr
		return fmt.Errorf("%w: %w", ErrNotStarted, &StepError{"attach", host, err})
	}
	return <-jerr
}

// keeperErr is why the keeper ended early: its own error, or its stderr.
func keeperErr(err error, stderr string) error {
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(stderr); s != "" {
		return errors.New(firstLines(s, 3))
	}
	return errors.New("the keeper session ended early")
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Signal sends signal sig (a name without SIG: "INT", "TERM") to the
// process group of j's session leader on host, when that leader is still
// the job (same start time): Ctrl-C at gssh run, passed through. It
// reports whether the job was there to signal.
func Signal(ctx context.Context, run Runner, host string, j job.Job, sig string) (bool, error) {
	if j.Remote.PID <= 0 {
		return false, nil
	}
	switch sig {
	case "INT", "TERM", "HUP", "QUIT", "KILL", "USR1", "USR2":
	default:
		return false, fmt.Errorf("signal %q: not one gssh passes on", sig)
	}
	script := aliveFn + `
if alive ` + strconv.Itoa(j.Remote.PID) + ` ` + strconv.FormatInt(j.Remote.StartTicks, 10) + `; then kill -` + sig + ` -- -` + strconv.Itoa(j.Remote.PID) + ` 2>/dev/null; echo sent; else echo gone; fi`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return false, &StepError{"signal", host, err}
	}
	return strings.TrimSpace(string(res.Stdout)) == "sent", nil
}
