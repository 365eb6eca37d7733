package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/state"
)

// ErrServeDown means a lab whose queue gssh serve alone keeps has none
// running (or none that answers): nothing was done. ErrServeGone means
// gssh serve ended the connection before its answer (it stopped or was
// killed mid-request): what was asked may or may not be done, and is
// not done again.
var (
	ErrServeDown = errors.New("gssh serve did not answer")
	ErrServeGone = errors.New("gssh serve went away before answering")
)

var _ Service = Remote{}

// servedOnly reports whether l's queue is gssh serve's alone: a lab set
// up with `serve: true`.
func (l *Local) servedOnly() bool { return l.lab != nil && l.lab.dir.Served }

// mustServe reports whether every call of a Remote of l goes through
// gssh serve: its socket was named (Options.Server), or the queue is
// gssh serve's alone.
func (l *Local) mustServe() bool { return l.opt.Server != "" || l.servedOnly() }

// serveDown is the error of a call made with no gssh serve answering
// where one must (mustServe); why is what the socket said.
func (l *Local) serveDown(why error) error {
	switch {
	case !errors.Is(why, serve.ErrNotServing):
		return fmt.Errorf("%w: the one at %s does not answer this request: %s; nothing was done", ErrServeDown, l.SocketPath(), strings.TrimPrefix(why.Error(), ErrNotServed.Error()+": "))
	case serve.IsURL(l.opt.Server):
		return fmt.Errorf("%w: none answers at %s (--server, $GSSH_SERVER): %v; nothing was done: check the URL, or that gssh serve runs there with --listen", ErrServeDown, l.opt.Server, why)
	case !l.servedOnly():
		return fmt.Errorf("%w: none runs at %s (--server, $GSSH_SERVER) for %s; nothing was done: start it (gssh serve), or leave --server out", ErrServeDown, l.SocketPath(), l.opt.StatePath)
	}
	return fmt.Errorf("%w: the queue of %s is kept by gssh serve alone, and none runs at %s; nothing was done: ask the lab's admin to start it (systemctl start gssh-serve)",
		ErrServeDown, l.lab.file, l.SocketPath())
}

// GPUs implements Service: gssh serve's answer (from its probe of the
// same hosts at most q.MaxAge old), else Local's.
func (r Remote) GPUs(ctx context.Context, q HostQuery) (GPUsDoc, error) {
	var doc GPUsDoc
	if served, err := remote(ctx, r, OpGPUs, q, &doc, nil); served {
		return doc, err
	}
	return r.Local.GPUs(ctx, q)
}

// Hosts implements Service: in personal mode Local's (it measures the
// connections this process makes), but for an HTTP API's server, whose
// hosts they are.
func (r Remote) Hosts(ctx context.Context, q HostQuery) (HostsDoc, error) {
	if r.servedOnly() || serve.IsURL(r.opt.Server) {
		var doc HostsDoc
		_, err := remote(ctx, r, OpHosts, q, &doc, nil)
		return doc, err
	}
	return r.Local.Hosts(ctx, q)
}

// Submit implements Service.
func (r Remote) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	var w submitWire
	if served, err := remote(ctx, r, OpSubmit, req, &w, nil); served {
		return w.result(), err
	}
	return r.Local.Submit(ctx, req)
}

// Jobs implements Service.
func (r Remote) Jobs(ctx context.Context, q JobQuery) (JobsDoc, error) {
	var doc JobsDoc
	if served, err := remote(ctx, r, OpJobs, q, &doc, nil); served {
		return doc, err
	}
	return r.Local.Jobs(ctx, q)
}

// Job implements Service.
func (r Remote) Job(ctx context.Context, id job.ID) (job.Job, error) {
	var j job.Job
	if served, err := remote(ctx, r, OpJob, id, &j, nil); served {
		return j, err
	}
	return r.Local.Job(ctx, id)
}

// Logs implements Service: the log's bytes come as gssh serve reads
// them.
func (r Remote) Logs(ctx context.Context, req LogsRequest, out io.Writer) (LogsResult, error) {
	var res LogsResult
	more := func(b json.RawMessage) error {
		var c logChunk
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("gssh serve's log: %w", err)
		}
		_, err := out.Write(c.Out)
		return err
	}
	if served, err := remote(ctx, r, OpLogs, req, &res, more); served {
		return res, err
	}
	return r.Local.Logs(ctx, req, out)
}

// Cancel implements Service.
func (r Remote) Cancel(ctx context.Context, req CancelRequest) (CancelResult, error) {
	var w cancelWire
	if served, err := remote(ctx, r, OpCancel, req, &w, nil); served {
		return w.result(), err
	}
	return r.Local.Cancel(ctx, req)
}

// Schedule implements Service.
func (r Remote) Schedule(ctx context.Context, req ScheduleRequest) (PassResult, error) {
	var w passWire
	if served, err := remote(ctx, r, OpSchedule, req, &w, nil); served {
		return w.result(), err
	}
	return r.Local.Schedule(ctx, req)
}

// held is a call answered with []HoldResult (hold, release, update,
// requeue).
func held[A any](ctx context.Context, r Remote, op string, args A, local func() ([]HoldResult, error)) ([]HoldResult, error) {
	var ws []heldWire
	if served, err := remote(ctx, r, op, args, &ws, nil); served {
		return heldFromWire(ws), err
	}
	return local()
}

// Hold implements Service.
func (r Remote) Hold(ctx context.Context, ids []job.ID) ([]HoldResult, error) {
	return held(ctx, r, OpHold, ids, func() ([]HoldResult, error) { return r.Local.Hold(ctx, ids) })
}

// Release implements Service.
func (r Remote) Release(ctx context.Context, ids []job.ID) ([]HoldResult, error) {
	return held(ctx, r, OpRelease, ids, func() ([]HoldResult, error) { return r.Local.Release(ctx, ids) })
}

// Update implements Service.
func (r Remote) Update(ctx context.Context, req UpdateRequest) ([]HoldResult, error) {
	return held(ctx, r, OpUpdate, req, func() ([]HoldResult, error) { return r.Local.Update(ctx, req) })
}

// Requeue implements Service.
func (r Remote) Requeue(ctx context.Context, ids []job.ID, grace time.Duration) ([]HoldResult, error) {
	return held(ctx, r, OpRequeue, requeueArgs{IDs: ids, GraceS: grace.Seconds()}, func() ([]HoldResult, error) { return r.Local.Requeue(ctx, ids, grace) })
}

// Resolve implements Service.
func (r Remote) Resolve(ctx context.Context, names []string) ([]job.ID, error) {
	var ids []job.ID
	if served, err := remote(ctx, r, OpResolve, names, &ids, nil); served {
		return ids, err
	}
	return r.Local.Resolve(ctx, names)
}

// Explain implements Service.
func (r Remote) Explain(ctx context.Context, id job.ID) (Explanation, error) {
	var ex Explanation
	if served, err := remote(ctx, r, OpExplain, id, &ex, nil); served {
		return ex, err
	}
	return r.Local.Explain(ctx, id)
}

// Usage implements Service.
func (r Remote) Usage(ctx context.Context) (UsageDoc, error) {
	var doc UsageDoc
	if served, err := remote(ctx, r, OpUsage, struct{}{}, &doc, nil); served {
		return doc, err
	}
	return r.Local.Usage(ctx)
}

// Reap implements Service.
func (r Remote) Reap(ctx context.Context, req ReapRequest) (ReapDoc, error) {
	var doc ReapDoc
	if served, err := remote(ctx, r, OpReap, req, &doc, nil); served {
		return doc, err
	}
	return r.Local.Reap(ctx, req)
}

// Events implements Service: the events come as gssh serve reads them.
func (r Remote) Events(ctx context.Context, q EventQuery, fn func(eventlog.Record) error) (EventsResult, error) {
	var res EventsResult
	more := func(b json.RawMessage) error {
		var c eventChunk
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("gssh serve's events: %w", err)
		}
		switch {
		case c.Event != nil:
			return fn(*c.Event)
		case q.Warn != nil:
			q.Warn(c.Warn)
		}
		return nil
	}
	if served, err := remote(ctx, r, OpEvents, q.Filter, &res, more); served {
		return res, err
	}
	return r.Local.Events(ctx, q, fn)
}

// Drain implements Service.
func (r Remote) Drain(ctx context.Context, req DrainRequest) (DrainResult, error) {
	var res DrainResult
	if served, err := remote(ctx, r, OpDrain, req, &res, nil); served {
		return res, err
	}
	return r.Local.Drain(ctx, req)
}

// Resume implements Service.
func (r Remote) Resume(ctx context.Context, hosts []string) (DrainResult, error) {
	var res DrainResult
	if served, err := remote(ctx, r, OpResume, hosts, &res, nil); served {
		return res, err
	}
	return r.Local.Resume(ctx, hosts)
}

// DrainJobs implements Service.
func (r Remote) DrainJobs(ctx context.Context, hosts []string) ([]job.Job, error) {
	var js []job.Job
	if served, err := remote(ctx, r, OpDrainJobs, hosts, &js, nil); served {
		return js, err
	}
	return r.Local.DrainJobs(ctx, hosts)
}

// stateFileOnly refuses a call on the state file itself to anyone but
// the pass account in a lab whose queue gssh serve alone keeps (its
// file is the pass account's, mode 0600).
func (r Remote) stateFileOnly(what string) error {
	if r.servedOnly() && r.member() {
		return fmt.Errorf("gssh state %s works on the state file, which in the queue of %s only its pass user %s reads: ask them", what, r.lab.file, r.lab.passUser)
	}
	return nil
}

// StateBackup implements Service (Local's, see stateFileOnly).
func (r Remote) StateBackup(ctx context.Context, file string) (state.Summary, error) {
	if err := r.stateFileOnly("backup"); err != nil {
		return state.Summary{}, err
	}
	return r.Local.StateBackup(ctx, file)
}

// StateCheck implements Service (Local's, see stateFileOnly).
func (r Remote) StateCheck(ctx context.Context, file string) (state.Report, error) {
	if file == "" {
		if err := r.stateFileOnly("check"); err != nil {
			return state.Report{}, err
		}
	}
	return r.Local.StateCheck(ctx, file)
}

// StateRestore implements Service (Local's, see stateFileOnly).
func (r Remote) StateRestore(ctx context.Context, req RestoreRequest) (RestoreResult, error) {
	if err := r.stateFileOnly("restore"); err != nil {
		return RestoreResult{}, err
	}
	return r.Local.StateRestore(ctx, req)
}

// CreateToken implements Service.
func (r Remote) CreateToken(ctx context.Context, req TokenRequest) (TokenCreated, error) {
	var res TokenCreated
	if served, err := remote(ctx, r, OpTokenNew, req, &res, nil); served {
		return res, err
	}
	return r.Local.CreateToken(ctx, req)
}

// Tokens implements Service.
func (r Remote) Tokens(ctx context.Context) (TokensDoc, error) {
	var doc TokensDoc
	if served, err := remote(ctx, r, OpTokens, struct{}{}, &doc, nil); served {
		return doc, err
	}
	return r.Local.Tokens(ctx)
}

// RevokeTokens implements Service.
func (r Remote) RevokeTokens(ctx context.Context, ids []string) ([]TokenInfo, error) {
	var out []TokenInfo
	if served, err := remote(ctx, r, OpTokenDel, ids, &out, nil); served {
		return out, err
	}
	return r.Local.RevokeTokens(ctx, ids)
}

// Doctor implements Service: gssh serve's checks, over its connections,
// where one answers (a lab's hosts are its to reach).
func (r Remote) Doctor(ctx context.Context, q HostQuery) (DoctorDoc, error) {
	var doc DoctorDoc
	if served, err := remote(ctx, r, OpDoctor, q, &doc, nil); served {
		return doc, err
	}
	return r.Local.Doctor(ctx, q)
}

// AddCron implements Service.
func (r Remote) AddCron(ctx context.Context, req CronRequest) (CronEntry, error) {
	var res CronEntry
	if served, err := remote(ctx, r, OpCronAdd, req, &res, nil); served {
		return res, err
	}
	return r.Local.AddCron(ctx, req)
}

// Crons implements Service.
func (r Remote) Crons(ctx context.Context) (CronsDoc, error) {
	var doc CronsDoc
	if served, err := remote(ctx, r, OpCrons, struct{}{}, &doc, nil); served {
		return doc, err
	}
	return r.Local.Crons(ctx)
}

// RemoveCrons implements Service.
func (r Remote) RemoveCrons(ctx context.Context, ids []string) ([]state.Cron, error) {
	var out []state.Cron
	if served, err := remote(ctx, r, OpCronDel, ids, &out, nil); served {
		return out, err
	}
	return r.Local.RemoveCrons(ctx, ids)
}
