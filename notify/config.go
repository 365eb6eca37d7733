// Package notify tells people what happened to their jobs and hosts:
// gssh serve gives it each event it writes to the event log (Notifier.
// Event, which never blocks), and it posts webhooks (JSON, or a payload
// Slack and Mattermost take) and sends mail (SMTP, STARTTLS, PLAIN auth)
// from a bounded queue, retrying with backoff; what cannot be sent in
// the end, or does not fit in the queue, is dropped and counted.
//
// Who hears of what: a job's events go to its owner's address (the
// inventory's `policy: users:` entry's email) and to the webhooks; host
// and GPU events to the admins' addresses (`notify: email: admins:`) and
// to the webhooks. Each user, each webhook and the admins choose the
// events they get (Event).
package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event names what a user, a webhook or the admins may be told of.
type Event string

// The events. A job's end is one of its five ends.
const (
	JobSucceeded Event = "job_succeeded"
	JobFailed    Event = "job_failed"
	JobCancelled Event = "job_cancelled"
	JobTimeout   Event = "job_timeout" // stopped at its walltime
	JobLost      Event = "job_lost"    // its host was down too long
	JobGPUFailed Event = "job_gpu_failed"
	// JobWalltime: a running job nears its walltime (Config.WalltimeWarning
	// before it), and will be stopped then.
	JobWalltime Event = "job_walltime"
	// JobIdle: a running job's GPUs have read 0 % utilization for the
	// policy's idle_after.
	JobIdle   Event = "job_idle"
	HostDown  Event = "host_down"
	GPUFailed Event = "gpu_failed" // a GPU read lost, requires reset or error
)

// Events are every event, in the order the docs list them.
var Events = []Event{JobSucceeded, JobFailed, JobCancelled, JobTimeout, JobLost, JobGPUFailed, JobWalltime, JobIdle, HostDown, GPUFailed}

// The events of a user, a webhook and the admins who name none.
var (
	DefaultUserEvents    = []Event{JobFailed, JobTimeout, JobLost, JobGPUFailed, JobWalltime, JobIdle}
	DefaultAdminEvents   = []Event{HostDown, GPUFailed}
	DefaultWebhookEvents = []Event{JobFailed, JobTimeout, JobLost, JobGPUFailed, HostDown, GPUFailed}
)

// ParseEvents reads a list of event names; "all" is every event, "none"
// (alone) no event. An error names the word and lists the events.
func ParseEvents(words []string) ([]Event, error) {
	out := []Event{}
	for _, w := range words {
		switch e := Event(strings.TrimSpace(w)); {
		case e == "all":
			return slices.Clone(Events), nil
		case e == "none" && len(words) == 1:
			return out, nil
		case slices.Contains(Events, e):
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		default:
			names := make([]string, len(Events))
			for i, e := range Events {
				names[i] = string(e)
			}
			return nil, fmt.Errorf("event %q: give some of %s, or all, or none", w, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// Config is the inventory's `notify:` block and its users' addresses.
// The zero Config sends nothing.
type Config struct {
	Webhooks []Webhook
	Email    *Email // nil: no mail
	// Users are the `policy: users:` entries' email and notify keys, by
	// user name.
	Users map[string]User
	// WalltimeWarning is how long before its walltime a running job's
	// owner is told it will be stopped (0 = DefaultWalltimeWarning).
	WalltimeWarning time.Duration
}

// DefaultWalltimeWarning is Config.WalltimeWarning's default.
const DefaultWalltimeWarning = 10 * time.Minute

// Formats of a webhook's payload.
const (
	FormatJSON       = "json"       // {"text": ..., "event": the event log's line}
	FormatSlack      = "slack"      // {"text": ...}: Slack's incoming webhooks
	FormatMattermost = "mattermost" // {"text": ..., "username": "gssh"}
)

// Webhook is one URL events are posted to.
type Webhook struct {
	URL    string
	Format string  // FormatJSON (""), FormatSlack or FormatMattermost
	Events []Event // nil: DefaultWebhookEvents
	Line   int     // its line in the inventory, for errors
}

// Email is how mail is sent, and to which admins.
type Email struct {
	// Server is HOST:PORT of the SMTP server (port 465: TLS from the
	// start; others: STARTTLS unless StartTLS is false).
	Server string
	// StartTLS: the connection must be upgraded with STARTTLS before
	// anything is sent (the default); false sends in the clear, for a
	// relay on this machine.
	StartTLS     bool
	User         string // PLAIN auth's user; "" = no auth
	PasswordFile string // the password, read at each send (first line)
	From         string
	Admins       []string // addresses told of host and GPU events
	// AdminEvents are what the admins are told of (nil:
	// DefaultAdminEvents): a job's events too, when listed.
	AdminEvents []Event
}

// User is what one user is told, and where.
type User struct {
	Email  string
	Events []Event // nil: DefaultUserEvents
}

// Enabled reports whether c sends anything at all.
func (c Config) Enabled() bool { return len(c.Webhooks) > 0 || c.Email != nil }

func eventsOr(list, def []Event) []Event {
	if list == nil {
		return def
	}
	return list
}
