package launch

import (
	"bufio"
	"cmp"
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
// makes the attempt's directory (failing with exitDirExists when it
// exists) and writes
// run.sh, its first n bytes of stdin.
func makeDir(cluster string, j job.Job, n string) string {
	return `unset GSSH_JOB_ID GSSH_CLUSTER_ID GSSH_ATTEMPT GSSH_ARRAY_JOB_ID GSSH_ARRAY_TASK_ID GSSH_ARRAY_TASK_COUNT GSSH_CPUS # a gssh run inside a job: run.sh is not that job's
umask 077
jobdir ` + q(DirName(cluster, j.ID, j.Attempt)) + `
mkdir -p "$HOME/.gssh/jobs" || fail "cannot make $HOME/.gssh/jobs"
if ! mkdir "$d" 2>/dev/null; then
  [ -e "$d" ] && { echo "job directory $d exists already" >&2; exit ` + strconv.Itoa(exitDirExists) + `; }
  mkdir "$d" || fail "cannot make $d"
fi
head -c ` + n + ` >"$d/run.sh" || fail "cannot write $d/run.sh (disk full?)"`
}

// ErrNotStarted wraps an Attach that ended before the job's command
// started: nothing ran, and the attempt never will.
var ErrNotStarted = errors.New("the interactive job did not start")

// Default timings of Attach (see Session).
const (
	DefaultPidWait    = 60 * time.Second
	DefaultBeatEvery  = 5 * time.Second
	DefaultStaleAfter = 60 * time.Second
)

// Session is the person's side of an interactive job: its streams, its
// terminal (nil: none), and what Attach tells of the job's start.
type Session struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            *sshexec.Terminal
	// Started is called with what the worker recorded once run.sh has
	// started (the caller records the job running); an error from it
	// stops the job.
	Started func(job.Remote) error
	// PidWait is how long Attach waits for run.sh to record its pid once
	// the job's session is open (its login shell's start-up included)
	// before it abandons the attempt (0: DefaultPidWait). BeatEvery is how
	// often Attach tells the keeper that gssh run is still there;
	// StaleAfter, how long the keeper goes without a word before it takes
	// gssh run for cut off (a connection gone silent, gssh run stopped
	// with Ctrl-Z) and stops the job (0: the defaults; whole seconds).
	PidWait, BeatEvery, StaleAfter time.Duration
}

// Attach runs attempt j.Attempt of the interactive job j (gssh run: j has
// Spec.Interactive, and is claimed: launching, placed on host) in the
// foreground, over two sessions of host's shell:
//
//   - the keeper makes the attempt's directory and writes run.sh and
//     spec.json there as Start does; once run.sh has recorded its pid it
//     reports it (s.Started is called with what the worker recorded);
//     then it stays. Attach writes it a line every s.BeatEvery, and "end" once the job's session has ended
//     with an exit status. When its stdin ends (Attach returns, or the
//     gssh run process died and took its connection with it), or no line
//     came for s.StaleAfter (the connection went silent: the beat file's
//     mtime unchanged over that many of its own one-second looks, so no
//     clock is compared with another's), and the job has
//     written no exit status, the keeper stops the job as Stop does,
//     marked "hangup" (Poll reports it cancelled, saying why; SIGHUP
//     first, as a closed terminal gives): a dropped connection never
//     leaves the job's processes, nor so its GPUs, behind. After "end" it
//     only stops what the job left behind (Poll then finds it lost, as
//     any job whose run.sh was killed). What the command leaves running
//     when run.sh ends is stopped too, so that the session ends with it.
//   - the job itself, `exec sh run.sh` in the directory, with s's
//     streams, on a pseudo-terminal when s.TTY is non-nil. run.sh is then the session leader of its SSH session (sshd
//     starts each session's command with setsid; sshexec.Local too).
//
// It returns the job session's outcome: nil (exit status 0), an
// *sshexec.ExitError with the command's exit status (or, when run.sh was
// killed, the signal), or an error. An error wrapping ErrNotStarted means
// nothing ran: the directory could not be made (an attempt abandoned by a
// pass, a cancel), the job's session could not start (a terminal refused,
// the host unreachable), run.sh did not record its pid within s.PidWait
// (the keeper then abandoned the attempt), or s.Started returned an error
// (the job was cancelled meanwhile: the keeper stops it). Attach returns
// after the keeper is done, so a job that outlived its session is stopped
// by then.
func Attach(ctx context.Context, sh Interactor, host, cluster string, j job.Job, s Session) error {
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
	s.PidWait = cmp.Or(s.PidWait, DefaultPidWait)
	s.BeatEvery = cmp.Or(s.BeatEvery, DefaultBeatEvery)
	s.StaleAfter = cmp.Or(s.StaleAfter, DefaultStaleAfter)
	keeper := keeperScript(cluster, j, len(script), len(spec), s.StaleAfter)

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
		kerr = sh.Stream(kctx, host, keeper, inR, outW, &kstderr) // read only once Stream returned: outW is closed after it
		outW.Close()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, outR)
	}()
	stopBeats := make(chan struct{})
	var once sync.Once
	keeperWait := DefaultGrace + 30*time.Second // it may have the job to stop
	finish := func() {
		once.Do(func() {
			close(stopBeats)
			inW.Close() // the keeper's cue: the job's session is over
			t := time.AfterFunc(keeperWait, kcancel)
			defer t.Stop()
			wg.Wait()
		})
	}
	defer finish()
	go func() {
		if _, err := inW.Write(append([]byte(script), spec...)); err != nil {
			return
		}
		tick := time.NewTicker(s.BeatEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if _, err := inW.Write([]byte("beat\n")); err != nil {
					return
				}
			case <-stopBeats:
				return
			}
		}
	}()
	notStarted := func(err error) error {
		finish()
		return fmt.Errorf("%w: %w", ErrNotStarted, &StepError{"attach", host, err})
	}
	line, ok := <-lines
	dir, isDir := strings.CutPrefix(line, "dir ")
	if !ok || !isDir {
		finish()
		return notStarted(keeperErr(kerr, kstderr.String()))
	}
	jerr := make(chan error, 1)
	cmd := "cd " + q(dir) + " && exec sh ./run.sh"
	go func() { jerr <- sh.Interact(ctx, host, cmd, s.Stdin, s.Stdout, s.Stderr, s.TTY) }()
	var r job.Remote
	pidOf := func(line string, ok bool) (job.Remote, error) {
		pidLine, isPid := strings.CutPrefix(line, "pid ")
		switch {
		case !ok:
			return job.Remote{}, keeperErr(kerr, kstderr.String())
		case !isPid:
			return job.Remote{}, errors.New(line)
		}
		return parseStarted([]byte("dir " + dir + "\n" + pidLine))
	}
	var res error
	done := false // the job's session has ended: res
	select {
	case line, ok := <-lines:
		r, err = pidOf(line, ok)
	case res = <-jerr:
		// The job's session ended first: a short job (its pid is on the
		// keeper's way), or one whose run.sh never started (a terminal
		// refused, a session refused; the keeper takes the start gate as
		// its stdin ends).
		done = true
		select {
		case line, ok := <-lines:
			r, err = pidOf(line, ok)
		case <-time.After(2 * time.Second):
			err = res
			if err == nil {
				err = errors.New("the job's session ended before run.sh started")
			}
		}
	case <-time.After(s.PidWait):
		err = fmt.Errorf("run.sh recorded no pid within %s of its session opening: this attempt is abandoned", s.PidWait)
	}
	if err == nil {
		err = s.Started(r)
	}
	if err != nil {
		// The job's session ends by itself: run.sh finds the gate taken,
		// or the keeper stops it.
		finish()
		if !done {
			<-jerr
		}
		return notStarted(err)
	}
	if !done {
		res = <-jerr
	}
	var xe *sshexec.ExitError
	if res == nil || errors.As(res, &xe) {
		// Ended with an exit status: what is left is the job's leftovers,
		// not a hangup.
		wrote := make(chan struct{})
		go func() { inW.Write([]byte("end\n")); close(wrote) }()
		select {
		case <-wrote:
		case <-time.After(5 * time.Second):
		}
		keeperWait = orphanGrace + 10*time.Second // at most the leftovers to stop
	}
	return res
}

// keeperScript is the keeper's script for job j (see Attach): run.sh is
// the first n bytes of its stdin, spec.json the next m.
func keeperScript(cluster string, j job.Job, n, m int, stale time.Duration) string {
	return `trap '' HUP PIPE INT TERM
` + aliveFn + claimsFn + procsFn + jobdirFn + exitfileFn + `
fail() { echo "$1" >&2; exit ` + strconv.Itoa(exitDefinite) + `; }
` + makeDir(cluster, j, strconv.Itoa(n)) + `
head -c ` + strconv.Itoa(m) + ` >"$d/spec.json" || fail "cannot write $d/spec.json (disk full?)"
[ "$(wc -c <"$d/run.sh")" -eq ` + strconv.Itoa(n) + ` ] || fail "run.sh was cut short on the way (disk full?)"` + claimSteps(j, cluster) + `
printf 'gssh: job %s is interactive (gssh run): its output went to the terminal of gssh run\n' ` + q(strconv.FormatUint(uint64(j.ID), 10)) + ` >"$d/log"
: >"$d/beat"
printf 'dir %s\n' "$d"
exec 3<&0 </dev/null
(
  exec 3<&-
  while [ ! -s "$d/pid" ]; do [ -e "$d/abandoned" ] && exit 0; sleep 0.05; done
  printf 'pid %s\n' "$(cat "$d/pid")"
  exec >/dev/null 2>&1` + claimPid + `
  read -r lpid lst <"$d/pid"
  k=0; lb=; idle=0
  while alive "$lpid" "$lst"; do
    k=$((k+1))
    if [ $((k % 5)) = 0 ]; then
      # A second or more since the last look: the beat file unchanged
      # (its full mtime, only ever compared with itself, never with this
      # host's clock: a home on NFS has the server's times) for the
      # stale time means the connection went silent.
      b=$(stat -c %y "$d/beat" 2>/dev/null)
      if [ "$b" != "$lb" ]; then lb=$b; idle=0; else idle=$((idle+1)); fi
      [ $idle -ge ` + strconv.Itoa(int(max(stale/time.Second, 1))) + ` ] && {` + stopSteps(cluster, j, DefaultGrace, markHangup) + `
        kill -KILL $$ # the keeper's reader: its connection is gone too
        exit 0
      }
    fi
    sleep 0.2
  done` + stopSteps(cluster, j, orphanGrace, "") + `
) &
ended=
while read -r word <&3; do
  case $word in end) ended=1 ;; *) : >"$d/beat" ;; esac
done
exec >/dev/null 2>&1
if [ ! -s "$d/pid" ] && mkdir "$d/go" 2>/dev/null; then : >"$d/abandoned"; exit 0; fi
[ -s "$d/exit" ] && exit 0
if [ -n "$ended" ]; then :` + stopSteps(cluster, j, orphanGrace, "") + `
else :` + stopSteps(cluster, j, DefaultGrace, markHangup) + `
fi`
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

// Hangup stops interactive job j on host as its keeper does when its
// gssh run went away (Stop, marked so that Poll says why, SIGHUP first):
// for a gssh run whose session dropped while the host can still be
// reached.
func Hangup(ctx context.Context, run Runner, host, cluster string, j job.Job) (job.Stopped, error) {
	return Stop(ctx, run, host, cluster, j, DefaultGrace, markHangup)
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
if alive ` + strconv.Itoa(j.Remote.PID) + ` ` + strconv.FormatInt(j.Remote.StartTicks, 10) + `; then
  if kill -s ` + sig + ` -- -` + strconv.Itoa(j.Remote.PID) + ` 2>/dev/null; then echo sent; else echo gone; fi
else echo gone; fi`
	res, err := run.Run(ctx, host, script, nil)
	if err != nil {
		return false, &StepError{"signal", host, err}
	}
	return strings.TrimSpace(string(res.Stdout)) == "sent", nil
}
