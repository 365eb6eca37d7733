package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/notify"
	"github.com/gssh/gssh/notify/notifytest"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/service"
)

// TestNotifications: with the inventory's notify block, a job that fails
// posts a webhook and mails its owner, as gssh serve wires them (the
// event log's tap, the notifier configured from the inventory); a job
// that succeeds, which neither asked for, sends nothing.
func TestNotifications(t *testing.T) {
	box := notifytest.NewSMTP(t, true)
	hook := notifytest.NewHook(t)
	pw := filepath.Join(t.TempDir(), "password")
	os.WriteFile(pw, []byte(notifytest.Password+"\n"), 0o600)
	l := newLab(t, false, policy(sched.Policy{Users: map[string]sched.UserShare{"ann": {Weight: 1}}}, "ann"), func(o *service.Options) {
		o.Fleet.Inventory.Notify = notify.Config{
			Webhooks: []notify.Webhook{{URL: hook.URL}},
			Email:    &notify.Email{Server: box.Addr, StartTLS: true, User: notifytest.User, PasswordFile: pw, From: "gssh@lab.example"},
			Users:    map[string]notify.User{"ann": {Email: "ann@lab.example"}},
		}
	})
	n := notify.New(notify.Options{Backoff: 10 * time.Millisecond, RootCAs: box.Roots, Warn: func(s string) { t.Log(s) }})
	defer n.Close()
	l.svc.TapEvents(n.Event)
	c, err := l.svc.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	n.Configure(c)

	ok := l.submit(t, spec("true")).Job.ID
	l.waitEnd(t, ok)
	s := spec("sh", "-c", "exit 3")
	s.Name = "train"
	bad := l.submit(t, s).Job.ID
	l.waitEnd(t, bad)
	for range 500 {
		if len(box.Mails()) > 0 && len(hook.Bodies()) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mails, bodies := box.Mails(), hook.Bodies()
	subject := "gssh: job 2 (train) failed on ctl: exit status 3"
	if len(mails) != 1 || mails[0].To != "ann@lab.example" || !strings.Contains(mails[0].Data, "Subject: "+subject) {
		t.Errorf("mails: %+v", mails)
	}
	if len(bodies) != 1 || bodies[0]["text"] == nil || !strings.HasPrefix(bodies[0]["text"].(string), subject) {
		t.Errorf("webhook bodies: %v", bodies)
	}
}
