package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/jobform"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/state"
)

// routes registers every route. Those a person's data goes through need
// a token; the health check and the API's own description do not.
func (a *API) routes() {
	a.handle("GET /healthz", false, func(http.ResponseWriter, *http.Request, *service.Local) (any, int, error) {
		return map[string]string{"status": "ok"}, http.StatusOK, nil
	})
	a.handle("GET /v1/openapi.json", false, func(w http.ResponseWriter, _ *http.Request, _ *service.Local) (any, int, error) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(OpenAPI)
		return nil, 0, nil
	})
	if a.o.Metrics != nil {
		a.mux.HandleFunc("GET /metrics", a.metrics)
		a.patterns = append(a.patterns, "GET /metrics")
	}
	a.handle("GET /v1/jobs", true, listJobs)
	a.handle("POST /v1/jobs", true, submitJob)
	a.handle("GET /v1/jobs/{id}", true, showJob)
	a.handle("DELETE /v1/jobs/{id}", true, cancelJob)
	a.handle("POST /v1/jobs/{id}/hold", true, holdJob)
	a.handle("POST /v1/jobs/{id}/release", true, releaseJob)
	a.handle("PATCH /v1/jobs/{id}", true, updateJob)
	a.handle("GET /v1/jobs/{id}/log", true, a.jobLog)
	a.handle("GET /v1/jobs/{id}/memory", true, jobMemory)
	a.handle("GET /v1/gpus", true, gpus)
	a.handle("GET /v1/hosts", true, hosts)
	a.handle("GET /v1/usage", true, usage)
	a.handle("GET /v1/events", true, a.events)
	a.handle("PUT /v1/hosts/{name}/drain", true, drainHost)
	a.handle("DELETE /v1/hosts/{name}/drain", true, resumeHost)
	if a.o.RPC != nil {
		a.handle("POST /v1/rpc", false, a.rpc)
	}
	if d := a.o.Dashboard; d != nil {
		// Pages, not API routes: in no OpenAPI document.
		for _, p := range []string{"GET /{$}", "GET /login", "POST /login", "POST /logout", "GET /static/"} {
			a.mux.Handle(p, d)
		}
	}
}

// RPCWriteTimeout bounds each write of an answer over POST /v1/rpc: long,
// as a person's gssh run's output waits for their terminal.
const RPCWriteTimeout = 10 * time.Minute

// rpc is POST /v1/rpc: one request of the socket's protocol in the body
// (application/x-ndjson: the request line, then a duplex op's lines),
// its answer's lines as they come, as the token's user (gssh --server
// URL). The body and the answer stream at once (full duplex).
func (a *API) rpc(w http.ResponseWriter, r *http.Request, _ *service.Local) (any, int, error) {
	user, err := a.user(r, a.o.Current())
	if err != nil {
		return nil, 0, err
	}
	rc := http.NewResponseController(w)
	rc.EnableFullDuplex()           // HTTP/1.1: read the body while answering (HTTP/2 always may)
	rc.SetReadDeadline(time.Time{}) // a gssh run's input comes for as long as its job runs
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out := writerFunc(func(b []byte) (int, error) {
		rc.SetWriteDeadline(time.Now().Add(RPCWriteTimeout))
		return w.Write(b)
	})
	a.o.RPC.Exchange(r.Context(), serve.Peer{UID: -1, PID: -1, User: user}, http.MaxBytesReader(w, r.Body, 1<<40), out, rc.Flush)
	return nil, 0, nil
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// metrics serves Options.Metrics: from loopback, or anywhere with
// MetricsOpen; else with a valid token.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if !a.o.MetricsOpen && !fromLoopback(r) {
		if _, err := a.user(r, a.o.Current()); err != nil {
			writeError(w, err)
			return
		}
	}
	a.o.Metrics.ServeHTTP(w, r)
}

// DefaultPage and MaxPage bound GET /v1/jobs's page (?limit=).
const (
	DefaultPage = 100
	MaxPage     = 10000
)

// JobsPage is GET /v1/jobs: gssh ps --json's document, one page of it,
// and the id to ask for the next page from (?after=; 0: none).
type JobsPage struct {
	service.JobsDoc
	Next job.ID `json:"next,omitempty"`
}

// listJobs is GET /v1/jobs?all=&user=&since=&after=&limit=: the jobs
// gssh ps lists (queued and active; with all, ended ones too), oldest
// first, from after's next on, at most limit.
func listJobs(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	q := r.URL.Query()
	var jq service.JobQuery
	var err error
	if jq.All, err = boolParam(q.Get("all"), "all"); err != nil {
		return nil, 0, err
	}
	jq.User = q.Get("user")
	if s := q.Get("since"); s != "" {
		if jq.Since, err = eventlog.ParseSince(s, time.Now()); err != nil {
			return nil, 0, badRequest("since " + err.Error())
		}
		jq.All = true
	}
	limit, err := intParam(q.Get("limit"), "limit", DefaultPage, 1, MaxPage)
	if err != nil {
		return nil, 0, err
	}
	after, err := intParam(q.Get("after"), "after", 0, 0, 1<<62)
	if err != nil {
		return nil, 0, err
	}
	jq.First, jq.After = limit+1, job.ID(after) // one more: whether a next page follows
	doc, err := l.Jobs(r.Context(), jq)
	if err != nil && !errors.Is(err, state.ErrBadRecord) {
		return nil, 0, err
	}
	page := JobsPage{JobsDoc: doc}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		page.Next = page.Jobs[limit-1].ID
	}
	return page, http.StatusOK, nil
}

// submitJob is POST /v1/jobs: a jobform.Form (the fields of gssh
// submit's flags, written as the CLI takes them), answered with gssh
// submit --json's document: 201 when a job was stored (after the pass
// that places it), 202 with "async" (stored, its pass to come), 200 for
// a dry run.
func submitJob(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	var f jobform.Form
	if err := decode(w, r, &f); err != nil {
		return nil, 0, err
	}
	f.Fields = true
	var warnings []string
	req, err := f.Request(func(s string) { warnings = append(warnings, s) }, time.Now(), time.UTC, nil, "")
	if err != nil {
		return nil, 0, badRequest(err.Error() + "; nothing was submitted")
	}
	res, err := l.Submit(r.Context(), req)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range warnings {
		addWarning(w, s)
	}
	status := http.StatusCreated
	switch {
	case res.DryRun:
		status = http.StatusOK
	case req.Async:
		status = http.StatusAccepted // stored; its pass comes after
		fallthrough
	default:
		w.Header().Set("Location", fmt.Sprintf("/v1/jobs/%d", res.Job.ID))
	}
	return res.Doc(), status, nil
}

// jobID is the {id} of r's path: a job id, or an array task's name.
func jobID(r *http.Request, l *service.Local) (job.ID, error) {
	s := r.PathValue("id")
	if n, err := strconv.ParseUint(s, 10, 63); err == nil && n > 0 {
		return job.ID(n), nil
	}
	if _, err := service.ParseRefs([]string{s}); err != nil || !strings.Contains(s, "_") {
		return 0, notFound(fmt.Sprintf("job %q: give a job id (7) or an array task (7_3)", s))
	}
	ids, err := l.Resolve(r.Context(), []string{s})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// showJob is GET /v1/jobs/{id}: gssh show --json's document.
// jobMemory is GET /v1/jobs/{id}/memory: the job's GPU memory over
// time, as gssh serve sampled it.
func jobMemory(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	doc, err := l.Memory(r.Context(), id)
	if err != nil {
		return nil, 0, err
	}
	return doc, http.StatusOK, nil
}

func showJob(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	j, err := l.Job(r.Context(), id)
	if err != nil {
		return nil, 0, err
	}
	doc := service.ShowDoc{Job: j}
	if j.State == job.Queued {
		if ex, err := l.Explain(r.Context(), id); err == nil {
			doc.Queue = &ex
		}
	}
	return doc, http.StatusOK, nil
}

// CancelDoc is DELETE /v1/jobs/{id}: the job as recorded, and whether
// its stop is only recorded (a lab member's running job: the next pass
// stops it).
type CancelDoc struct {
	Job      job.Job `json:"job"`
	Recorded bool    `json:"recorded,omitempty"`
}

// cancelJob is DELETE /v1/jobs/{id}?grace=10s&force=: gssh cancel.
func cancelJob(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	q := r.URL.Query()
	grace := service.DefaultGrace
	if s := q.Get("grace"); s != "" {
		if grace, err = time.ParseDuration(s); err != nil || grace < 0 || grace > time.Hour {
			return nil, 0, badRequest(fmt.Sprintf("grace %q: give a duration from 0s to 1h, such as 10s", s))
		}
	}
	force, err := boolParam(q.Get("force"), "force")
	if err != nil {
		return nil, 0, err
	}
	res, err := l.Cancel(r.Context(), service.CancelRequest{ID: id, Grace: grace, Force: force})
	if err != nil {
		return nil, 0, err
	}
	return CancelDoc{Job: res.Job, Recorded: res.Recorded}, http.StatusOK, nil
}

// holdJob, releaseJob: POST /v1/jobs/{id}/hold and /release, answered
// with the job as recorded.
func holdJob(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	return held(r, l, l.Hold)
}

func releaseJob(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	return held(r, l, l.Release)
}

func held(r *http.Request, l *service.Local, do func(context.Context, []job.ID) ([]service.HoldResult, error)) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	rs, err := do(r.Context(), []job.ID{id})
	if err != nil {
		return nil, 0, err
	}
	if len(rs) != 1 {
		return nil, 0, fmt.Errorf("job %d: %d results", id, len(rs))
	}
	if rs[0].Err != nil {
		return nil, 0, rs[0].Err
	}
	return rs[0].Job, http.StatusOK, nil
}

// updateJob is PATCH /v1/jobs/{id}: gssh update of one queued job.
func updateJob(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	var f jobform.Update
	if err := decode(w, r, &f); err != nil {
		return nil, 0, err
	}
	f.Fields = true
	req, err := f.Request(func(s string) { addWarning(w, s) })
	if err != nil {
		return nil, 0, badRequest(err.Error())
	}
	req.IDs = []job.ID{id}
	rs, err := l.Update(r.Context(), req)
	if err != nil {
		return nil, 0, err
	}
	if len(rs) != 1 || rs[0].Err != nil {
		if len(rs) == 1 {
			return nil, 0, rs[0].Err
		}
		return nil, 0, fmt.Errorf("job %d: %d results", id, len(rs))
	}
	return rs[0].Job, http.StatusOK, nil
}

// gpus is GET /v1/gpus?host=&label=&max_age=: gssh gpus --json's
// document, from the streams' snapshots at most max_age old (5s; 0s: a
// probe now). Hosts that could not be probed are in the document, with
// their errors: still 200.
func gpus(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	q, err := hostQuery(r)
	if err != nil {
		return nil, 0, err
	}
	doc, err := l.CachedGPUs(r.Context(), q)
	return partial(doc, err)
}

// hosts is GET /v1/hosts?host=&label=: gssh hosts --json's document.
func hosts(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	q, err := hostQuery(r)
	if err != nil {
		return nil, 0, err
	}
	doc, err := l.Hosts(r.Context(), q)
	return partial(doc, err)
}

// partial answers doc with 200 when err is only that some hosts could
// not be probed (the document says which).
func partial(doc any, err error) (any, int, error) {
	var pe *service.PartialError
	if err != nil && !errors.As(err, &pe) {
		return nil, 0, err
	}
	return doc, http.StatusOK, nil
}

// hostQuery reads ?host= and ?label= (repeatable, or comma lists) and
// ?max_age=.
func hostQuery(r *http.Request) (service.HostQuery, error) {
	q := r.URL.Query()
	hq := service.HostQuery{Hosts: listParam(q["host"]), Labels: listParam(q["label"]), MaxAge: 5 * time.Second}
	if s := q.Get("max_age"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > time.Hour {
			return hq, badRequest(fmt.Sprintf("max_age %q: give a duration from 0s (a probe now) to 1h, such as 5s", s))
		}
		hq.MaxAge = d
	}
	return hq, nil
}

// usage is GET /v1/usage: gssh usage --json's document.
func usage(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	doc, err := l.Usage(r.Context())
	if err != nil {
		return nil, 0, err
	}
	return doc, http.StatusOK, nil
}

// DrainForm is PUT /v1/hosts/{name}/drain: gssh drain's --reason and
// --at, written as the CLI takes them (RFC 3339, "2026-12-24 08:00",
// "tomorrow 08:00", "+2h", in UTC where no zone is given; "": now).
type DrainForm struct {
	Reason string `json:"reason,omitempty"`
	At     string `json:"at,omitempty"`
}

// drainHost is PUT /v1/hosts/{name}/drain: gssh drain of one host (lab
// admins).
func drainHost(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	var f DrainForm
	if r.ContentLength != 0 {
		if err := decode(w, r, &f); err != nil {
			return nil, 0, err
		}
	}
	var from time.Time
	if at := strings.TrimSpace(f.At); at != "" && !strings.EqualFold(at, "now") {
		t, err := sched.ParseTime("at", at, time.Now(), time.UTC)
		if err != nil {
			return nil, 0, badRequest(err.Error())
		}
		from = t
	}
	res, err := l.Drain(r.Context(), service.DrainRequest{Hosts: []string{r.PathValue("name")}, Reason: f.Reason, From: from})
	if err != nil {
		return nil, 0, err
	}
	return res, http.StatusOK, nil
}

// resumeHost is DELETE /v1/hosts/{name}/drain: gssh resume.
func resumeHost(_ http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	res, err := l.Resume(r.Context(), []string{r.PathValue("name")})
	if err != nil {
		return nil, 0, err
	}
	return res, http.StatusOK, nil
}

// boolParam reads a query parameter that is true or false ("" false;
// "1", "0" too).
func boolParam(v, name string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(fmt.Sprintf("%s %q: give true or false", name, v))
	}
	return b, nil
}

// intParam reads a whole-number query parameter from lo to hi (def when
// "").
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(fmt.Sprintf("%s %q: give a whole number from %d to %d", name, v, lo, hi))
	}
	return n, nil
}

// listParam is a repeatable query parameter's values, each of which may
// be a comma list, blanks left out.
func listParam(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// addWarning adds s to the answer's Warning header (RFC 9111's 299): a
// value taken that may not be meant (a bare --mem 8, 8 MiB).
func addWarning(w http.ResponseWriter, s string) {
	w.Header().Add("Warning", `299 gssh "`+strings.ReplaceAll(s, `"`, `'`)+`"`)
}
