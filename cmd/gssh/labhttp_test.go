package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServedLabHTTP: the HTTP API of a lab's gssh serve. Alice, an OS
// account of the lab, makes a token with gssh token create (through the
// socket, as herself); over HTTP with it she submits, lists, follows her
// job's log and cancels a job, each as alice; bob's token may not cancel
// hers; a request without a token gets 401; /metrics answers loopback.
func TestServedLabHTTP(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	alice, bob := l.alice, l.bob
	stop, out := l.startServeOut(t, "--listen", "127.0.0.1:0")
	defer stop(false)
	m := regexp.MustCompile(`HTTP API on (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(out())
	if m == nil {
		t.Fatalf("gssh serve --listen did not say where:\n%s", out())
	}
	base := m[1]
	token := func(u *labUser) string {
		tok, errs, code := l.gssh(u, "token", "create", "--name", "test")
		if code != 0 || !strings.HasPrefix(tok, "gssh_") || strings.Count(tok, "\n") != 1 || !strings.Contains(errs, "token ") {
			t.Fatalf("%s's token create: exit %d: %q %s", u.name, code, tok, errs)
		}
		return strings.TrimSpace(tok)
	}
	aliceTok, bobTok := token(alice), token(bob)
	// Bob lists his own token; alice, an admin of the lab, everyone's.
	if list, _, code := l.gssh(bob, "token", "list"); code != 0 || strings.Count(list, "\n") != 2 || !strings.Contains(list, bob.name) || strings.Contains(list, alice.name) {
		t.Errorf("bob's token list: exit %d:\n%s; want his one token alone", code, list)
	}
	if list, _, code := l.gssh(alice, "token", "list"); code != 0 || strings.Count(list, "\n") != 3 {
		t.Errorf("alice's token list: exit %d:\n%s; want both tokens (she is an admin)", code, list)
	}
	if _, errs, code := l.gssh(bob, "token", "create", "--user", alice.name); code == 0 || !strings.Contains(errs, "only the lab's admins") {
		t.Errorf("bob's token for alice: exit %d: %s; want it refused", code, errs)
	}
	do := func(method, path, tok, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Trailer
	}

	if code, body, _ := do("GET", "/v1/jobs", "", ""); code != 401 || !strings.Contains(body, `"status": 401`) {
		t.Errorf("no token: %d %s", code, body)
	}
	code, body, _ := do("POST", "/v1/jobs", aliceTok, fmt.Sprintf(`{"command": "echo hello from $USER; id -un; sleep 1", "host": "w1", "mem": "1G", "workdir": %q}`, l.work))
	if code != 201 || !strings.Contains(body, `"state": "running"`) {
		t.Fatalf("alice's submit over HTTP: %d %s", code, body)
	}
	var sub struct{ ID int }
	json.Unmarshal([]byte(body), &sub)
	code, body, _ = do("GET", "/v1/jobs", bobTok, "")
	if code != 200 || !strings.Contains(body, `"user": "`+alice.name+`"`) {
		t.Errorf("bob's list: %d %s; want alice's job", code, body)
	}
	// Her log, followed to the job's end.
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/jobs/%d/log?follow=true", base, sub.ID), nil)
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	resp.Body.Close()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "hello from") || resp.Trailer.Get("Gssh-Job-State") != "succeeded" {
		t.Errorf("alice's log -f: %q, trailer %v", lines, resp.Trailer)
	}
	if code, body, _ := do("GET", fmt.Sprintf("/v1/jobs/%d", sub.ID), aliceTok, ""); code != 200 || !strings.Contains(body, `"user": "`+alice.name+`"`) {
		t.Errorf("alice's show: %d %s", code, body)
	}

	// A long job: bob may not cancel it; alice does.
	code, body, _ = do("POST", "/v1/jobs", aliceTok, fmt.Sprintf(`{"command": ["sleep", "300"], "host": "w1", "mem": "1G", "workdir": %q}`, l.work))
	json.Unmarshal([]byte(body), &sub)
	if code != 201 {
		t.Fatalf("alice's second submit: %d %s", code, body)
	}
	if code, body, _ := do("DELETE", fmt.Sprintf("/v1/jobs/%d", sub.ID), bobTok, ""); code != 403 || !strings.Contains(body, "is not yours") {
		t.Errorf("bob's cancel of alice's job: %d %s", code, body)
	}
	if code, body, _ := do("DELETE", fmt.Sprintf("/v1/jobs/%d?grace=1s", sub.ID), aliceTok, ""); code != 200 || !strings.Contains(body, `"cancel`) {
		t.Errorf("alice's cancel: %d %s", code, body)
	}
	// A request is counted once its handler returned, which may be just
	// after its client read the answer: the scrape may look again.
	scraped := func() (int, string, bool) {
		code, body, _ := do("GET", "/metrics", "", "")
		return code, body, code == 200 && strings.Contains(body, "gssh_host_up") && strings.Contains(body, `gssh_http_requests_total{code="403",route="DELETE /v1/jobs/{id}"} 1`)
	}
	code, body, ok := scraped()
	for i := 0; !ok && i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		code, body, ok = scraped()
	}
	if !ok {
		t.Errorf("/metrics: %d\n%s", code, grepLines(body, "gssh_host_up|gssh_http_requests_total"))
	}
	// A revoked token opens nothing.
	id := strings.Split(aliceTok, "_")[1]
	if out, errs, code := l.gssh(alice, "token", "revoke", id); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("alice's revoke: exit %d: %s%s", code, out, errs)
	}
	if code, _, _ := do("GET", "/v1/jobs", aliceTok, ""); code != 401 {
		t.Errorf("a revoked token: %d", code)
	}
}

// grepLines is the lines of s matching the regexp re.
func grepLines(s, re string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if regexp.MustCompile(re).MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
