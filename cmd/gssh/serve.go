package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/gssh/gssh/metrics"
	"github.com/gssh/gssh/notify"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

type serveOptions struct {
	interval time.Duration
	// streams: the interval of the hosts' GPU streams (--gpu-interval;
	// 0: none, each pass probes).
	streams time.Duration
	// The HTTP API: --listen (""; none), --tls-cert and --tls-key.
	listen, tlsCert, tlsKey string
	publicMetrics           bool        // --public-metrics
	tls                     *tls.Config // --tls-cert and --tls-key as read (nil: none)
}

func newServeCmd(a *app, runF func(*serveOptions) error) *cobra.Command {
	opts := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run scheduling passes as a daemon: every --interval, and at once when asked",
		Long: `Run the scheduling passes as a daemon, in place of cron's gssh schedule:
one at once, then one every --interval, and one as soon as a command asks.
While it runs, the other gssh commands (but state) go through its socket
beside the state (STATE.sock), done as the user who sent them. It
streams each host's GPUs (a snapshot every --gpu-interval) over connections
it keeps open. One runs per state. SIGTERM lets the pass in flight end;
SIGHUP reads the inventory and ssh_config again. Under systemd
(Type=notify) it is ready once it listens: docs/lab.md.`,
		Example: `  gssh serve
  gssh serve --gpu-interval 0          # no streams: each pass probes the hosts
  gssh serve --listen 8765             # and the HTTP API and dashboard on loopback: docs/api.md
  systemctl enable --now gssh-serve    # docs/lab.md: the unit`,
		Annotations: exits(exitLine{exitOK, "stopped by SIGTERM or Ctrl-C, once the pass in flight ended"},
			exitLine{exitUsage, usageExit.text + ";\nor, in a shared lab, you are not its pass user"},
			exitLine{exitState, "another gssh serve runs for the state, or the lab's directory is unusable"},
			exitLine{exitSignal, "a second Ctrl-C gave up the pass in flight"}, exitLine{exitTerm, "a second SIGTERM gave up the pass in flight"}),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkDuration("--interval", opts.interval, 100*time.Millisecond, time.Hour); err != nil {
				return err
			}
			if opts.streams != 0 {
				if err := checkDuration("--gpu-interval", opts.streams, 100*time.Millisecond, time.Minute); err != nil {
					return err
				}
			}
			if err := checkAPIFlags(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return serveRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.interval, "interval", serve.DefaultInterval, "the most time between the end of one pass and the start of the next")
	cmd.Flags().StringVar(&opts.listen, "listen", "", "serve the HTTP API and the web dashboard on PORT (loopback) or HOST:PORT (default: none)")
	cmd.Flags().StringVar(&opts.tlsCert, "tls-cert", "", "with --listen: serve HTTPS with this certificate (PEM)")
	cmd.Flags().StringVar(&opts.tlsKey, "tls-key", "", "with --listen: the certificate's key (PEM)")
	cmd.Flags().BoolVar(&opts.publicMetrics, "public-metrics", false, "with --listen: /metrics without a token from any address (default: loopback only)")
	cmd.Flags().DurationVar(&opts.streams, "gpu-interval", serve.DefaultInterval, "how often each host's GPU stream gives a snapshot (100ms to 1m; 0: no streams, each pass probes)")
	return cmd
}

func serveRun(ctx context.Context, a *app, opts *serveOptions) error {
	if a.svc != nil {
		return errors.New("gssh serve works on the state file itself, not through another service")
	}
	// SIGHUP before anything: a reload that came early must not end the
	// process (its default action); SIGPIPE ignored: a log reader that
	// went away costs the lab its passes otherwise.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Reset(syscall.SIGPIPE)

	lg := &serveLog{out: a.stdout, errs: a.stderr, now: a.now}
	// Ctrl-C and SIGTERM are caught before the socket is made: one that
	// comes while gssh serve starts stops it once started, never midway.
	var inPass atomic.Bool
	stop := make(chan struct{})
	var once sync.Once
	a.onSignal(func(os.Signal) bool {
		first := false
		once.Do(func() { first = true; close(stop) })
		switch {
		case first && inPass.Load():
			lg.warn("stopping once the pass in flight ends (again: give it up now)")
		case first:
			lg.info("stopping")
		default:
			lg.warn("the pass in flight given up: the next pass reconciles what it left")
		}
		return first // the second one interrupts the command: ctx is cancelled
	})
	defer a.onSignal(nil)
	var cur atomic.Pointer[service.Local] // the service, a new one after each SIGHUP
	var mx *metrics.Metrics               // with the HTTP API: its /metrics
	if opts.listen != "" {
		mx = metrics.New(cur.Load)
	}
	// The notifications of the events the passes and requests write:
	// the inventory's `notify:` block, read again on SIGHUP.
	nopt := notify.Options{Warn: lg.warn}
	if mx != nil {
		nopt.Observe = mx.Notification
	}
	notifier := notify.New(nopt)
	defer notifier.Close()
	// Each service gssh serve runs (a new one on SIGHUP) keeps the state
	// open, streams the GPUs, polls steady hosts once an interval and
	// has its events notified.
	setup := func(l *service.Local) *service.Local {
		if mx != nil {
			l.ObserveProbes(mx.Probe)
		}
		l.TapEvents(notifier.Event)
		if c, err := l.Notifications(); err == nil { // else: a reload that fails goes on as before
			notifier.Configure(c)
		}
		l.KeepState()
		l.WatchGPUs(opts.streams, lg.stream)
		l.ReusePolls(min(opts.interval, serve.DefaultInterval))
		return l
	}
	l := setup(a.newLocal())
	a.svc = l // Main closes it
	if err := l.Check(); err != nil {
		return err // the inventory, the lab's set-up: nothing would pass
	}
	srv, err := l.Serve(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	if srv.Socket.Replaced != "" {
		lg.warn(fmt.Sprintf("%s was %s: replaced by the socket", srv.Socket.Path, srv.Socket.Replaced))
	}

	wake := serve.NewWake()
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	cur.Store(l)
	loop := &serve.Loop{Interval: opts.interval, Wake: wake}
	var last atomic.Pointer[service.PassResult]
	var full atomic.Bool
	serveOpts := service.ServeOptions{Current: cur.Load, Passes: loopPasses{wake: wake, next: loop.Next, last: &last, full: &full}, Code: exitCode}
	server := &serve.Server{Wake: wake, Next: loop.Next, Log: lg.warn, Long: service.Long,
		Handlers: service.Handlers(serveOpts), Duplex: service.DuplexHandlers(serveOpts),
		FaultOf: func(err error) *serve.Fault { return service.FaultOf(err, exitCode(err)) }}
	if opts.listen != "" {
		stopAPI, err := startAPI(opts, l, &cur, serveOpts.Passes, lg, mx, server)
		if err != nil {
			cancel()
			return err
		}
		defer stopAPI()
	}
	go func() { served <- server.Serve(sctx, srv.Socket) }()
	lg.info(fmt.Sprintf("gssh serve (pid %d): a pass every %s, and at once when asked on %s", os.Getpid(), units.FormatDuration(opts.interval), srv.Socket.Path))
	daemon.SdNotify(false, daemon.SdNotifyReady) // under systemd (Type=notify): ready; elsewhere nothing

	// SIGHUP: the next pass, at once, reads the inventory and ssh_config
	// again (a new service; its connections are made anew).
	var reload atomic.Bool
	go func() {
		for {
			select {
			case <-hup:
				reload.Store(true)
				serve.Poke(wake)
			case <-sctx.Done():
				return
			}
		}
	}()
	loop.Pass = (&servePasses{a: a, cur: &cur, reload: &reload, inPass: &inPass, lg: lg, last: &last, setup: setup, full: &full, metrics: mx, notifier: notifier, interval: opts.interval}).pass
	loop.Run(ctx, stop)
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	cancel()
	if err := <-served; err != nil {
		lg.warn(err.Error())
	}
	if ctx.Err() != nil {
		return interrupted(ctx, ctx.Err())
	}
	lg.info("gssh serve stopped")
	return nil
}

// servePasses is gssh serve's passes: each with the service cur holds
// (a new one first when reload was set, by SIGHUP), what it changed
// told to lg.
type servePasses struct {
	a              *app
	cur            *atomic.Pointer[service.Local]
	reload, inPass *atomic.Bool
	lg             *serveLog
	setup          func(*service.Local) *service.Local // makes a new service gssh serve's
	saidEmpty      bool                                // "no jobs yet" was said
	full           *atomic.Bool                        // this pass polls every host (loopPasses.Pass)
	last           *atomic.Pointer[service.PassResult] // what the last pass did (nil: it could not run)
	metrics        *metrics.Metrics                    // nil: none kept
	notifier       *notify.Notifier                    // told of the running jobs after each pass
	sampled        time.Time                           // when the jobs' GPU memory was last sampled
	sampling       atomic.Bool                         // a sampling runs
	interval       time.Duration                       // --interval
}

// memorySampling is how often gssh serve samples each job's GPU memory
// (from its GPU streams' frames, at most this old), or 5 --intervals
// where that is less.
const memorySampling = 10 * time.Second

// pass is one pass (serve.Loop.Pass).
func (p *servePasses) pass(ctx context.Context) {
	p.inPass.Store(true)
	defer p.inPass.Store(false)
	if p.reload.Swap(false) {
		p.cur.Store(reloaded(p.a, p.cur.Load(), p.lg, p.setup))
	}
	l := p.cur.Load()
	start := time.Now()
	res, err := l.Schedule(ctx, service.ScheduleRequest{ReusePolls: !p.full.Swap(false)})
	if p.metrics != nil && !errors.Is(err, service.ErrPassBusy) && !errors.Is(err, state.ErrNoState) {
		p.metrics.Pass(time.Since(start), err != nil)
	}
	if err == nil || errors.Is(err, state.ErrNoState) {
		p.last.Store(&res)
	} else {
		p.last.Store(nil)
	}
	if every := min(memorySampling, 5*p.interval); err == nil && time.Since(p.sampled) >= every && p.sampling.CompareAndSwap(false, true) {
		// Each job's GPU memory (the dashboard's plot, accounting), off
		// the loop: a host without a stream is probed, and a host that
		// does not answer must not hold the passes. One at a time.
		p.sampled = time.Now()
		go func() {
			defer p.sampling.Store(false)
			if serr := l.SampleMemory(ctx, every); serr != nil && ctx.Err() == nil && !errors.As(serr, new(*service.PartialError)) {
				p.lg.warn("sampling the jobs' GPU memory: " + serr.Error())
			}
		}()
	}
	if err == nil {
		// Owners of jobs that near their walltime or idle are told (once
		// each); the scheduled jobs due are submitted; jobs idle past the
		// policy's idle_cancel are cancelled.
		if doc, jerr := l.Jobs(ctx, service.JobQuery{}); jerr == nil {
			if p.notifier.Enabled() {
				p.notifier.Walltimes(p.a.now(), doc.Jobs)
			}
			runs, rerr := l.RunCrons(ctx, p.a.now()) // the scheduled jobs due
			for _, r := range runs {
				if r.Err != nil {
					p.lg.warn(fmt.Sprintf("scheduled job %s (%s, %s's): not submitted: %v", r.Cron.ID, r.Cron.Schedule, r.Cron.User, r.Err))
				} else {
					p.lg.info(fmt.Sprintf("scheduled job %s (%s): submitted job %s of %s", r.Cron.ID, r.Cron.Schedule, r.Job.Ref(), r.Cron.User))
				}
			}
			if rerr != nil && ctx.Err() == nil {
				p.lg.warn("scheduled jobs: " + rerr.Error())
			}
			done, cerr := l.CancelIdle(ctx, doc.Jobs)
			for _, j := range done {
				p.lg.info(fmt.Sprintf("job %s cancelled: %s", j.Ref(), j.Reason))
			}
			if cerr != nil && ctx.Err() == nil {
				p.lg.warn("cancelling idle jobs: " + cerr.Error())
			}
		}
	}
	switch {
	case errors.Is(err, state.ErrNoState):
		if !p.saidEmpty {
			p.lg.info("no jobs yet: the first gssh submit makes the state file " + l.StatePath())
			p.saidEmpty = true
		}
		return
	case errors.Is(err, service.ErrPassBusy):
		return // another pass (a command's, cron's) runs: this one comes at the next interval
	case err != nil && ctx.Err() == nil:
		p.lg.problems([]error{err})
		return
	case err != nil:
		return // given up: the next start reconciles
	}
	p.lg.info(passText(res, false))
	p.lg.problems(res.Problems)
}

// reloaded is the service gssh serve goes on with after a SIGHUP: a new
// one of the inventory and ssh_config as they are now, unless they
// cannot be read or the state they name is not the one served (the lock
// and the socket are that one's): then l, saying so.
func reloaded(a *app, l *service.Local, lg *serveLog, setup func(*service.Local) *service.Local) *service.Local {
	nl := setup(a.newLocal())
	if err := nl.Check(); err != nil {
		nl.Close()
		lg.warn(fmt.Sprintf("SIGHUP: %v; gssh serve goes on with the inventory and ssh_config it read before (fix them, then SIGHUP again)", err))
		return l
	}
	if nl.StatePath() != l.StatePath() {
		nl.Close()
		lg.warn(fmt.Sprintf("SIGHUP: the inventory now puts the state at %s: restart gssh serve to serve it; it goes on serving %s", nl.StatePath(), l.StatePath()))
		return l
	}
	time.AfterFunc(serve.OpTimeout, func() { l.Close() }) // once the requests it is answering are done
	a.svc = nl                                            // Main closes it
	lg.info("SIGHUP: this pass reads the inventory and ssh_config again")
	return nl
}

// serveLog is gssh serve's output: what passes changed on stdout, its
// problems on stderr, each line after the time (RFC 3339). A problem
// that the last pass had too is not said again: a host down for an hour
// is said once, not every few seconds.
type serveLog struct {
	out, errs io.Writer
	now       func() time.Time
	mu        sync.Mutex
	last      map[string]bool // the problems of the last pass
}

func (s *serveLog) stamp(w io.Writer, text string) {
	if text == "" {
		return
	}
	at := s.now().Format(time.RFC3339)
	var b strings.Builder
	for line := range strings.Lines(text) {
		b.WriteString(at + " " + line)
		if !strings.HasSuffix(line, "\n") {
			b.WriteByte('\n')
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	io.WriteString(w, b.String())
}

func (s *serveLog) info(text string) { s.stamp(s.out, text) }

func (s *serveLog) warn(text string) { s.stamp(s.errs, "gssh: warning: "+text) }

// stream says what a GPU stream tells (fleet.Watch): a problem, or that
// it runs again.
func (s *serveLog) stream(problem bool, text string) {
	if problem {
		s.warn(text)
	} else {
		s.info(text)
	}
}

// problems says the problems of a pass not said after the last one.
func (s *serveLog) problems(ps []error) {
	now := make(map[string]bool, len(ps))
	var b strings.Builder
	for _, p := range ps {
		text := p.Error()
		if !now[text] && !s.last[text] {
			b.WriteString("gssh: warning: " + text + "\n")
		}
		now[text] = true
	}
	s.last = now
	s.stamp(s.errs, b.String())
}

// loopPasses are gssh serve's passes as its requests ask for them
// (service.Passes).
type loopPasses struct {
	wake chan<- struct{}
	next func() <-chan struct{}
	last *atomic.Pointer[service.PassResult] // what the last pass did; nil when it could not run
	full *atomic.Bool                        // the next pass polls every host (a gssh schedule's, a gssh wait's)
}

func (p loopPasses) Wake() { serve.Poke(p.wake) }

func (p loopPasses) Pass(ctx context.Context, full bool) (*service.PassResult, bool) {
	if full {
		p.full.Store(true) // before the pass it waits for starts
	}
	passed := p.next() // a pass that starts after this: it reads what the request wrote
	serve.Poke(p.wake)
	select {
	case <-passed:
		return p.last.Load(), true
	case <-ctx.Done():
		return nil, false
	}
}
