// Package httpapi is gssh serve's HTTP API: JSON over versioned paths
// (/v1/...), each request made as its token's user by the daemon's
// service (service.Local.As, as a request over the unix socket is made
// as its peer's), answering with the documents the CLI's --json prints.
// Errors are RFC 9457 problem documents (application/problem+json).
// Routing is the standard library's http.ServeMux patterns; the routes
// and their schemas are written down in openapi.json, served at
// /v1/openapi.json and checked against the handlers by the tests.
package httpapi

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gssh/gssh/dashboard"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/service"
)

// OpenAPI is the API's OpenAPI 3 document.
//
//go:embed openapi.json
var OpenAPI []byte

// MaxBody is the largest request body read, in bytes: a submit's
// command and environment fit many times over.
const MaxBody = 1 << 20

// OpTimeout bounds the writing of an answer that does not stream (as
// the socket's serve.OpTimeout bounds a request's work).
const OpTimeout = 2 * time.Minute

// SendTimeout bounds each write of a streamed answer (a log followed,
// events): a client that stops reading is dropped after it.
const SendTimeout = 10 * time.Second

// Options are what the API needs of gssh serve.
type Options struct {
	// Current is the service now (gssh serve makes a new one on SIGHUP).
	Current func() *service.Local
	// Passes are gssh serve's loop: a request's submit waits for its pass
	// (nil: each request runs its own, as a CLI process does).
	Passes service.Passes
	// Metrics serves /metrics (nil: no such route). MetricsOpen lets
	// clients that are not on loopback read it without a token.
	Metrics     http.Handler
	MetricsOpen bool
	// RPC, when set, answers POST /v1/rpc: the socket's protocol over
	// HTTP, for the CLI's --server URL (serve.Server.Exchange), each
	// request as its token's user.
	RPC *serve.Server
	// StreamTimeout bounds each write of a streamed answer (0:
	// SendTimeout).
	StreamTimeout time.Duration
	// Observe, when set, is told of each request answered: its route
	// pattern ("GET /v1/jobs"), its status and how long it took.
	Observe func(route string, status int, took time.Duration)
	// Dashboard, when set, serves the web dashboard's pages (/, /login,
	// /logout, /static/...), whose script reads the API with the
	// session cookie (dashboard.Handler).
	Dashboard http.Handler
}

// API is the HTTP API of one gssh serve.
type API struct {
	o        Options
	mux      *http.ServeMux
	patterns []string // the routes' patterns, as registered
}

// New is the API of o; its Handler serves it.
func New(o Options) *API {
	a := &API{o: o, mux: http.NewServeMux()}
	a.routes()
	return a
}

// Handler is the API's http.Handler: every route, an unknown one 404, a
// method a route does not take 405 (both as problem documents).
func (a *API) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w}
		_, pattern := a.mux.Handler(r)
		if pattern == "" {
			// Unknown: the mux's own 404 or 405, as a problem document.
			a.mux.ServeHTTP(&problemCatcher{statusWriter: rec}, r)
		} else {
			a.mux.ServeHTTP(rec, r)
		}
		if a.o.Observe != nil {
			if pattern == "" {
				pattern = "unmatched"
			}
			a.o.Observe(pattern, rec.status(), time.Since(start))
		}
	})
}

// Routes are the API's routes, as their http.ServeMux patterns
// ("GET /v1/jobs/{id}"), in the order registered.
func (a *API) Routes() []string { return append([]string(nil), a.patterns...) }

// handlerFunc is a route's handler: its document (nil: it wrote the
// answer itself) and HTTP status, or an error made a problem document.
type handlerFunc func(w http.ResponseWriter, r *http.Request, l *service.Local) (doc any, status int, err error)

// handle registers pattern: with auth, each request's user is its
// token's and l is the service as that user.
func (a *API) handle(pattern string, auth bool, h handlerFunc) {
	a.patterns = append(a.patterns, pattern)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		cur := a.o.Current()
		l := cur
		if auth {
			user, err := a.user(r, cur)
			if err != nil {
				writeError(w, err)
				return
			}
			l = cur.As(user, a.o.Passes)
		}
		// The answer's bound (a stream extends it at each write).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(OpTimeout))
		doc, status, err := h(w, r, l)
		if err != nil && doc == nil {
			writeError(w, err)
			return
		}
		if doc != nil {
			writeJSON(w, status, doc)
		}
	})
}

// user is the user a request acts as: its bearer token's, or the
// dashboard's session cookie's (dashboard.Cookie: the token it logged in
// with). A request that changes something on a cookie alone must carry
// the header dashboard.CSRFHeader, which a form or a link of another site
// cannot send.
func (a *API) user(r *http.Request, l *service.Local) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if c, err := r.Cookie(dashboard.Cookie); err == nil && c.Value != "" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get(dashboard.CSRFHeader) == "" {
				return "", &problem{status: http.StatusForbidden, detail: "a change with the dashboard's cookie needs the " + dashboard.CSRFHeader + " header (the dashboard's page sends it)"}
			}
			return l.TokenUser(r.Context(), c.Value)
		}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", errNoToken
	}
	return l.TokenUser(r.Context(), strings.TrimSpace(tok))
}

// errNoToken is a request without a bearer token.
var errNoToken = fmt.Errorf("%w: give a token as Authorization: Bearer TOKEN (gssh token create makes one)", service.ErrBadToken)

// fromLoopback reports whether r came from this host (a loopback
// address).
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// writeJSON writes doc as an indented JSON answer.
func writeJSON(w http.ResponseWriter, status int, doc any) {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		writeError(w, fmt.Errorf("the answer could not be written: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads r's JSON body into v, strictly (an unknown field is an
// error naming it), at most MaxBody bytes; errors are badRequest.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	// JSON, or what curl -d says of it (form-urlencoded: its body is the
	// JSON all the same); a form of another kind is refused.
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return &problem{status: http.StatusUnsupportedMediaType, detail: fmt.Sprintf("the body is %s: send application/json", ct)}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		if dec.More() {
			return badRequest("the body has more after its JSON object: send one")
		}
		return nil
	case errors.As(err, &mbe):
		return &problem{status: http.StatusRequestEntityTooLarge, detail: fmt.Sprintf("the body is larger than %d bytes", MaxBody)}
	case errors.As(err, &se):
		return badRequest(fmt.Sprintf("the body is not JSON: %v (at byte %d)", err, se.Offset))
	case errors.As(err, &te) && te.Field != "":
		return badRequest(fmt.Sprintf("field %s: want %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + " (docs/api.md lists the fields)")
	case errors.Is(err, context.Canceled):
		return err
	}
	return badRequest("the body: " + strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind is a Go kind as JSON names it.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "true or false"
	case k == "string":
		return "a string"
	case k == "slice":
		return "a list"
	}
	return "an object"
}
