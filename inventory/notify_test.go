package inventory

import (
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/notify"
)

func TestNotifyBlock(t *testing.T) {
	const good = `hosts:
  - name: a
policy:
  users:
    alice: {weight: 2, email: alice@lab.example}
    bob: {email: "Bob B <bob@lab.example>", notify: [job_succeeded, job_failed]}
    cat: {notify: none}
notify:
  webhooks:
    - url: https://hooks.slack.com/services/T/B/X
      format: slack
    - url: http://127.0.0.1:9000/hook
      events: all
  email:
    server: smtp.lab.example:587
    user: gssh
    password_file: /etc/gssh/smtp-password
    from: gssh <gssh@lab.example>
    admins: [ops@lab.example]
  walltime_warning: 15m
`
	inv, err := Parse("h.yaml", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	c := inv.Notify
	if len(c.Webhooks) != 2 || c.Webhooks[0].Format != notify.FormatSlack || c.Webhooks[0].Events != nil || len(c.Webhooks[1].Events) != len(notify.Events) || c.Webhooks[1].Line != 12 {
		t.Errorf("webhooks: %+v", c.Webhooks)
	}
	if e := c.Email; e == nil || e.Server != "smtp.lab.example:587" || !e.StartTLS || e.User != "gssh" || e.From != "gssh <gssh@lab.example>" || len(e.Admins) != 1 {
		t.Errorf("email: %+v", e)
	}
	if c.WalltimeWarning != 15*time.Minute {
		t.Errorf("walltime_warning: %v", c.WalltimeWarning)
	}
	if u := c.Users; u["alice"].Email != "alice@lab.example" || u["alice"].Events != nil || len(u["bob"].Events) != 2 || u["cat"].Events == nil || len(u["cat"].Events) != 0 {
		t.Errorf("users: %+v", u)
	}
	if inv.Policy.Plan.Users["alice"].Weight != 2 {
		t.Errorf("alice's weight: %+v", inv.Policy.Plan.Users)
	}

	for _, c := range []struct{ name, text, want string }{
		{"bad address", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {email: alice-at-lab}\n", `h.yaml:5: user "alice" email "alice-at-lab" is not a mail address: give one such as alice@lab.example`},
		{"bad event", "hosts:\n  - name: a\npolicy:\n  users:\n    alice: {notify: [job_fail]}\n", `h.yaml:5: user "alice" notify: event "job_fail": give some of job_succeeded`},
		{"webhook url", "hosts:\n  - name: a\nnotify:\n  webhooks:\n    - url: ftp://x\n", `h.yaml:5: webhook url "ftp://x": give an http:// or https:// URL`},
		{"webhook format", "hosts:\n  - name: a\nnotify:\n  webhooks:\n    - {url: 'https://x', format: teams}\n", `h.yaml:5: format "teams"`},
		{"webhook without url", "hosts:\n  - name: a\nnotify:\n  webhooks:\n    - format: slack\n", "h.yaml:5: a webhook without `url:`"},
		{"server port", "hosts:\n  - name: a\nnotify:\n  email: {server: smtp.lab.example, from: a@b.c}\n", `h.yaml:4: email server "smtp.lab.example": give HOST:PORT`},
		{"no from", "hosts:\n  - name: a\nnotify:\n  email: {server: 'smtp:25'}\n", "h.yaml:4: `notify email` without `from:`"},
		{"user without password", "hosts:\n  - name: a\nnotify:\n  email: {server: 'smtp:25', from: a@b.c, user: gssh}\n", "h.yaml:4: `notify email` has `user:` but no `password_file:`"},
		{"admin address", "hosts:\n  - name: a\nnotify:\n  email: {server: 'smtp:25', from: a@b.c, admins: [ops]}\n", `h.yaml:4: email admins "ops" is not a mail address`},
		{"unknown key", "hosts:\n  - name: a\nnotify:\n  slack: x\n", `h.yaml:4: unknown key "slack" in ` + "`notify`; it takes webhooks, email, walltime_warning"},
		{"walltime_warning", "hosts:\n  - name: a\nnotify:\n  walltime_warning: 10s\n", `h.yaml:4: notify walltime_warning "10s": give at least 1m`},
	} {
		_, err := Parse("h.yaml", strings.NewReader(c.text))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
}
