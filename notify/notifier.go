package notify

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
)

// Results a delivery is counted under (Options.Observe).
const (
	Sent    = "sent"
	Retried = "retried" // an attempt failed; another follows
	Dropped = "dropped" // given up on after its last attempt, or the queue was full
)

// Channels a delivery goes by.
const (
	ChannelWebhook = "webhook"
	ChannelEmail   = "email"
)

// Options configures New.
type Options struct {
	// QueueSize bounds the deliveries waiting (0 = DefaultQueueSize):
	// one more is dropped and counted.
	QueueSize int
	// Attempts per delivery (0 = DefaultAttempts); Backoff is the wait
	// after the first failed one, doubled after each (0 =
	// DefaultBackoff).
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one attempt (0 = DefaultTimeout).
	Timeout time.Duration
	// Observe, when set, is told of each delivery's outcome (channel,
	// result): gssh serve's /metrics counts them.
	Observe func(channel, result string)
	// Warn, when set, is told in words of a delivery dropped.
	Warn func(string)
	// RootCAs replaces the system's roots for SMTP's TLS (tests).
	RootCAs *x509.CertPool
	// HTTP is the webhooks' client (nil: one with Timeout).
	HTTP *http.Client
}

// Defaults of Options.
const (
	DefaultQueueSize = 1000
	DefaultAttempts  = 5
	DefaultBackoff   = 2 * time.Second
	DefaultTimeout   = 10 * time.Second
)

// Notifier delivers the notices of the events it is given.
type Notifier struct {
	opt    Options
	mu     sync.Mutex
	cfg    Config
	warned map[attempt]bool      // the running attempts told of their walltime (Walltimes)
	idled  map[attempt]time.Time // the idle stretch each running attempt was told of (Walltimes)
	queue  chan delivery
	stop   chan struct{}
	wg     sync.WaitGroup
}

// delivery is one notice to one destination.
type delivery struct {
	channel string
	to      string // the webhook's URL, or the mail's address
	send    func(ctx context.Context) error
}

// workers deliver at once: a slow webhook does not hold the mail.
const workers = 4

// New starts a Notifier with nothing configured (Configure sets what it
// sends); Close stops it.
func New(opt Options) *Notifier {
	opt.QueueSize = max(opt.QueueSize, 0)
	if opt.QueueSize == 0 {
		opt.QueueSize = DefaultQueueSize
	}
	if opt.Attempts <= 0 {
		opt.Attempts = DefaultAttempts
	}
	if opt.Backoff <= 0 {
		opt.Backoff = DefaultBackoff
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{Timeout: opt.Timeout}
	}
	n := &Notifier{opt: opt, queue: make(chan delivery, opt.QueueSize), stop: make(chan struct{})}
	for range workers {
		n.wg.Go(n.work)
	}
	return n
}

// Configure sets what n sends from now on (gssh serve: the inventory's,
// again on SIGHUP).
func (n *Notifier) Configure(c Config) {
	n.mu.Lock()
	n.cfg = c
	n.mu.Unlock()
}

// Enabled reports whether n's config sends anything.
func (n *Notifier) Enabled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg.Enabled()
}

// Event queues the deliveries of e's notice, and never blocks: a
// delivery the queue has no room for is dropped and counted.
func (n *Notifier) Event(e eventlog.Event) {
	if notice, ok := NoticeOf(e); ok {
		n.send(notice)
	}
}

// attempt is one run of a job.
type attempt struct {
	id job.ID
	n  int
}

// Walltimes tells the owner of each running job of jobs (the queue's,
// after a pass) that will reach its walltime within WalltimeWarning of
// now that it will be stopped then: once per attempt (a requeued job is
// told again); and of each one gssh serve found idle (job.GPUUse.Idle)
// that its GPUs read 0 %: once per idle stretch. Jobs not running are
// forgotten.
func (n *Notifier) Walltimes(now time.Time, jobs []job.Job) {
	n.mu.Lock()
	lead := cmp.Or(n.cfg.WalltimeWarning, DefaultWalltimeWarning)
	enabled := n.cfg.Enabled()
	running := map[attempt]bool{}
	var due []job.Job
	for _, j := range jobs {
		if j.State != job.Running || j.Spec.Timeout <= 0 || j.StartedAt.IsZero() {
			continue
		}
		a := attempt{j.ID, j.Attempt}
		running[a] = true
		end := j.StartedAt.Add(j.Spec.Timeout)
		if !n.warned[a] && !now.Before(end.Add(-lead)) && now.Before(end) {
			if n.warned == nil {
				n.warned = map[attempt]bool{}
			}
			n.warned[a] = true
			due = append(due, j)
		}
	}
	var idle []job.Job
	for _, j := range jobs {
		a := attempt{j.ID, j.Attempt}
		if u := j.GPUUse; j.State == job.Running {
			if u != nil && u.Idle && !n.idled[a].Equal(u.IdleSince) {
				if n.idled == nil {
					n.idled = map[attempt]time.Time{}
				}
				n.idled[a] = u.IdleSince
				idle = append(idle, j)
			}
		}
	}
	for a := range n.warned {
		if !running[a] {
			delete(n.warned, a)
		}
	}
	for a := range n.idled {
		if !slices.ContainsFunc(jobs, func(j job.Job) bool { return j.ID == a.id && j.Attempt == a.n && j.State == job.Running }) {
			delete(n.idled, a)
		}
	}
	n.mu.Unlock()
	if !enabled {
		return
	}
	for _, j := range due {
		n.send(walltimeNotice(j, now))
	}
	for _, j := range idle {
		n.send(idleNotice(j, now))
	}
}

// send queues notice's deliveries under the current config.
func (n *Notifier) send(notice Notice) {
	n.mu.Lock()
	cfg := n.cfg
	n.mu.Unlock()
	for _, d := range deliveries(cfg, notice, n.opt) {
		select {
		case n.queue <- d:
		default:
			n.dropped(d, errors.New("the notification queue is full"))
		}
	}
}

// deliveries are the destinations of notice under cfg.
func deliveries(cfg Config, notice Notice, opt Options) []delivery {
	var out []delivery
	for _, w := range cfg.Webhooks {
		if slices.Contains(eventsOr(w.Events, DefaultWebhookEvents), notice.Event) {
			out = append(out, delivery{channel: ChannelWebhook, to: w.URL, send: func(ctx context.Context) error {
				return postWebhook(ctx, opt.HTTP, w, notice)
			}})
		}
	}
	if m := cfg.Email; m != nil {
		var to []string
		if notice.User != "" {
			if u, ok := cfg.Users[notice.User]; ok && u.Email != "" && slices.Contains(eventsOr(u.Events, DefaultUserEvents), notice.Event) {
				to = append(to, u.Email)
			}
		}
		if slices.Contains(eventsOr(m.AdminEvents, DefaultAdminEvents), notice.Event) {
			for _, a := range m.Admins {
				if !slices.Contains(to, a) {
					to = append(to, a)
				}
			}
		}
		for _, addr := range to {
			out = append(out, delivery{channel: ChannelEmail, to: addr, send: func(ctx context.Context) error {
				return sendMail(ctx, *m, addr, notice, opt.RootCAs)
			}})
		}
	}
	return out
}

// work delivers queued notices until Close.
func (n *Notifier) work() {
	for {
		select {
		case <-n.stop:
			return
		case d := <-n.queue:
			n.deliver(d)
		}
	}
}

// deliver tries d up to Attempts times, waiting Backoff, then twice as
// long, between them; a permanent error (a webhook's 4xx answer, a
// bad address) ends it at once.
func (n *Notifier) deliver(d delivery) {
	wait := n.opt.Backoff
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), n.opt.Timeout)
		err := d.send(ctx)
		cancel()
		if err == nil {
			n.observe(d.channel, Sent)
			return
		}
		var p *permanent
		if attempt >= n.opt.Attempts || errors.As(err, &p) {
			n.dropped(d, err)
			return
		}
		n.observe(d.channel, Retried)
		select {
		case <-n.stop:
			n.dropped(d, errors.New("gssh serve stopped"))
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (n *Notifier) dropped(d delivery, err error) {
	n.observe(d.channel, Dropped)
	if n.opt.Warn != nil {
		n.opt.Warn("notification by " + d.channel + " to " + redact(d.to) + " dropped: " + err.Error())
	}
}

func (n *Notifier) observe(channel, result string) {
	if n.opt.Observe != nil {
		n.opt.Observe(channel, result)
	}
}

// Close stops n: deliveries under way end after their attempt, the
// queued ones are dropped (and counted).
func (n *Notifier) Close() {
	close(n.stop)
	n.wg.Wait()
	for {
		select {
		case d := <-n.queue:
			n.dropped(d, errors.New("gssh serve stopped"))
		default:
			return
		}
	}
}

// permanent is an error another attempt would not mend.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }
