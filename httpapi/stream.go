package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/service"
)

// streamWriter writes a streamed answer: the header once, at the first
// write; each write flushed, with SendTimeout to go (a client that stops
// reading is dropped then).
type streamWriter struct {
	timeout     time.Duration
	w           http.ResponseWriter
	rc          *http.ResponseController
	contentType string
	started     bool
}

func (a *API) newStream(w http.ResponseWriter, contentType string) *streamWriter {
	w.Header().Set("Trailer", "Gssh-Error")
	return &streamWriter{timeout: cmp.Or(a.o.StreamTimeout, SendTimeout), w: w, rc: http.NewResponseController(w), contentType: contentType}
}

func (s *streamWriter) start() {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", s.contentType)
		s.w.Header().Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.start()
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	n, err := s.w.Write(b)
	if err == nil {
		err = s.rc.Flush()
	}
	return n, err
}

// end finishes the answer: err as a problem document when nothing was
// written yet, else in the Gssh-Error trailer (the body is cut short).
func (s *streamWriter) end(err error) {
	switch {
	case err == nil:
		s.start()
	case !s.started:
		s.w.Header().Del("Trailer")
		writeError(s.w, err)
	default:
		s.w.Header().Set("Gssh-Error", strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

// jobLog is GET /v1/jobs/{id}/log?tail=&follow=&attempt=: the job's
// log's bytes (text/plain), as gssh logs prints them; with follow, what
// the job writes next until it ends (the Gssh-Job-State trailer then
// says how it ended).
func (a *API) jobLog(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	id, err := jobID(r, l)
	if err != nil {
		return nil, 0, err
	}
	q := r.URL.Query()
	req := service.LogsRequest{ID: id, Tail: -1}
	if req.Tail, err = intParam(q.Get("tail"), "tail", -1, -1, 1<<30); err != nil {
		return nil, 0, err
	}
	if req.Follow, err = boolParam(q.Get("follow"), "follow"); err != nil {
		return nil, 0, err
	}
	if req.Attempt, err = intParam(q.Get("attempt"), "attempt", 0, 0, 1<<20); err != nil {
		return nil, 0, err
	}
	sw := a.newStream(w, "text/plain; charset=utf-8")
	w.Header().Add("Trailer", "Gssh-Job-State")
	res, err := l.Logs(r.Context(), req, sw)
	if res.Ended != nil {
		w.Header().Set("Gssh-Job-State", string(res.Ended.State))
	}
	sw.end(err)
	return nil, 0, nil
}

// events is GET /v1/events?since=&kind=&user=&host=&job=: the event
// log's lines that the filter selects, oldest first, as written
// (application/x-ndjson: gssh events --json).
func (a *API) events(w http.ResponseWriter, r *http.Request, l *service.Local) (any, int, error) {
	q := r.URL.Query()
	var f eventlog.Filter
	var err error
	if s := q.Get("since"); s != "" {
		if f.Since, err = eventlog.ParseSince(s, time.Now()); err != nil {
			return nil, 0, badRequest("since " + err.Error())
		}
	}
	for _, k := range listParam(q["kind"]) {
		if !eventlog.Known(eventlog.Kind(k)) {
			return nil, 0, badRequest(fmt.Sprintf("kind %q: no such event (docs/operating.md#event-log lists them)", k))
		}
		f.Kinds = append(f.Kinds, eventlog.Kind(k))
	}
	f.User, f.Host = q.Get("user"), q.Get("host")
	if s := q.Get("job"); s != "" {
		n, err := strconv.ParseUint(s, 10, 63)
		if err != nil || n == 0 {
			return nil, 0, badRequest(fmt.Sprintf("job %q: give a job id", s))
		}
		f.Job = job.ID(n)
	}
	sw := a.newStream(w, "application/x-ndjson")
	res, err := l.Events(r.Context(), service.EventQuery{Filter: f}, func(rec eventlog.Record) error {
		_, err := fmt.Fprintf(sw, "%s\n", rec.Line)
		return err
	})
	_ = res // no events yet: an empty answer
	sw.end(err)
	return nil, 0, nil
}
