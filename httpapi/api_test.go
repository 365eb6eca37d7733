package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"

	"github.com/gssh/gssh/dashboard"
	"github.com/gssh/gssh/httpapi"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/service/servicetest"
)

// fixture is an API over a service of the local host "ctl", whose
// nvidia-smi replays the a100x4 fixture (GPU 3 idle), in personal mode
// as ann, with a token of hers; every answer is checked against the
// OpenAPI document (check).
type fixture struct {
	t      *testing.T
	svc    *service.Local
	srv    *httptest.Server
	api    *httpapi.API
	token  string
	router routers.Router
	routes map[string]bool // the OpenAPI routes answered, "GET /v1/jobs/{id}"
}

// ndjson decodes an application/x-ndjson body for the OpenAPI check:
// every line a JSON object; the body is its text.
func ndjson(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var v map[string]any
		if line != "" && json.Unmarshal([]byte(line), &v) != nil {
			return nil, fmt.Errorf("line %d is not a JSON object: %q", i+1, line)
		}
	}
	return string(b), nil
}

func newFixture(t *testing.T, o httpapi.Options) *fixture {
	t.Helper()
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjson)
	svc := servicetest.Local(t, "ann")
	tok, err := svc.CreateToken(context.Background(), service.TokenRequest{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	o.Current = func() *service.Local { return svc }
	if o.RPC == nil {
		so := service.ServeOptions{Current: o.Current, Code: func(error) int { return 1 }}
		o.RPC = &serve.Server{Handlers: service.Handlers(so), Duplex: service.DuplexHandlers(so), Long: service.Long,
			FaultOf: func(err error) *serve.Fault { return service.FaultOf(err, 1) }}
	}
	api := httpapi.New(o)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	doc.Servers = nil // any host: the test server's
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, svc: svc, srv: srv, api: api, token: tok.Token, router: router, routes: map[string]bool{}}
}

// do sends method path with body (JSON of it, unless a string or nil)
// and the fixture's token (token "": none), checks the request and the
// answer against the OpenAPI document, and returns the answer's status,
// header and body.
func (f *fixture) do(method, path string, body any, token string) (int, http.Header, []byte) {
	f.t.Helper()
	var in []byte
	switch b := body.(type) {
	case nil:
	case string:
		in = []byte(b)
	default:
		in, _ = json.Marshal(b)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(in))
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
		if path == "/v1/rpc" {
			req.Header.Set("Content-Type", "application/x-ndjson")
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f.check(req, in, resp, out)
	return resp.StatusCode, resp.Header, out
}

// check validates an answer (and, when it was well-formed, its request)
// against the OpenAPI document. A route the document lacks, a status or
// a body it does not describe fails the test.
func (f *fixture) check(req *http.Request, in []byte, resp *http.Response, out []byte) {
	f.t.Helper()
	route, params, err := f.router.FindRoute(req)
	if resp.StatusCode == http.StatusNotFound && strings.Contains(string(out), "no such route") ||
		resp.StatusCode == http.StatusMethodNotAllowed {
		return // not a route: nothing to check it against
	}
	if err != nil {
		f.t.Errorf("%s %s: not in openapi.json: %v", req.Method, req.URL.Path, err)
		return
	}
	f.routes[req.Method+" "+route.Path] = true
	opt := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	rin := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opt}
	req.Body = io.NopCloser(bytes.NewReader(in))
	if resp.StatusCode < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), rin); err != nil {
			f.t.Errorf("%s %s: the request does not match openapi.json: %v", req.Method, req.URL, err)
		}
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: rin, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(out)), Options: opt})
	if err != nil {
		f.t.Errorf("%s %s: answer %d does not match openapi.json: %v\n%s", req.Method, req.URL, resp.StatusCode, err, out)
	}
}

// problem decodes a problem document, failing unless it is one of
// status.
func (f *fixture) problem(status int, got int, h http.Header, body []byte) httpapi.Problem {
	f.t.Helper()
	var p httpapi.Problem
	if got != status || h.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != status || p.Detail == "" {
		f.t.Errorf("want a problem document of %d; got %d %s: %s", status, got, h.Get("Content-Type"), body)
	}
	return p
}

func decodeInto[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// TestAPI: every route, with a token, answers the CLI's documents, each
// checked against openapi.json, and every route of the API is in it.
func TestAPI(t *testing.T) {
	f := newFixture(t, httpapi.Options{})
	if code, _, body := f.do("GET", "/healthz", nil, ""); code != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("healthz: %d %s", code, body)
	}
	if code, _, body := f.do("GET", "/v1/openapi.json", nil, ""); code != 200 || !bytes.Equal(body, httpapi.OpenAPI) {
		t.Errorf("openapi.json: %d, %d bytes", code, len(body))
	}

	// A job that runs, its log followed to its end.
	code, h, body := f.do("POST", "/v1/jobs", map[string]any{"command": []string{"sh", "-c", "echo hello $GSSH_JOB_ID; sleep 0.3"}, "mem": "1G", "host": "ctl", "timeout": "1m"}, f.token)
	sub := decodeInto[service.SubmitDoc](t, body)
	if code != 201 || sub.ID != 1 || sub.State != "running" || sub.Host != "ctl" || h.Get("Location") != "/v1/jobs/1" {
		t.Fatalf("submit: %d %s", code, body)
	}
	code, _, body = f.do("GET", "/v1/jobs/1/memory", nil, f.token)
	if code != http.StatusOK || !strings.Contains(string(body), `"schema": "gssh.job.memory/v1"`) {
		t.Errorf("memory: %d %s", code, body)
	}
	code, h, body = f.do("GET", "/v1/jobs/1/log?follow=true", nil, f.token)
	if code != 200 || string(body) != "hello 1\n" || h.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("log -f: %d %q %v", code, body, h)
	}
	code, _, body = f.do("GET", "/v1/jobs/1", nil, f.token)
	if show := decodeInto[service.ShowDoc](t, body); code != 200 || show.ID != 1 || show.User != "ann" {
		t.Errorf("show: %d %s", code, body)
	}

	// async: stored, answered before its pass (202).
	code, h, body = f.do("POST", "/v1/jobs", map[string]any{"command": []string{"true"}, "gpus": 4, "async": true}, f.token)
	if sub := decodeInto[service.SubmitDoc](t, body); code != 202 || sub.State != "queued" || h.Get("Location") == "" {
		t.Errorf("async submit: %d %s", code, body)
	}
	if sub := decodeInto[service.SubmitDoc](t, body); sub.ID > 0 {
		defer f.do("DELETE", fmt.Sprintf("/v1/jobs/%d", sub.ID), nil, f.token)
	}

	// A shell command, held; released, changed, cancelled.
	code, _, body = f.do("POST", "/v1/jobs", `{"command": "sleep 30", "mem": "1G", "hold": true}`, f.token)
	if sub := decodeInto[service.SubmitDoc](t, body); code != 201 || sub.ID != 3 || !sub.Held {
		t.Fatalf("held submit: %d %s", code, body)
	}
	if code, _, body := f.do("PATCH", "/v1/jobs/3", map[string]any{"priority": 7, "timeout": "2h"}, f.token); code != 200 ||
		!strings.Contains(string(body), `"priority": 7`) {
		t.Errorf("update: %d %s", code, body)
	}
	if code, _, body := f.do("POST", "/v1/jobs/3/release", nil, f.token); code != 200 {
		t.Errorf("release: %d %s", code, body)
	}
	code, h, body = f.do("POST", "/v1/jobs/3/release", nil, f.token)
	if p := f.problem(409, code, h, body); p.Kind != "not_held" {
		t.Errorf("a second release: %+v", p)
	}
	code, h, body = f.do("POST", "/v1/jobs/3/hold", nil, f.token)
	if p := f.problem(409, code, h, body); p.Kind != "not_queued" {
		t.Errorf("a hold of a running job: %+v", p)
	}
	code, _, body = f.do("GET", "/v1/jobs?limit=1", nil, f.token)
	page := decodeInto[httpapi.JobsPage](t, body)
	if code != 200 || page.Schema != "gssh.jobs/v2" || len(page.Jobs) != 1 {
		t.Errorf("list, one a page: %d %s", code, body)
	}
	code, _, body = f.do("GET", "/v1/jobs?all=true&limit=1", nil, f.token)
	if page := decodeInto[httpapi.JobsPage](t, body); code != 200 || len(page.Jobs) != 1 || page.Jobs[0].ID != 1 || page.Next != 1 {
		t.Errorf("list -a, one a page: %d %s", code, body)
	}
	code, _, body = f.do("GET", "/v1/jobs?all=true&after=1", nil, f.token)
	if page := decodeInto[httpapi.JobsPage](t, body); code != 200 || len(page.Jobs) != 2 || page.Jobs[0].ID != 2 || page.Jobs[1].ID != 3 || page.Next != 0 {
		t.Errorf("list -a, the page after 1: %d %s", code, body)
	}
	code, _, body = f.do("DELETE", "/v1/jobs/3?grace=1s", nil, f.token)
	if c := decodeInto[httpapi.CancelDoc](t, body); code != 200 || c.Job.State != "cancelled" {
		t.Errorf("cancel: %d %s", code, body)
	}

	// The hosts, their GPUs, usage, events, a drain.
	code, _, body = f.do("GET", "/v1/gpus?max_age=0s", nil, f.token)
	if g := decodeInto[service.GPUsDoc](t, body); code != 200 || len(g.Hosts) != 1 || len(g.Hosts[0].GPUs) != 4 {
		t.Errorf("gpus: %d %s", code, body)
	}
	if code, _, body := f.do("GET", "/v1/hosts", nil, f.token); code != 200 || !strings.Contains(string(body), `"gssh.hosts/v2"`) {
		t.Errorf("hosts: %d %s", code, body)
	}
	if code, _, body := f.do("GET", "/v1/usage", nil, f.token); code != 200 || !strings.Contains(string(body), `"user": "ann"`) {
		t.Errorf("usage: %d %s", code, body)
	}
	code, h, body = f.do("GET", "/v1/events?job=1", nil, f.token)
	if lines := strings.Split(strings.TrimSpace(string(body)), "\n"); code != 200 || h.Get("Content-Type") != "application/x-ndjson" || len(lines) < 2 || !strings.Contains(lines[0], `"job_submit"`) {
		t.Errorf("events: %d %s", code, body)
	}
	if code, _, body := f.do("PUT", "/v1/hosts/ctl/drain", map[string]any{"reason": "new PSU"}, f.token); code != 200 || !strings.Contains(string(body), "new PSU") {
		t.Errorf("drain: %d %s", code, body)
	}
	if code, _, body := f.do("DELETE", "/v1/hosts/ctl/drain", nil, f.token); code != 200 {
		t.Errorf("resume: %d %s", code, body)
	}

	// The CLI's protocol: a request line, its answer's lines, as the
	// token's user; without a token, 401.
	code, h, body = f.do("POST", "/v1/rpc", `{"op": "jobs", "args": {"view": {"state": ""}, "args": {"All": true}}}`+"\n", f.token)
	var ans serve.Answer
	if err := json.Unmarshal(body, &ans); err != nil || code != 200 || !ans.OK || !strings.Contains(string(ans.Result), `"gssh.jobs/v2"`) || h.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("rpc jobs: %d %s", code, body)
	}
	code, _, body = f.do("POST", "/v1/rpc", `{"op": "wake"}`+"\n", f.token)
	if json.Unmarshal(body, &ans); code != 200 || ans.OK || ans.Error == nil || !strings.Contains(ans.Error.Message, "unknown op") {
		t.Errorf("rpc wake (the socket's own): %d %s", code, body)
	}
	code, h, body = f.do("POST", "/v1/rpc", `{"op": "jobs"}`+"\n", "")
	f.problem(401, code, h, body)

	// Every route of the API is in openapi.json, and was answered here
	// (but /metrics, which this API has not).
	doc, _ := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, r := range f.api.Routes() {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(f.api.Routes(), d) && d != "GET /metrics" {
			t.Errorf("openapi.json has %s, which the API does not serve", d)
		}
		if !f.routes[d] && d != "GET /metrics" {
			t.Errorf("%s was not tried here", d)
		}
	}
}

// TestAPIBadInput: what a bad request gets.
func TestAPIBadInput(t *testing.T) {
	f := newFixture(t, httpapi.Options{})
	// Tokens: none, malformed, wrong, expired, revoked: 401, alike.
	expired, err := f.svc.CreateToken(context.Background(), service.TokenRequest{Expires: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	revoked, _ := f.svc.CreateToken(context.Background(), service.TokenRequest{})
	if _, err := f.svc.RevokeTokens(context.Background(), []string{revoked.Info.ID}); err != nil {
		t.Fatal(err)
	}
	wrong := f.token[:len(f.token)-4] + "AAAA"
	var details []string
	for _, tok := range []string{"", "nonsense", "gssh_00000000_x", wrong, expired.Token, revoked.Token} {
		code, h, body := f.do("GET", "/v1/jobs", nil, tok)
		p := f.problem(401, code, h, body)
		details = append(details, p.Detail)
		if h.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: no WWW-Authenticate", tok)
		}
	}
	if len(slices.Compact(slices.Clone(details))) != 1 {
		t.Errorf("401s that say why: %q", details)
	}

	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"command": ["true"], "gpu": 1}`, 400, `unknown field "gpu"`},
		{`{"command": ["true"], "gpus": "two"}`, 400, "field gpus: want a number"},
		{`{"command": ["true"], "mem": "8X"}`, 400, "mem: "},
		{`{"command": ["tr\u0000ue"]}`, 400, "NUL"},
		{`{"command": ["true"], "name": "` + strings.Repeat("n", 300) + `"}`, 400, "a job name takes at most 200"},
		{`{"command": ["true"], "timeout": "soon"}`, 400, "timeout: "},
		{`{"command": []}`, 400, "command: empty"},
		{`{"command": ["true"]`, 400, "the body"},
		{`{"command": ["true"]} {}`, 400, "more after its JSON object"},
		{`{"command": ["` + strings.Repeat("x", httpapi.MaxBody) + `"]}`, 413, "larger than"},
	} {
		code, h, body := f.do("POST", "/v1/jobs", c.body, f.token)
		if p := f.problem(c.status, code, h, body); !strings.Contains(p.Detail, c.want) {
			t.Errorf("%.60s: %q, want %q", c.body, p.Detail, c.want)
		}
	}
	code, h, body := f.do("GET", "/v1/jobs/99", nil, f.token)
	f.problem(404, code, h, body)
	code, h, body = f.do("GET", "/v1/jobs/x", nil, f.token)
	f.problem(404, code, h, body)
	code, h, body = f.do("GET", "/v1/nope", nil, f.token)
	f.problem(404, code, h, body)
	code, h, body = f.do("PUT", "/v1/jobs", nil, f.token)
	if p := f.problem(405, code, h, body); !strings.Contains(p.Detail, "GET") || h.Get("Allow") == "" {
		t.Errorf("405: %+v %v", p, h)
	}
	code, h, body = f.do("GET", "/v1/jobs?limit=0", nil, f.token)
	f.problem(400, code, h, body)
	code, h, body = f.do("POST", "/v1/jobs/99/hold", nil, f.token)
	f.problem(404, code, h, body)
	code, h, body = f.do("PUT", "/v1/hosts/nope/drain", nil, f.token)
	f.problem(404, code, h, body)
	code, h, body = f.do("DELETE", "/v1/hosts/ctl/drain", nil, f.token)
	if p := f.problem(409, code, h, body); p.Kind != "not_drained" {
		t.Errorf("resume of a host not drained: %+v", p)
	}
	code, h, body = f.do("PUT", "/v1/hosts/ctl/drain", `{"at": "someday"}`, f.token)
	if p := f.problem(400, code, h, body); !strings.HasPrefix(p.Detail, "at ") {
		t.Errorf("a drain at someday: %+v", p)
	}
	if code, _, body := f.do("PUT", "/v1/hosts/ctl/drain", `{"at": "+2h", "reason": "later"}`, f.token); code != 200 || !strings.Contains(string(body), `"from"`) {
		t.Errorf("a drain at +2h: %d %s", code, body)
	}

	// A command whose first word has control characters is taken, its
	// name made printable (every pass can launch it).
	code, _, body = f.do("POST", "/v1/jobs", `{"command": ["\u001b[31mred"], "hold": true}`, f.token)
	if sub := decodeInto[service.SubmitDoc](t, body); code != 201 || sub.ID == 0 {
		t.Fatalf("a command with an escape: %d %s", code, body)
	} else if _, _, show := f.do("GET", fmt.Sprintf("/v1/jobs/%d", sub.ID), nil, f.token); !strings.Contains(string(show), `"name": "?[31mred"`) {
		t.Errorf("its name: %s", show)
	}
}

// TestAPISlowReader: a client that follows a log and never reads is
// dropped once a write waits past the bound; the API goes on.
func TestAPISlowReader(t *testing.T) {
	ended := make(chan string, 16)
	f := newFixture(t, httpapi.Options{StreamTimeout: 300 * time.Millisecond, Observe: func(route string, status int, took time.Duration) {
		ended <- fmt.Sprint(route, " ", status)
	}})
	code, _, body := f.do("POST", "/v1/jobs", map[string]any{"command": "yes gssh-says-hello-to-the-terminal | head -c 200000000; sleep 30", "mem": "1G", "host": "ctl"}, f.token)
	if code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	<-ended
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/jobs/1/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	select {
	case r := <-ended:
		if !strings.HasPrefix(r, "GET /v1/jobs/{id}/log") {
			t.Errorf("ended: %s", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the log stream of a client that never reads was not dropped within 30s")
	}
	if code, _, _ := f.do("GET", "/healthz", nil, ""); code != 200 {
		t.Errorf("the API after a dropped stream: %d", code)
	}
	f.do("DELETE", "/v1/jobs/1?grace=0s", nil, f.token)
}

// TestMetricsAccess: /metrics answers loopback without a token, others
// with one (or with MetricsOpen).
func TestMetricsAccess(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "gssh_up 1\n") })
	for _, c := range []struct {
		open   bool
		remote string
		token  bool
		want   int
	}{
		{false, "127.0.0.1:5000", false, 200},
		{false, "[::1]:5000", false, 200},
		{false, "10.1.2.3:5000", false, 401},
		{false, "10.1.2.3:5000", true, 200},
		{true, "10.1.2.3:5000", false, 200},
	} {
		f := newFixture(t, httpapi.Options{Metrics: metrics, MetricsOpen: c.open})
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = c.remote
		if c.token {
			req.Header.Set("Authorization", "Bearer "+f.token)
		}
		rec := httptest.NewRecorder()
		f.api.Handler().ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%+v: %d %s", c, rec.Code, rec.Body)
		}
		if c.want == 200 && rec.Body.String() != "gssh_up 1\n" {
			t.Errorf("%+v: %q", c, rec.Body)
		}
	}
}

// TestCookieAuth: the dashboard's session cookie stands for the token; a
// change on the cookie alone needs the dashboard's header (a form of
// another site cannot send it); a bad cookie is a 401 as a bad token is.
func TestCookieAuth(t *testing.T) {
	f := newFixture(t, httpapi.Options{})
	req := func(method, path, cookie string, header bool) int {
		t.Helper()
		r, _ := http.NewRequest(method, f.srv.URL+path, nil)
		r.AddCookie(&http.Cookie{Name: dashboard.Cookie, Value: cookie})
		if header {
			r.Header.Set(dashboard.CSRFHeader, "1")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := req("GET", "/v1/jobs", f.token, false); c != http.StatusOK {
		t.Errorf("GET with the cookie: %d", c)
	}
	if c := req("GET", "/v1/jobs", "gssh_00000000_nope", false); c != http.StatusUnauthorized {
		t.Errorf("GET with a bad cookie: %d", c)
	}
	code, _, body := f.do("POST", "/v1/jobs", map[string]any{"command": []string{"sleep", "60"}, "hold": true}, "")
	if code != http.StatusUnauthorized {
		t.Fatalf("a submit without a token: %d", code)
	}
	code, _, body = f.do("POST", "/v1/jobs", map[string]any{"command": []string{"sleep", "60"}, "hold": true}, f.token)
	var sub struct{ ID int }
	json.Unmarshal(body, &sub)
	if code != http.StatusCreated || sub.ID == 0 {
		t.Fatalf("submit: %d %s", code, body)
	}
	path := fmt.Sprintf("/v1/jobs/%d", sub.ID)
	if c := req("DELETE", path, f.token, false); c != http.StatusForbidden {
		t.Errorf("DELETE with the cookie alone: %d, want 403", c)
	}
	if c := req("DELETE", path, f.token, true); c != http.StatusOK {
		t.Errorf("DELETE with the cookie and the header: %d", c)
	}
}
