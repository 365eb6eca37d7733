package notify_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/notify"
	"github.com/gssh/gssh/notify/notifytest"
)

// counts is an Options.Observe that counts outcomes by "channel result".
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) observe(channel, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[channel+" "+result]++
}

func (c *counts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// waitFor waits up to 10 s for f.
func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	for range 1000 {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not so after 10s: %s", what)
}

// failed is job 7 of alice, named train, failed on gpu02 with exit 3.
func failed() eventlog.Event {
	j := job.Job{ID: 7, User: "alice", State: job.Failed, Reason: "exit status 3", Spec: job.Spec{Name: "train"},
		Placement: job.Placement{Host: "gpu02", Indexes: []int{1}}, ExitCode: new(int)}
	*j.ExitCode = 3
	return eventlog.OfJob(time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC), eventlog.JobEnd, j)
}

func TestNoticeOf(t *testing.T) {
	n, ok := notify.NoticeOf(failed())
	if !ok || n.Event != notify.JobFailed || n.User != "alice" || n.Subject != "gssh: job 7 (train) failed on gpu02: exit status 3" ||
		!strings.Contains(n.Text, "exit status 3\n") || !strings.Contains(n.Text, `"event":"job_end"`) {
		t.Errorf("job_end failed: %+v", n)
	}
	down := eventlog.Event{Kind: eventlog.HostDown, Host: "gpu03", Reason: "3 failed contacts in a row"}
	if n, ok := notify.NoticeOf(down); !ok || n.Event != notify.HostDown || n.User != "" || n.Subject != "gssh: host gpu03 is down" {
		t.Errorf("host_down: %+v", n)
	}
	lost := eventlog.Event{Kind: eventlog.GPUFailed, Host: "gpu03", GPUs: []int{5}, Reason: "lost"}
	if n, ok := notify.NoticeOf(lost); !ok || n.Subject != "gssh: GPU 5 of gpu03 failed" {
		t.Errorf("gpu_failed: %+v", n)
	}
	if _, ok := notify.NoticeOf(eventlog.Event{Kind: eventlog.JobSubmit, Job: 1}); ok {
		t.Error("a submit is told to someone")
	}
}

func TestParseEvents(t *testing.T) {
	if e, err := notify.ParseEvents([]string{"job_failed", "host_down", "job_failed"}); err != nil || len(e) != 2 {
		t.Errorf("%v %v", e, err)
	}
	if e, err := notify.ParseEvents([]string{"none"}); err != nil || e == nil || len(e) != 0 {
		t.Errorf("none: %v %v", e, err)
	}
	if _, err := notify.ParseEvents([]string{"job_fail"}); err == nil || !strings.Contains(err.Error(), `event "job_fail": give some of job_succeeded, job_failed`) {
		t.Errorf("a typo: %v", err)
	}
}

// TestWebhook: a webhook that fails once is retried; the JSON payload
// carries the text and the event's log line; Slack's is the text alone;
// a 4xx answer is not retried; an event a webhook did not ask for is not
// posted.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/gone" {
			http.Error(w, "no such hook", http.StatusNotFound)
			return
		}
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		m["path"] = r.URL.Path
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
	}))
	defer srv.Close()
	var c counts
	var warns []string
	n := notify.New(notify.Options{Backoff: 10 * time.Millisecond, Observe: c.observe, Warn: func(s string) {
		mu.Lock()
		warns = append(warns, s)
		mu.Unlock()
	}})
	defer n.Close()
	n.Configure(notify.Config{Webhooks: []notify.Webhook{{URL: srv.URL + "/json"}}})
	n.Event(failed())
	waitFor(t, "the JSON webhook posted", func() bool { return c.get("webhook sent") == 1 })
	if c.get("webhook retried") != 1 {
		t.Errorf("retries: %v", c.m)
	}
	mu.Lock()
	b := bodies[0]
	mu.Unlock()
	ev, _ := b["event"].(map[string]any)
	if b["text"] != "gssh: job 7 (train) failed on gpu02: exit status 3" || ev["event"] != "job_end" || ev["state"] != "failed" || ev["job"] != 7.0 {
		t.Errorf("JSON payload: %v", b)
	}

	n.Configure(notify.Config{Webhooks: []notify.Webhook{
		{URL: srv.URL + "/slack", Format: notify.FormatSlack},
		{URL: srv.URL + "/gone"},
		{URL: srv.URL + "/ends-only", Events: []notify.Event{notify.JobSucceeded}},
	}})
	n.Event(failed())
	waitFor(t, "slack posted, /gone dropped", func() bool { return c.get("webhook sent") == 2 && c.get("webhook dropped") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[1]["path"] != "/slack" || len(bodies[1]) != 2 || bodies[1]["text"] == nil {
		t.Errorf("slack payload: %v", bodies)
	}
	if c.get("webhook retried") != 1 || len(warns) != 1 || !strings.Contains(warns[0], "dropped: the webhook answered 404 Not Found") || strings.Contains(warns[0], "/gone") {
		t.Errorf("the 404: retried %d, warnings %q (the URL's path kept out)", c.get("webhook retried"), warns)
	}
}

// TestQueueBound: Event never blocks. With every worker stuck on a
// webhook that never answers and the queue full, more events are
// dropped and counted at once.
func TestQueueBound(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	var c counts
	n := notify.New(notify.Options{QueueSize: 2, Attempts: 1, Timeout: time.Hour, Observe: c.observe})
	n.Configure(notify.Config{Webhooks: []notify.Webhook{{URL: srv.URL}}})
	const events = 100
	for range events {
		n.Event(failed()) // would hang the test if it blocked
	}
	// 4 workers took one each, 2 wait in the queue: the rest dropped.
	waitFor(t, "94 dropped", func() bool { return c.get("webhook dropped") >= events-4-2 })
	if c.get("webhook sent") != 0 {
		t.Errorf("sent: %v", c.m)
	}
}

// TestWebhookUnreachable: a webhook nothing listens on is tried
// Attempts times, then dropped.
func TestWebhookUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var c counts
	n := notify.New(notify.Options{Attempts: 3, Backoff: time.Millisecond, Observe: c.observe})
	defer n.Close()
	n.Configure(notify.Config{Webhooks: []notify.Webhook{{URL: "http://" + addr + "/hook"}}})
	n.Event(failed())
	waitFor(t, "dropped", func() bool { return c.get("webhook dropped") == 1 })
	if c.get("webhook retried") != 2 {
		t.Errorf("%v", c.m)
	}
}

// TestEmail: over STARTTLS with PLAIN auth, a job's failure goes to its
// owner's address, a host's failure to the admins; a user who asked for
// no job failures, and one without an address, get nothing.
func TestEmail(t *testing.T) {
	box := notifytest.NewSMTP(t, true)
	addr, roots := box.Addr, box.Roots
	pw := filepath.Join(t.TempDir(), "password")
	os.WriteFile(pw, []byte(notifytest.Password+"\n"), 0o600)
	var c counts
	n := notify.New(notify.Options{Backoff: 10 * time.Millisecond, Observe: c.observe, RootCAs: roots, Warn: func(s string) { t.Log(s) }})
	defer n.Close()
	n.Configure(notify.Config{
		Email: &notify.Email{Server: addr, StartTLS: true, User: notifytest.User, PasswordFile: pw, From: "gssh <gssh@lab.example>", Admins: []string{"ops@lab.example"}},
		Users: map[string]notify.User{"alice": {Email: "alice@lab.example"}, "bob": {Email: "bob@lab.example", Events: []notify.Event{notify.JobSucceeded}}},
	})
	n.Event(failed())
	bobs := failed()
	bobs.User = "bob"
	n.Event(bobs)
	n.Event(eventlog.Event{Kind: eventlog.HostDown, Host: "gpu03", Reason: "3 failed contacts in a row"})
	hostile := failed()
	hostile.Job, hostile.Extra = 8, []slog.Attr{slog.String("name", "x\r\nBcc: evil@example.com")}
	n.Event(hostile)
	waitFor(t, "three mails", func() bool { return c.get("email sent") == 3 })
	mails := box.Mails()
	byTo := map[string]notifytest.Mail{}
	for _, m := range mails {
		if !strings.Contains(m.Data, "job 8") {
			byTo[m.To] = m
		}
	}
	a := byTo["alice@lab.example"]
	if !a.Auth || a.From != "gssh@lab.example" || !strings.Contains(a.Data, "Subject: gssh: job 7 (train) failed on gpu02: exit status 3\r\n") ||
		!strings.Contains(a.Data, "To: alice@lab.example\r\n") || !strings.Contains(a.Data, `"event":"job_end"`) {
		t.Errorf("alice's mail: %+v", a)
	}
	if o := byTo["ops@lab.example"]; !strings.Contains(o.Data, "Subject: gssh: host gpu03 is down\r\n") {
		t.Errorf("the admins' mail: %+v", o)
	}
	for _, m := range mails {
		if strings.Contains(m.Data, "\nBcc:") {
			t.Errorf("a job's name reached the headers or broke a line:\n%s", m.Data)
		}
	}
	if _, ok := byTo["bob@lab.example"]; ok || len(mails) != 3 {
		t.Errorf("mails: %+v", mails)
	}
}

// TestEmailNoSTARTTLS: a server without STARTTLS gets nothing unless
// starttls: false says so; the drop says what to do.
func TestEmailNoSTARTTLS(t *testing.T) {
	addr := notifytest.NewSMTP(t, false).Addr
	var c counts
	var warn atomic.Value
	n := notify.New(notify.Options{Backoff: time.Millisecond, Observe: c.observe, Warn: func(s string) { warn.Store(s) }})
	defer n.Close()
	cfg := notify.Config{Email: &notify.Email{Server: addr, StartTLS: true, From: "gssh@lab.example"}, Users: map[string]notify.User{"alice": {Email: "alice@lab.example"}}}
	n.Configure(cfg)
	n.Event(failed())
	waitFor(t, "dropped", func() bool { return c.get("email dropped") == 1 })
	if w, _ := warn.Load().(string); !strings.Contains(w, "offers no STARTTLS: give starttls: false") || c.get("email retried") != 0 {
		t.Errorf("warning %q, %v", w, c.m)
	}
	cfg.Email.StartTLS = false
	n.Configure(cfg)
	n.Event(failed())
	waitFor(t, "sent in the clear", func() bool { return c.get("email sent") == 1 })
}

// TestWalltimes: a running job with a walltime is told once, within the
// warning's lead of its end, to its owner and the admins who asked; a
// requeued one (another attempt) again; one far from its end, or without
// a walltime, not.
func TestWalltimes(t *testing.T) {
	box := notifytest.NewSMTP(t, false)
	var c counts
	n := notify.New(notify.Options{Observe: c.observe, Backoff: time.Millisecond})
	defer n.Close()
	n.Configure(notify.Config{
		Email: &notify.Email{Server: box.Addr, From: "gssh@lab.example", Admins: []string{"ops@lab.example"}, AdminEvents: []notify.Event{notify.JobWalltime}},
		Users: map[string]notify.User{"alice": {Email: "alice@lab.example"}},
	})
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	run := func(id job.ID, attempt int, timeout time.Duration) job.Job {
		return job.Job{ID: id, User: "alice", State: job.Running, Attempt: attempt, StartedAt: start,
			Spec: job.Spec{Name: "train", Timeout: timeout}, Placement: job.Placement{Host: "gpu02"}}
	}
	jobs := []job.Job{run(1, 1, 2*time.Hour), run(2, 1, 0), run(3, 1, 10*time.Hour)}
	n.Walltimes(start.Add(time.Hour), jobs)                 // 1h left: nothing yet
	n.Walltimes(start.Add(2*time.Hour-5*time.Minute), jobs) // job 1: 5m left
	n.Walltimes(start.Add(2*time.Hour-4*time.Minute), jobs) // told already
	waitFor(t, "alice and ops told", func() bool { return c.get("email sent") == 2 })
	jobs[0].Attempt = 2 // requeued and running again
	n.Walltimes(start.Add(2*time.Hour-3*time.Minute), jobs)
	waitFor(t, "told again", func() bool { return c.get("email sent") == 4 })
	mails := box.Mails()
	if len(mails) != 4 || !strings.Contains(mails[0].Data, "Subject: gssh: job 1 (train) on gpu02 reaches its walltime of 2h at 14:00 UTC, in 5m: it will be stopped then\r\n") {
		t.Errorf("mails: %+v", mails)
	}
}

// TestIdleNotice: a running job gssh serve found idle is told to its
// owner once per idle stretch.
func TestIdleNotice(t *testing.T) {
	box := notifytest.NewSMTP(t, false)
	var c counts
	n := notify.New(notify.Options{Observe: c.observe, Backoff: time.Millisecond})
	defer n.Close()
	n.Configure(notify.Config{Email: &notify.Email{Server: box.Addr, From: "gssh@lab.example"}, Users: map[string]notify.User{"alice": {Email: "alice@lab.example"}}})
	since := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	j := job.Job{ID: 9, User: "alice", State: job.Running, Attempt: 1, Spec: job.Spec{Name: "nb"}, Placement: job.Placement{Host: "gpu02"},
		GPUUse: &job.GPUUse{Idle: true, IdleSince: since}}
	n.Walltimes(since.Add(40*time.Minute), []job.Job{j})
	n.Walltimes(since.Add(41*time.Minute), []job.Job{j}) // the same stretch
	waitFor(t, "told", func() bool { return c.get("email sent") == 1 })
	j.GPUUse = &job.GPUUse{Idle: true, IdleSince: since.Add(2 * time.Hour)} // busy between, idle again
	n.Walltimes(since.Add(3*time.Hour), []job.Job{j})
	waitFor(t, "told again", func() bool { return c.get("email sent") == 2 })
	if m := box.Mails(); !strings.Contains(m[0].Data, "Subject: gssh: job 9 (nb) on gpu02 has held its GPUs at 0 % utilization since 12:00 UTC (40m)\r\n") {
		t.Errorf("mail: %+v", m)
	}
}
