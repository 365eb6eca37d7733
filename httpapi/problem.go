package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
)

// Problem is an error answer (RFC 9457, application/problem+json): its
// status, its title (the status's words), what went wrong in words a
// person can act on, and gssh's kind of it where it has one ("not_yours",
// "not_found": service.FaultOf's kinds).
type Problem struct {
	Type   string `json:"type"` // about:blank: the status says it
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Kind   string `json:"kind,omitempty"`
}

// problem is an error of the API's own with its status.
type problem struct {
	status int
	detail string
}

func (p *problem) Error() string { return p.detail }

func badRequest(detail string) error { return &problem{status: http.StatusBadRequest, detail: detail} }

func notFound(detail string) error { return &problem{status: http.StatusNotFound, detail: detail} }

// statusOf is the HTTP status of err: the API's own problems carry
// theirs; a token that opens nothing is 401, a job of another user's
// 403, no such job 404, a job in the wrong state 409, a busy state or
// pass 503, a damaged or full state 500; anything else (a bad value) 400.
func statusOf(err error) int {
	var p *problem
	var fe *state.FileError
	switch {
	case errors.As(err, &p):
		return p.status
	case errors.Is(err, service.ErrBadToken):
		return http.StatusUnauthorized
	case errors.Is(err, service.ErrNotYours), errors.Is(err, service.ErrNotAdmin), errors.Is(err, service.ErrNotPassUser):
		return http.StatusForbidden
	case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrNoToken), errors.Is(err, state.ErrNoState), errors.Is(err, sshexec.ErrUnknownHost):
		return http.StatusNotFound
	case errors.Is(err, service.ErrNotDrained):
		return http.StatusConflict
	case errors.Is(err, control.ErrNotQueued), errors.Is(err, control.ErrNotHeld), errors.Is(err, control.ErrNotRunning), errors.Is(err, control.ErrEnded):
		return http.StatusConflict
	case errors.Is(err, state.ErrBusy), errors.Is(err, service.ErrPassBusy), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	case errors.As(err, &fe), errors.Is(err, state.ErrDamaged), errors.Is(err, state.ErrDiskFull):
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// writeError writes err as a problem document. A 401 says nothing of
// why the token failed (wrong, revoked, expired are alike).
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: err.Error()}
	if f := service.FaultOf(err, 0); f != nil && f.Kind != service.FaultNotServed {
		p.Kind = f.Kind
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gssh"`)
		p.Detail, p.Kind = "a valid token is needed: give one as Authorization: Bearer TOKEN (gssh token create makes one)", ""
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p Problem) {
	b, _ := json.MarshalIndent(p, "", "  ")
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}

// statusWriter is a ResponseWriter that keeps the status written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// problemCatcher turns the mux's own text answers (404 page not found,
// 405 method not allowed) into problem documents.
type problemCatcher struct {
	*statusWriter
	caught bool
}

func (p *problemCatcher) WriteHeader(code int) {
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		p.caught = true
		detail := "no such route: the API's routes are in /v1/openapi.json"
		if code == http.StatusMethodNotAllowed {
			detail = "the route does not take this method; it takes " + p.Header().Get("Allow")
		}
		writeProblem(p.statusWriter, Problem{Type: "about:blank", Title: http.StatusText(code), Status: code, Detail: detail})
		return
	}
	p.statusWriter.WriteHeader(code)
}

func (p *problemCatcher) Write(b []byte) (int, error) {
	if p.caught {
		return len(b), nil // the mux's text: the problem document stands for it
	}
	return p.statusWriter.Write(b)
}
