package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec"
)

type runOptions struct {
	submitOptions
	pty   bool
	quiet bool
}

func newRunCmd(a *app, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] [--pty] -- CMD [ARGS...]",
		Short: "Run a job in the foreground, with your terminal, once it has GPUs (srun)",
		Long: `Queue a job as gssh submit does, wait for its GPUs, then run it in the
foreground, as srun does: its output comes to your terminal, your input
goes to it, Ctrl-C reaches it (three within 2 s cancel it), and gssh run
exits with its status. --pty gives it a terminal (shells, editors; ~. leaves
and cancels). When gssh run dies or its connection drops, the job is
stopped and its GPUs freed. The flags are submit's, less --array, --hold,
--wait, --dry-run and --json. More: docs/jobs.md.`,
		Example: `  gssh run -- nvidia-smi
  gssh run --pty --gpus 2 --mem 20G -- bash
  gssh run --host gpu01 -- python eval.py < inputs.txt > scores.txt`,
		Annotations: exits(exitLine{exitJob, fmt.Sprintf(`the job's, as ssh passes it: its exit status, %d + N when signal N
ended it, %d at its walltime; %d when it ended without running`, jobExitSignal, jobExitTimeout, jobExitFailed)},
			exitLine{exitGssh, "gssh itself failed (a bad flag, the state unreadable, the connection lost)"},
			exitLine{exitSignal, "interrupted (Ctrl-C while it waits, three Ctrl-C, ~.): the job is cancelled"},
			exitLine{exitTerm, "terminated (SIGTERM): the job is cancelled"}),
		RunE: func(c *cobra.Command, args []string) error {
			opts.argv = args
			if err := checkMemFlags(c, &opts.submitOptions); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runRun(c.Context(), a, opts)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		for _, f := range []string{"array", "hold", "wait", "interval", "dry-run", "json", "preemptible", "signal-grace", "requeue"} {
			if strings.HasPrefix(err.Error(), "unknown flag: --"+f) {
				err = fmt.Errorf("%w: gssh run has no --%s (it runs one job in the foreground); gssh submit --%s does", err, f, f)
			}
		}
		return err
	})
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	addJobFlags(fl, &opts.submitOptions)
	fl.BoolVar(&opts.pty, "pty", false, "run the command on a terminal of its own (interactive programs, shells), as srun --pty does")
	fl.BoolVarP(&opts.quiet, "quiet", "q", false, "say nothing on stderr but errors")
	return cmd
}

// runRun is gssh run; see newRunCmd. Its own failures exit 255 (see
// exitStatus); the job's status comes out as a *jobStatus.
func runRun(ctx context.Context, a *app, opts *runOptions) error {
	if opts.environ == nil {
		opts.environ = a.environ
	}
	req, err := opts.request(func(w string) { fmt.Fprintln(a.stderr, "gssh: warning:", w) }, a.now())
	if err != nil {
		return err
	}
	stdin, _ := a.stdin.(*os.File)
	stdout, _ := a.stdout.(*os.File)
	var tty *sshexec.Terminal
	var resize chan sshexec.Size
	if opts.pty {
		if stdin == nil || stdout == nil || !term.IsTerminal(int(stdin.Fd())) || !term.IsTerminal(int(stdout.Fd())) {
			return errors.New("--pty needs a terminal: gssh run's stdin and stdout are not one (run it from a terminal, or leave --pty out to use pipes); nothing was submitted")
		}
		cols, rows, err := term.GetSize(int(stdout.Fd()))
		if err != nil {
			cols, rows = 80, 24
		}
		resize = make(chan sshexec.Size, 1)
		tty = &sshexec.Terminal{Term: a.getenv("TERM"), Rows: rows, Cols: cols, Resize: resize, Modes: termModes(int(stdin.Fd()))}
	}
	say := func(format string, args ...any) {
		if !opts.quiet {
			fmt.Fprintf(a.stderr, "gssh: "+format+"\n", args...)
		}
	}

	// Ctrl-C while the job runs goes to the job; before, it cancels it.
	var mu sync.Mutex
	running, presses := false, []time.Time{}
	signals := make(chan string, 4)
	var raw func() // restores the terminal from raw mode; nil: not raw
	restore := func() {
		mu.Lock()
		r := raw
		raw = nil // another attempt makes it raw again
		mu.Unlock()
		if r != nil {
			r()
		}
	}
	defer restore()
	a.onSignal(func(s os.Signal) bool {
		mu.Lock()
		defer mu.Unlock()
		if !running || s != os.Interrupt {
			return false
		}
		now := time.Now()
		presses = append(presses, now)
		if n := len(presses); n >= 3 && now.Sub(presses[n-3]) < 2*time.Second {
			return false // three in two seconds: cancel it
		}
		select {
		case signals <- "INT":
		default:
		}
		return true
	})
	defer a.onSignal(nil)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(hup)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case s := <-hup:
				if s == syscall.SIGHUP {
					cancel() // the terminal is gone: so is the job
					continue
				}
				if tty != nil {
					if cols, rows, err := term.GetSize(int(stdout.Fd())); err == nil {
						select { // the newest size wins over one not sent yet
						case <-resize:
						default:
						}
						resize <- sshexec.Size{Rows: rows, Cols: cols}
					}
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	in := a.stdin
	if tty != nil {
		in = &escapeReader{r: a.stdin, detach: func() {
			fmt.Fprintf(a.stderr, "\r\ngssh: ~. : leaving; the job is stopped\r\n")
			cancel()
		}, help: func() {
			fmt.Fprintf(a.stderr, "\r\ngssh escapes (at the start of a line): ~. leave (the job is stopped), ~~ a ~, ~? this\r\n")
		}}
	}
	res, err := a.service().Run(ctx, service.RunRequest{
		Submit: req, Terminal: tty, Stdin: in, Stdout: a.stdout, Stderr: a.stderr, Signals: signals,
		Waiting: func(j job.Job) {
			if j.State == job.Queued {
				say("job %s %s: %s; waiting for it to start", j.Ref(), stateWord(j), j.Reason)
				return
			}
			say("job %s running on %s", j.Ref(), where(j.Placement))
			mu.Lock()
			defer mu.Unlock()
			running = true
			if tty != nil && raw == nil {
				if cols, rows, err := term.GetSize(int(stdout.Fd())); err == nil {
					tty.Rows, tty.Cols = rows, cols // it may have changed while the job waited
				}
				if old, err := term.MakeRaw(int(stdin.Fd())); err == nil {
					raw = func() { term.Restore(int(stdin.Fd()), old) }
				}
			}
		},
		Detached: restore,
	})
	restore()
	j := res.Job
	switch {
	case err != nil && j.ID == 0: // nothing was stored
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	case ctx.Err() != nil:
		say("interrupted; job %s is %s", j.Ref(), j.State)
		return errInterrupted
	case err != nil:
		return err
	}
	code := runExit(res)
	if code == exitOK {
		return nil
	}
	say("job %s %s: %s", j.Ref(), j.State, j.Reason)
	return &jobStatus{err: fmt.Errorf("job %s %s: %s", j.Ref(), j.State, j.Reason), code: code}
}
