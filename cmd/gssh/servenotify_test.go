package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/notify/notifytest"
)

// TestServeNotifies: gssh serve with the inventory's notify block mails a
// failed job's owner over STARTTLS with auth and posts the webhooks; a
// webhook that answers 410 is dropped, and /metrics counts both.
func TestServeNotifies(t *testing.T) {
	t.Parallel()
	bin := buildGssh(t)
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o700)
	box := notifytest.NewSMTP(t, true)
	hook := notifytest.NewHook(t)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusGone) }))
	defer gone.Close()
	certFile, pw := filepath.Join(dir, "smtp.pem"), filepath.Join(dir, "smtp-password")
	os.WriteFile(certFile, box.CertPEM, 0o644)
	os.WriteFile(pw, []byte(notifytest.Password+"\n"), 0o600)
	me := sshdUser(t)
	inv := filepath.Join(dir, "hosts.yaml")
	os.WriteFile(inv, []byte(`hosts:
  - name: ctl
    local: true
policy:
  users:
    `+me+`: {email: me@lab.example}
notify:
  webhooks:
    - url: `+hook.URL+`/hook
    - url: `+gone.URL+`/old
  email:
    server: `+box.Addr+`
    user: `+notifytest.User+`
    password_file: `+pw+`
    from: gssh <gssh@lab.example>
  walltime_warning: 1m
`), 0o600)
	env := append(os.Environ(), "HOME="+home, "GSSH_INVENTORY="+inv, "GSSH_STATE="+filepath.Join(dir, "state.db"),
		"PATH="+fakeSMIBin(t, root)+":"+os.Getenv("PATH"), "GSSH_FAKE_SMI_DIR="+filepath.Join(root, "probe", "testdata", "fleet", "a100x4"),
		"GSSH_CLAIMS_DIR="+filepath.Join(dir, "claims"), "GSSH_SERVER=", "GSSH_TOKEN=", testInventoryEnv+"="+filepath.Join(dir, "none.yaml"),
		"SSL_CERT_FILE="+certFile)
	url, out := startServeAPI(t, filepath.Join(bin, "gssh"), env, "--interval", "200ms")
	sub := exec.Command(filepath.Join(bin, "gssh"), "submit", "--host", "ctl", "--mem", "1G", "--name", "train", "--", "sh", "-c", "exit 3")
	sub.Env = env
	if o, err := sub.CombinedOutput(); err != nil || !strings.Contains(string(o), "job 1 running on ctl:") {
		t.Fatalf("submit: %v: %s", err, o)
	}
	// A job whose walltime is within walltime_warning: its owner is told.
	long := exec.Command(filepath.Join(bin, "gssh"), "submit", "--host", "ctl", "--mem", "1G", "--name", "long", "--timeout", "1m", "--", "sleep", "20")
	long.Env = env
	if o, err := long.CombinedOutput(); err != nil || !strings.Contains(string(o), "job 2 running on ctl:") {
		t.Fatalf("submit: %v: %s", err, o)
	}
	defer func() {
		c := exec.Command(filepath.Join(bin, "gssh"), "cancel", "2")
		c.Env = env
		c.Run()
	}()
	scrape := func() string {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	want := []string{`gssh_notifications_total{channel="email",result="sent"} 2`, `gssh_notifications_total{channel="webhook",result="sent"} 1`,
		`gssh_notifications_total{channel="webhook",result="dropped"} 1`}
	var metrics string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		metrics = scrape()
		all := true
		for _, w := range want {
			all = all && strings.Contains(metrics, w)
		}
		if all {
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s:\n%s\ngssh serve said:\n%s", w, grepLines(metrics, "notifications"), out.String())
		}
	}
	subject := "Subject: gssh: job 1 (train) failed on ctl: exit status 3"
	mails := map[string]notifytest.Mail{}
	for _, m := range box.Mails() {
		mails[m.Data[strings.Index(m.Data, "Subject: "):][:30]] = m
	}
	if m, ok := mails[subject[:30]]; len(mails) != 2 || !ok || m.To != "me@lab.example" || !m.Auth || !strings.Contains(m.Data, subject) {
		t.Errorf("mails: %+v", box.Mails())
	}
	var warned bool
	for _, m := range box.Mails() {
		warned = warned || strings.Contains(m.Data, "Subject: gssh: job 2 (long) on ctl reaches its walltime of 1m at ")
	}
	if !warned {
		t.Errorf("no walltime warning in %+v", box.Mails())
	}
	if b := hook.Bodies(); len(b) != 1 || !strings.HasPrefix(b[0]["text"].(string), "gssh: job 1 (train) failed") {
		t.Errorf("webhook: %v", b)
	}
	if !strings.Contains(out.String(), "notification by webhook to http://127.0.0.1:") || strings.Contains(out.String(), "/old") {
		t.Errorf("gssh serve's log of the dropped webhook (its path kept out):\n%s", out.String())
	}
}
