package inventory

import (
	"net"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gssh/gssh/notify"
)

var (
	notifyKeys  = []string{"webhooks", "email", "walltime_warning"}
	webhookKeys = []string{"url", "format", "events"}
	emailKeys   = []string{"server", "starttls", "user", "password_file", "from", "admins", "admin_events"}
)

// notifyBlock reads the `notify:` block (webhooks and mail) into c:
//
//	notify:
//	  webhooks:
//	    - url: https://hooks.slack.com/services/…
//	      format: slack          # json (default), slack, mattermost
//	      events: [job_failed, host_down]
//	  email:
//	    server: smtp.lab.example:587
//	    user: gssh
//	    password_file: /etc/gssh/smtp-password
//	    from: gssh <gssh@lab.example>
//	    admins: [ops@lab.example]
//	  walltime_warning: 10m   # a running job's owner is told this long before its walltime
func (p parser) notifyBlock(m *yaml.Node, c *notify.Config) error {
	if m.Kind != yaml.MappingNode {
		return p.errf(m, "`notify` must be a mapping with `webhooks:` and `email:`, found %s", kindName(m))
	}
	if err := p.unique(m, "`notify`"); err != nil {
		return err
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "webhooks":
			if v.Kind != yaml.SequenceNode {
				return p.errf(v, "`notify webhooks` must be a list (`- url: https://…`), found %s", kindName(v))
			}
			for _, w := range v.Content {
				hook, err := p.webhook(w)
				if err != nil {
					return err
				}
				c.Webhooks = append(c.Webhooks, hook)
			}
		case "email":
			e, err := p.email(v)
			if err != nil {
				return err
			}
			c.Email = e
		case "walltime_warning":
			d, err := p.duration(v, "notify walltime_warning", time.Minute)
			if err != nil {
				return err
			}
			c.WalltimeWarning = d
		default:
			return p.errf(k, "unknown key %q in `notify`; it takes %s", k.Value, strings.Join(notifyKeys, ", "))
		}
	}
	return nil
}

func (p parser) webhook(m *yaml.Node) (notify.Webhook, error) {
	w := notify.Webhook{Line: m.Line}
	if m.Kind != yaml.MappingNode {
		return w, p.errf(m, "a webhook must be a mapping such as `{url: https://…, format: slack}`, found %s", kindName(m))
	}
	if err := p.unique(m, "a webhook"); err != nil {
		return w, err
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "url":
			s, err := p.str(v, "url")
			if err != nil {
				return w, err
			}
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return w, p.errf(v, "webhook url %q: give an http:// or https:// URL", s)
			}
			w.URL = s
		case "format":
			s, err := oneOf(p, v, "format", notify.FormatJSON, notify.FormatSlack, notify.FormatMattermost)
			if err != nil {
				return w, err
			}
			w.Format = s
		case "events":
			e, err := p.events(v, "webhook events")
			if err != nil {
				return w, err
			}
			w.Events = e
		default:
			return w, p.errf(k, "unknown key %q in a webhook; it takes %s", k.Value, strings.Join(webhookKeys, ", "))
		}
	}
	if w.URL == "" {
		return w, p.errf(m, "a webhook without `url:`; give the URL to post to")
	}
	return w, nil
}

func (p parser) email(m *yaml.Node) (*notify.Email, error) {
	if m.Kind != yaml.MappingNode {
		return nil, p.errf(m, "`notify email` must be a mapping with `server:` and `from:`, found %s", kindName(m))
	}
	if err := p.unique(m, "`notify email`"); err != nil {
		return nil, err
	}
	e := &notify.Email{StartTLS: true}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		var err error
		switch k.Value {
		case "server":
			var s string
			if s, err = p.str(v, "server"); err == nil {
				host, port, serr := net.SplitHostPort(s)
				if n, perr := strconv.Atoi(port); serr != nil || perr != nil || host == "" || n < 1 || n > 65535 {
					return nil, p.errf(v, "email server %q: give HOST:PORT, such as smtp.lab.example:587 (465: TLS from the start)", s)
				}
				e.Server = s
			}
		case "starttls":
			e.StartTLS, err = p.boolean(v, "starttls")
		case "user":
			e.User, err = p.str(v, "user")
		case "password_file":
			e.PasswordFile, err = p.str(v, "password_file")
		case "from":
			if e.From, err = p.str(v, "from"); err == nil {
				err = p.address(v, e.From, "email from")
			}
		case "admins":
			e.Admins, err = p.addresses(v, "email admins")
		case "admin_events":
			e.AdminEvents, err = p.events(v, "email admin_events")
		default:
			return nil, p.errf(k, "unknown key %q in `notify email`; it takes %s", k.Value, strings.Join(emailKeys, ", "))
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case e.Server == "":
		return nil, p.errf(m, "`notify email` without `server:`; give the SMTP server as HOST:PORT")
	case e.From == "":
		return nil, p.errf(m, "`notify email` without `from:`; give the sender, such as gssh <gssh@lab.example>")
	case e.User != "" && e.PasswordFile == "":
		return nil, p.errf(m, "`notify email` has `user:` but no `password_file:`; give the file holding the password (mode 0600)")
	}
	return e, nil
}

// events reads a list of notify events (or `all`, `none`).
func (p parser) events(v *yaml.Node, what string) ([]notify.Event, error) {
	var words []string
	switch v.Kind {
	case yaml.ScalarNode:
		words = []string{v.Value}
	case yaml.SequenceNode:
		for _, w := range v.Content {
			s, err := p.str(w, what)
			if err != nil {
				return nil, err
			}
			words = append(words, s)
		}
	default:
		return nil, p.errf(v, "`%s` must be a list such as [job_failed, job_timeout], or all, or none", what)
	}
	e, err := notify.ParseEvents(words)
	if err != nil {
		return nil, p.errf(v, "%s: %v", what, err)
	}
	return e, nil
}

// address checks that s is one mail address.
func (p parser) address(v *yaml.Node, s, what string) error {
	if _, err := mail.ParseAddress(s); err != nil || strings.ContainsAny(s, "\r\n") {
		return p.errf(v, "%s %q is not a mail address: give one such as alice@lab.example", what, s)
	}
	return nil
}

func (p parser) addresses(v *yaml.Node, what string) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, p.errf(v, "`%s` must be a list of addresses, such as [ops@lab.example]", what)
	}
	var out []string
	for _, a := range v.Content {
		s, err := p.str(a, what)
		if err != nil {
			return nil, err
		}
		if err := p.address(a, s, what); err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
