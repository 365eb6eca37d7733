package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/sshexec"
)

// OpRun is the duplex op of gssh serve that a Remote's Run asks for: gssh
// serve runs the job in the foreground (Local.Run, as the peer's user),
// the client's streams carried over the socket.
//
// After its request (a request[runArgs]) the client sends runInput lines:
// its stdin's bytes, their end, the signals to pass on (Ctrl-C), its
// terminal's new sizes, and "interrupt" when it gives up (Ctrl-C before
// the job runs, SIGTERM): the job is then cancelled and the answer says
// so. A client that goes away without a word (killed, its connection
// dropped) has its job cancelled as gone (ErrRunGone). gssh serve answers
// with runChunk pieces, "accepted" first (the request is its: nothing
// falls back to the client after it), and a runWire.
const OpRun = "run"

// runArgs are OpRun's arguments: a RunRequest less its streams.
type runArgs struct {
	Submit    SubmitRequest `json:"submit"`
	Terminal  *runTerminal  `json:"terminal,omitempty"`
	IntervalS float64       `json:"interval_s,omitempty"` // seconds
}

// runTerminal is an sshexec.Terminal less its resize channel.
type runTerminal struct {
	Term  string            `json:"term,omitempty"`
	Rows  int               `json:"rows"`
	Cols  int               `json:"cols"`
	Modes ssh.TerminalModes `json:"modes,omitempty"`
}

// runInput is one line a Remote's Run sends after its request.
type runInput struct {
	In        []byte        `json:"in,omitempty"`
	EOF       bool          `json:"eof,omitempty"`
	Signal    string        `json:"signal,omitempty"`
	Resize    *sshexec.Size `json:"resize,omitempty"`
	Interrupt bool          `json:"interrupt,omitempty"`
}

// runChunk is one piece of OpRun's answer.
type runChunk struct {
	Accepted bool     `json:"accepted,omitempty"`
	Out      []byte   `json:"out,omitempty"`
	Err      []byte   `json:"err,omitempty"`
	Waiting  *job.Job `json:"waiting,omitempty"`
	Detached bool     `json:"detached,omitempty"`
}

// runWire is a RunResult as OpRun's answer carries it.
type runWire struct {
	Job    job.Job    `json:"job"`
	Exit   *int       `json:"exit,omitempty"`
	Submit submitWire `json:"submit"`
}

// errRunInterrupted is the cause of a served Run's end when its client
// said it gives up.
var errRunInterrupted = errors.New("gssh run interrupted")

// runChunkMax is the most bytes of a stream one runInput or runChunk
// carries.
const runChunkMax = 32 << 10

// serveRun is OpRun's handler's work, for l (the peer's user): see
// OpRun.
func serveRun(ctx context.Context, l *Local, a runArgs, code func(error) int, send func(any) error, recv <-chan json.RawMessage) (any, error) {
	if err := send(runChunk{Accepted: true}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)

	// The job's stdin: what the client sends, written as the job reads it.
	inR, inW := io.Pipe()
	defer inR.Close()
	stdin := make(chan []byte, 64)
	go func() {
		defer inW.Close()
		for b := range stdin {
			if _, err := inW.Write(b); err != nil {
				return
			}
		}
	}()
	signals := make(chan string, 8)
	var tty *sshexec.Terminal
	var resize chan sshexec.Size
	if t := a.Terminal; t != nil {
		resize = make(chan sshexec.Size, 1)
		tty = &sshexec.Terminal{Term: t.Term, Rows: t.Rows, Cols: t.Cols, Modes: t.Modes, Resize: resize}
	}
	go func() {
		interrupted, ended := false, false
		end := func() {
			if !ended {
				ended = true
				close(stdin)
			}
		}
		defer end()
		for line := range recv {
			var in runInput
			if json.Unmarshal(line, &in) != nil {
				continue // not a gssh run's: nothing to do with it
			}
			switch {
			case in.Interrupt:
				interrupted = true
				cancel(errRunInterrupted)
			case in.EOF:
				end()
			case in.Signal != "":
				select { // Signal refuses the names it does not pass on
				case signals <- in.Signal:
				default:
				}
			case in.Resize != nil && resize != nil:
				select { // the newest size wins over one not taken yet
				case <-resize:
				default:
				}
				resize <- *in.Resize
			case len(in.In) > 0 && !ended:
				select {
				case stdin <- in.In:
				case <-done:
					return
				}
			}
		}
		if !interrupted {
			cancel(ErrRunGone)
		}
	}()

	var sendMu sync.Mutex // Waiting and the streams may send at once
	sendChunk := func(c runChunk) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return send(c)
	}
	res, err := l.Run(ctx, RunRequest{
		Submit: a.Submit, Terminal: tty, Stdin: inR, Signals: signals,
		Stdout:   chunkWriter(func(b []byte) error { return sendChunk(runChunk{Out: b}) }),
		Stderr:   chunkWriter(func(b []byte) error { return sendChunk(runChunk{Err: b}) }),
		Waiting:  func(j job.Job) { sendChunk(runChunk{Waiting: &j}) },
		Detached: func() { sendChunk(runChunk{Detached: true}) },
		Interval: time.Duration(a.IntervalS * float64(time.Second)),
	})
	return runWire{Job: res.Job, Exit: res.Exit, Submit: submitToWire(res.Submit, code)}, err
}

// chunkWriter is an io.Writer whose writes are sent in pieces of at most
// runChunkMax bytes.
type chunkWriter func([]byte) error

func (w chunkWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), runChunkMax)
		if err := w(b[:k:k]); err != nil {
			return n, err
		}
		n += k
		b = b[k:]
	}
	return n, nil
}

// Run implements Service: gssh serve's (OpRun) where one answers, the
// streams carried over its socket; else Local's. Once gssh serve took the
// request, its error is the run's (the job is never run here too).
func (r Remote) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	view, verr := r.requestView()
	if verr != nil {
		if r.mustServe() {
			return RunResult{}, verr
		}
		return r.Local.Run(ctx, req)
	}
	args := runArgs{Submit: req.Submit, IntervalS: req.Interval.Seconds()}
	if t := req.Terminal; t != nil {
		args.Terminal = &runTerminal{Term: t.Term, Rows: t.Rows, Cols: t.Cols, Modes: t.Modes}
	}
	// The call's own context ends a moment after ctx: a client that gives
	// up says so, and hears how its job ended (cancelled).
	cctx, ccancel := context.WithCancel(r.withToken(context.WithoutCancel(ctx)))
	defer ccancel()
	in := make(chan any, 16)
	var accepted sync.Once
	pumps := make(chan struct{}) // closed once gssh serve took the request
	stop := make(chan struct{})
	defer close(stop)
	put := func(v runInput) bool {
		select {
		case in <- v:
			return true
		case <-stop:
			return false
		}
	}
	go func() {
		select {
		case <-pumps:
		case <-stop:
			return
		}
		if req.Stdin != nil {
			go func() { // blocks in its Read until its input comes or ends (a terminal's, a process's)
				buf := make([]byte, runChunkMax)
				for {
					n, err := req.Stdin.Read(buf)
					if n > 0 && !put(runInput{In: append([]byte(nil), buf[:n]...)}) {
						return
					}
					if err != nil {
						put(runInput{EOF: true})
						return
					}
				}
			}()
		} else {
			put(runInput{EOF: true})
		}
		var resize <-chan sshexec.Size
		if req.Terminal != nil {
			resize = req.Terminal.Resize
		}
		for {
			select {
			case sig := <-req.Signals: // nil: never
				put(runInput{Signal: sig})
			case sz := <-resize:
				put(runInput{Resize: &sz})
			case <-ctx.Done():
				put(runInput{Interrupt: true})
				select { // the job's cancel has its grace to say it ended
				case <-stop:
				case <-time.After(DefaultGrace + 30*time.Second):
					ccancel()
				}
				return
			case <-stop:
				return
			}
		}
	}()
	var detached sync.Once
	more := func(b json.RawMessage) error {
		var c runChunk
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("gssh serve's answer to gssh run: %w", err)
		}
		switch {
		case c.Accepted:
			accepted.Do(func() { close(pumps) })
		case c.Out != nil:
			if req.Stdout != nil {
				req.Stdout.Write(c.Out)
			}
		case c.Err != nil:
			if req.Stderr != nil {
				req.Stderr.Write(c.Err)
			}
		case c.Waiting != nil:
			if req.Waiting != nil {
				req.Waiting(*c.Waiting)
			}
		case c.Detached:
			if req.Detached != nil {
				detached.Do(req.Detached)
			}
		}
		return nil
	}
	var w runWire
	err := serve.Duplex(cctx, r.SocketPath(), r.serverUID(), OpRun, request[runArgs]{View: view, Args: args}, &w, more, in)
	took := false
	select {
	case <-pumps:
		took = true
	default:
	}
	if !took {
		served, err := r.served(ctx, err)
		if !served {
			return r.Local.Run(ctx, req)
		}
		return RunResult{}, err
	}
	if req.Detached != nil {
		detached.Do(req.Detached) // a terminal in raw mode is restored whatever came
	}
	res := RunResult{Job: w.Job, Exit: w.Exit, Submit: w.Submit.result()}
	var f *serve.Fault
	switch {
	case ctx.Err() != nil:
		return res, interrupted(ctx)
	case err == nil:
		return res, nil
	case errors.As(err, &f):
		return res, faultError(f)
	case errors.Is(err, serve.ErrGone):
		return res, fmt.Errorf("%w: %v; the job's processes are stopped on its worker (its keeper does it): see gssh ps", ErrServeGone, err)
	}
	return res, err
}
