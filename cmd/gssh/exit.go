package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// Exit statuses: gssh's own, the contract each command's --help lists
// (its exitLines say which it returns). exitStatus maps errors to them.
const (
	exitOK       = 0
	exitUsage    = 1   // usage or input error
	exitPartial  = 2   // some hosts could not be reached or probed
	exitState    = 3   // state busy or unreadable, or the pass lock held
	exitTimedOut = 124 // a --timeout ran out (gssh drain --wait), as timeout(1) exits
	exitSignal   = 130 // interrupted (SIGINT), as shells report 128+2
	exitTerm     = 143 // terminated (SIGTERM), 128+15
	// exitGssh is the exit status of the commands that pass a job's exit
	// status through (wait, run, submit --wait, logs -f) when gssh itself
	// failed: 255, as ssh exits when it, not the remote command, failed.
	exitGssh = 255
)

// The exit statuses of a job that the commands passing one through
// return (see jobExit): data, not gssh's own.
const (
	jobExitFailed  = 1   // it ended without a status of its own: cancelled, lost, never started
	jobExitSignal  = 128 // + N: signal N ended it, as shells report it
	jobExitTimeout = 124 // stopped at its walltime, as timeout(1) exits
)

// errInterrupted ends a command cut short by Ctrl-C or SIGTERM: nothing
// half-probed is printed.
var errInterrupted = errors.New("interrupted")

// quiet is an error whose words are out already (each job's or host's
// printed as it came, as a warning): Main prints nothing more.
type quiet interface {
	error
	quiet()
}

// several is the errors of the jobs one command acted on (hold, cancel,
// ...), each printed as it came: its exit status is the highest of
// theirs.
type several struct{ errs []error }

func (s *several) Error() string   { return errors.Join(s.errs...).Error() }
func (s *several) Unwrap() []error { return s.errs }
func (*several) quiet()            {}

// passProblems is what went wrong in a scheduling pass that ran, printed
// as warnings: exit 3 when the state file failed under it (a write during
// the pass), else 2 (hosts and jobs).
type passProblems struct{ errs []error }

func (p *passProblems) Error() string   { return errors.Join(p.errs...).Error() }
func (p *passProblems) Unwrap() []error { return p.errs }
func (*passProblems) quiet()            {}

// timedOut is a --timeout that ran out (gssh drain --wait): exit 124.
type timedOut struct{ err error }

func (t *timedOut) Error() string { return t.err.Error() }
func (t *timedOut) Unwrap() error { return t.err }

// stateProblems is a state file found to have problems (gssh state
// check): exit 3.
type stateProblems struct{ err error }

func (s *stateProblems) Error() string { return s.err.Error() }
func (s *stateProblems) Unwrap() error { return s.err }

// jobStatus is a job's exit status that a command passes through (gssh
// wait, run, submit --wait, logs -f): data from the job (see jobExit),
// 1 to 255; the command printed how the job ended already.
type jobStatus struct {
	err  error
	code int
}

func (j *jobStatus) Error() string { return j.err.Error() }
func (j *jobStatus) Unwrap() error { return j.err }
func (*jobStatus) quiet()          {}

// exitStatus is the process exit status of cmd (the command that ran;
// nil for none) ending with err, interrupted by the signal stopped (nil:
// none): the one place that maps errors to exit statuses. A command that
// passes a job's status through exits 255 for its own failures.
func exitStatus(cmd *cobra.Command, err error, stopped os.Signal) int {
	code := exitCode(err)
	var js *jobStatus
	switch {
	case code == exitSignal && stopped == syscall.SIGTERM:
		return exitTerm // as a shell reports a process SIGTERM ended
	case code != exitSignal && err != nil && passesStatus(cmd) && !errors.As(err, &js):
		return exitGssh // a job's status was to come out; gssh's own failure is 255
	}
	return code
}

// exitCode maps an error to gssh's exit status, signals and passed
// statuses aside (see exitStatus).
func exitCode(err error) int {
	var (
		js  *jobStatus
		sev *several
		pp  *passProblems
		to  *timedOut
		sp  *stateProblems
		pe  *service.PartialError
		fe  *state.FileError
	)
	var re *service.RemoteError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &re) && re.Fault.Code > 0:
		return re.Fault.Code // gssh serve's error: the status it mapped to there
	case errors.As(err, &js):
		return js.code
	case errors.As(err, &sev):
		code := exitOK
		for _, e := range sev.errs {
			code = max(code, exitCode(e))
		}
		return code
	case errors.As(err, &pp):
		for _, p := range pp.errs {
			if errors.As(p, &fe) || errors.Is(p, state.ErrBusy) {
				return exitState
			}
		}
		return exitPartial
	case errors.As(err, &to):
		return exitTimedOut
	case errors.As(err, &sp):
		return exitState
	case errors.As(err, &pe):
		return exitPartial
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return exitSignal
	case errors.Is(err, service.ErrNotRoot):
		return exitUsage // gssh lab init run as a user
	case errors.As(err, &fe), errors.Is(err, state.ErrBusy), errors.Is(err, service.ErrPassBusy), errors.Is(err, labfile.ErrDir),
		errors.Is(err, service.ErrRestoreRefused), errors.Is(err, service.ErrServing), errors.Is(err, service.ErrServeSetup),
		errors.Is(err, service.ErrServeDown), errors.Is(err, service.ErrServeGone):
		return exitState
	case errors.Is(err, sshexec.ErrUnreachable), errors.Is(err, sshexec.ErrTimeout), errors.Is(err, sshexec.ErrAuth),
		errors.Is(err, sshexec.ErrHostKey), errors.Is(err, sshexec.ErrUnknownHostKey), errors.Is(err, sshexec.ErrNoOutcome):
		return exitPartial // a host could not be reached (logs, cancel)
	}
	return exitUsage
}

// printsError reports whether Main prints err: not when its words are
// out already, nor for an interrupted command.
func printsError(err error) bool {
	var q quiet
	var pe *service.PartialError
	return err != nil && !errors.As(err, &q) && !errors.As(err, &pe) && !errors.Is(err, errInterrupted)
}

// passesStatus reports whether cmd passes a job's exit status through
// (gssh wait, run, logs -f, submit --wait), so that its own failures
// exit 255.
func passesStatus(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	if cmd.Name() == "wait" || cmd.Name() == "run" {
		return true
	}
	if f := cmd.Flags().Lookup("follow"); cmd.Name() == "logs" && f != nil && f.Changed {
		return true
	}
	w := cmd.Flags().Lookup("wait")
	return cmd.Name() == "submit" && w != nil && w.Changed
}

// jobsStatus is the exit status of ended jobs: the first one's that did
// not succeed (see jobExit), as a *jobStatus; nil when all succeeded.
func jobsStatus(jobs []job.Job) error {
	for _, j := range jobs {
		if code := jobExit(j); code != 0 {
			return &jobStatus{err: fmt.Errorf("job %s %s: %s", j.Ref(), j.State, j.Reason), code: code}
		}
	}
	return nil
}

// jobExit is the exit status an ended job passes through: its own, 128 +
// its signal's number, 124 at its walltime (as timeout(1) exits), else 1.
func jobExit(j job.Job) int {
	switch {
	case j.State == job.Succeeded:
		return 0
	case j.Signal != "":
		if n := signalNumber(j.Signal); n > 0 {
			return jobExitSignal + n
		}
	case j.ExitCode != nil && *j.ExitCode > 0 && *j.ExitCode < 256:
		return *j.ExitCode
	case j.State == job.Timeout:
		return jobExitTimeout
	}
	return jobExitFailed
}

// runExit is what gssh run exits with: 124 for a job stopped at its
// walltime (as timeout(1)), else the command's own exit status as its
// session reported it (128 + N for a signal), else the recorded job's
// (see jobExit), else 255 (nothing came).
func runExit(res service.RunResult) int {
	switch {
	case res.Job.State == job.Timeout:
		return jobExitTimeout
	case res.Exit != nil:
		return *res.Exit
	case res.Job.State.Terminal():
		return jobExit(res.Job)
	}
	return exitGssh
}

// signalNumber is the number of the signal named like "TERM" (as
// sshexec.SignalName gives it) or "SIGKILL", or given as a number; 0 when
// unknown.
func signalNumber(name string) int {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < jobExitSignal {
		return n
	}
	return int(unix.SignalNum("SIG" + strings.TrimPrefix(strings.ToUpper(name), "SIG")))
}

// exitLogEnv names the test hook of the exit statuses: when it names a
// file, Main appends a line "COMMAND\tCODE" to it as it returns (COMMAND
// the command path, "gssh ps"; CODE the exit status, or "job" for a job's
// status passed through), so that a test can check each command's help
// lists what it returns (see exits_test.go). Only the tests set it; a line
// that cannot be written is dropped.
const exitLogEnv = "GSSH_TEST_EXIT_LOG"

// logExit appends cmd's exit to the file path names (see exitLogEnv).
func logExit(path string, cmd *cobra.Command, err error, code int) {
	if path == "" || cmd == nil {
		return
	}
	what := strconv.Itoa(code)
	var js *jobStatus
	if errors.As(err, &js) && code == js.code {
		what = exitJobWord
	}
	f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if ferr != nil {
		return
	}
	fmt.Fprintf(f, "%s\t%s\n", cmd.CommandPath(), what) // one short write: concurrent lines never mix
	f.Close()
}
