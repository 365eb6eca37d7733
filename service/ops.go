package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/serve"
)

// The ops of gssh serve that a Remote asks for: one per call of Service
// but the state file's own (backup, check, restore); Run's is OpRun. Each
// request is a request[A] of the call's arguments.
const (
	OpHosts     = "hosts"
	OpSubmit    = "submit"
	OpJobs      = "jobs"
	OpJob       = "job"
	OpLogs      = "logs" // streams the log's bytes (logChunk)
	OpCancel    = "cancel"
	OpSchedule  = "schedule"
	OpHold      = "hold"
	OpRelease   = "release"
	OpUpdate    = "update"
	OpRequeue   = "requeue"
	OpResolve   = "resolve"
	OpExplain   = "explain"
	OpUsage     = "usage"
	OpReap      = "reap"
	OpEvents    = "events" // streams the events (eventChunk)
	OpDrain     = "drain"
	OpResume    = "resume"
	OpDrainJobs = "drain_jobs"
	OpDoctor    = "doctor"
	OpTokenNew  = "token_create"
	OpTokens    = "tokens"
	OpTokenDel  = "token_revoke"
	OpCronAdd   = "cron_add"
	OpCrons     = "crons"
	OpCronDel   = "cron_remove"
)

// request is the arguments of an op: the caller's view of the hosts
// (gssh serve answers only a request whose view is its own: Answers),
// and the call's own.
type request[A any] struct {
	View View `json:"view"`
	Args A    `json:"args"`
}

// HostsArgs are the arguments of OpGPUs and OpHosts.
type HostsArgs = request[HostQuery]

// logsArgs, requeueArgs and eventsArgs are arguments of the calls that
// take more than one.
type (
	requeueArgs struct {
		IDs    []job.ID `json:"ids"`
		GraceS float64  `json:"grace_s"` // seconds
	}
	logChunk struct {
		Out []byte `json:"out"`
	}
	eventChunk struct {
		Event *eventlog.Record `json:"event,omitempty"`
		Warn  string           `json:"warn,omitempty"`
	}
)

// ServeOptions are what gssh serve's handlers need of it.
type ServeOptions struct {
	// Current is the service now (gssh serve makes a new one on SIGHUP).
	Current func() *Local
	// Passes are gssh serve's loop: a request's submit or change waits
	// for its pass.
	Passes Passes
	// Code is the exit status gssh gives an error (Fault.Code).
	Code func(error) int
}

// Long are the ops of Handlers whose work is not bounded by
// serve.OpTimeout (a log followed to its job's end, events).
var Long = map[string]bool{OpLogs: true, OpEvents: true}

// Handlers are gssh serve's answers to a Remote's calls: each request's
// call is made by the service now, as the peer's user (Local.As) after
// PeerUser says who that is, for a request with the service's own view
// of the hosts.
func Handlers(o ServeOptions) map[string]serve.Handler {
	code := o.Code
	return map[string]serve.Handler{
		OpGPUs: handle(o, func(ctx context.Context, l *Local, q HostQuery, _ func(any) error) (any, error) {
			return l.CachedGPUs(ctx, q)
		}),
		OpHosts: handle(o, func(ctx context.Context, l *Local, q HostQuery, _ func(any) error) (any, error) {
			return l.Hosts(ctx, q)
		}),
		OpSubmit: handle(o, func(ctx context.Context, l *Local, r SubmitRequest, _ func(any) error) (any, error) {
			res, err := l.Submit(ctx, r)
			return submitToWire(res, code), err
		}),
		OpJobs: handle(o, func(ctx context.Context, l *Local, q JobQuery, _ func(any) error) (any, error) {
			return l.Jobs(ctx, q)
		}),
		OpJob: handle(o, func(ctx context.Context, l *Local, id job.ID, _ func(any) error) (any, error) {
			return l.Job(ctx, id)
		}),
		OpLogs: handle(o, func(ctx context.Context, l *Local, r LogsRequest, send func(any) error) (any, error) {
			return l.Logs(ctx, r, sender(send))
		}),
		OpCancel: handle(o, func(ctx context.Context, l *Local, r CancelRequest, _ func(any) error) (any, error) {
			r.By = "" // the peer's user: never the request's word
			res, err := l.Cancel(ctx, r)
			return cancelToWire(res, code), err
		}),
		OpSchedule: handle(o, func(ctx context.Context, l *Local, r ScheduleRequest, _ func(any) error) (any, error) {
			res, err := l.Schedule(ctx, r)
			return passToWire(res, code), err
		}),
		OpHold: handle(o, func(ctx context.Context, l *Local, ids []job.ID, _ func(any) error) (any, error) {
			res, err := l.Hold(ctx, ids)
			return heldToWire(res, code), err
		}),
		OpRelease: handle(o, func(ctx context.Context, l *Local, ids []job.ID, _ func(any) error) (any, error) {
			res, err := l.Release(ctx, ids)
			return heldToWire(res, code), err
		}),
		OpUpdate: handle(o, func(ctx context.Context, l *Local, r UpdateRequest, _ func(any) error) (any, error) {
			res, err := l.Update(ctx, r)
			return heldToWire(res, code), err
		}),
		OpRequeue: handle(o, func(ctx context.Context, l *Local, r requeueArgs, _ func(any) error) (any, error) {
			res, err := l.Requeue(ctx, r.IDs, time.Duration(r.GraceS*float64(time.Second)))
			return heldToWire(res, code), err
		}),
		OpResolve: handle(o, func(ctx context.Context, l *Local, names []string, _ func(any) error) (any, error) {
			return l.Resolve(ctx, names)
		}),
		OpExplain: handle(o, func(ctx context.Context, l *Local, id job.ID, _ func(any) error) (any, error) {
			return l.Explain(ctx, id)
		}),
		OpUsage: handle(o, func(ctx context.Context, l *Local, _ struct{}, _ func(any) error) (any, error) {
			return l.Usage(ctx)
		}),
		OpReap: handle(o, func(ctx context.Context, l *Local, r ReapRequest, _ func(any) error) (any, error) {
			return l.Reap(ctx, r)
		}),
		OpEvents: handle(o, func(ctx context.Context, l *Local, f eventlog.Filter, send func(any) error) (any, error) {
			q := EventQuery{Filter: f, Warn: func(s string) { send(eventChunk{Warn: s}) }}
			return l.Events(ctx, q, func(r eventlog.Record) error { return send(eventChunk{Event: &r}) })
		}),
		OpDrain: handle(o, func(ctx context.Context, l *Local, r DrainRequest, _ func(any) error) (any, error) {
			return l.Drain(ctx, r)
		}),
		OpResume: handle(o, func(ctx context.Context, l *Local, hosts []string, _ func(any) error) (any, error) {
			return l.Resume(ctx, hosts)
		}),
		OpDrainJobs: handle(o, func(ctx context.Context, l *Local, hosts []string, _ func(any) error) (any, error) {
			return l.DrainJobs(ctx, hosts)
		}),
		OpDoctor: handle(o, func(ctx context.Context, l *Local, q HostQuery, _ func(any) error) (any, error) {
			return l.Doctor(ctx, q)
		}),
		OpTokenNew: handle(o, func(ctx context.Context, l *Local, r TokenRequest, _ func(any) error) (any, error) {
			return l.CreateToken(ctx, r)
		}),
		OpTokens: handle(o, func(ctx context.Context, l *Local, _ struct{}, _ func(any) error) (any, error) {
			return l.Tokens(ctx)
		}),
		OpTokenDel: handle(o, func(ctx context.Context, l *Local, ids []string, _ func(any) error) (any, error) {
			return l.RevokeTokens(ctx, ids)
		}),
		OpCronAdd: handle(o, func(ctx context.Context, l *Local, r CronRequest, _ func(any) error) (any, error) {
			return l.AddCron(ctx, r)
		}),
		OpCrons: handle(o, func(ctx context.Context, l *Local, _ struct{}, _ func(any) error) (any, error) {
			return l.Crons(ctx)
		}),
		OpCronDel: handle(o, func(ctx context.Context, l *Local, ids []string, _ func(any) error) (any, error) {
			return l.RemoveCrons(ctx, ids)
		}),
	}
}

// handle is the serve.Handler of an op whose arguments are an A: the
// request read (strictly: an argument this gssh does not know is not
// guessed at), its view checked, its peer's user found, then f called
// with the service as that user.
func handle[A any](o ServeOptions, f func(ctx context.Context, l *Local, a A, send func(any) error) (any, error)) serve.Handler {
	return func(ctx context.Context, p serve.Peer, raw json.RawMessage, send func(any) error) (any, error) {
		l, a, err := peerCall[A](o, p, raw)
		if err != nil {
			return nil, err
		}
		return f(ctx, l, a, send)
	}
}

// peerCall is a request's arguments read (strictly), its view checked
// (not for a peer the HTTP API authenticated: a laptop takes the
// server's) and its peer's user found: the service as that user, and the
// arguments.
func peerCall[A any](o ServeOptions, p serve.Peer, raw json.RawMessage) (*Local, A, error) {
	var in request[A]
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, in.Args, fmt.Errorf("%w: its arguments: %v", ErrNotServed, err) // another gssh's: it does it itself
	}
	l := o.Current()
	if p.User == "" {
		if err := l.Answers(in.View); err != nil {
			return nil, in.Args, err
		}
	}
	user, err := l.PeerUser(p)
	if err != nil {
		return nil, in.Args, err
	}
	return l.As(user, o.Passes), in.Args, nil
}

// DuplexHandlers are gssh serve's answers to a Remote's duplex calls
// (Run), made as Handlers' are.
func DuplexHandlers(o ServeOptions) map[string]serve.DuplexHandler {
	return map[string]serve.DuplexHandler{
		OpRun: func(ctx context.Context, p serve.Peer, raw json.RawMessage, send func(any) error, recv <-chan json.RawMessage) (any, error) {
			l, a, err := peerCall[runArgs](o, p, raw)
			if err != nil {
				return nil, err
			}
			return serveRun(ctx, l, a, o.Code, send, recv)
		},
	}
}

// requestView is the view a request of r's carries: r's own, or none
// for an HTTP API's server (which takes its own).
func (r Remote) requestView() (View, error) {
	if serve.IsURL(r.opt.Server) {
		return View{}, nil
	}
	return r.View()
}

// withToken is ctx carrying r's token for an HTTP API's server.
func (r Remote) withToken(ctx context.Context) context.Context {
	if r.opt.Token == "" {
		return ctx
	}
	return serve.WithToken(ctx, r.opt.Token)
}

// sender is an io.Writer whose writes are sent as logChunks.
type sender func(any) error

func (s sender) Write(b []byte) (int, error) {
	if err := s(logChunk{Out: b}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// remote asks the state's gssh serve for op with args, its answer read
// into result and its streamed pieces given to more (nil for an op that
// streams none). served false: the call is Local's to make (no gssh serve
// runs, or it does not answer this call: see Remote); never so in a lab
// whose queue gssh serve alone keeps (ErrServeDown then).
func remote[A any](ctx context.Context, r Remote, op string, args A, result any, more func(json.RawMessage) error) (served bool, err error) {
	view, verr := r.requestView()
	if verr != nil {
		if r.mustServe() {
			return true, verr
		}
		return false, nil
	}
	ctx = r.withToken(ctx)
	in := request[A]{View: view, Args: args}
	if more == nil {
		err = serve.Call(ctx, r.SocketPath(), r.serverUID(), op, in, result)
	} else {
		err = serve.Stream(ctx, r.SocketPath(), r.serverUID(), op, in, result, more)
	}
	return r.served(ctx, err)
}

// served is remote's verdict on the error err of a request gssh serve
// was asked: whether it was served (else the call is Local's to make),
// and its error as the caller gets it.
func (r Remote) served(ctx context.Context, err error) (bool, error) {
	var f *serve.Fault
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, serve.ErrToken):
		return true, err // an HTTP API that refused the token: said as it is
	case ctx.Err() != nil:
		return true, interrupted(ctx)
	case errors.Is(err, serve.ErrGone):
		// It may have done what was asked: never done again here.
		return true, fmt.Errorf("%w: %v; what was asked may or may not be done: see gssh ps", ErrServeGone, err)
	case !errors.As(err, &f) || f.Kind == FaultNotServed || f.Kind == serve.KindUnknownOp || f.Kind == serve.KindRefused:
		if r.mustServe() {
			return true, r.serveDown(err)
		}
		return false, nil // none serves, or not this call: it is made here
	}
	return true, faultError(f)
}
