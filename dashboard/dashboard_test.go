package dashboard_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gssh/gssh/dashboard"
)

func TestLogin(t *testing.T) {
	h := dashboard.Handler(dashboard.Options{
		TokenUser: func(_ context.Context, tok string) (string, error) {
			if tok == "good" {
				return "alice", nil
			}
			return "", errors.New("bad token")
		},
		Admin: func(user string) bool { return false },
	})
	do := func(method, target, body, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: dashboard.Cookie, Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("GET", "/", "", ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Errorf("/ without a session: %d %v", w.Code, w.Header())
	}
	if w := do("GET", "/", "", "stale"); w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("/ with a token no longer good: %d %v (the cookie cleared)", w.Code, w.Header())
	}
	if w := do("GET", "/login", "", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="token"`) {
		t.Errorf("/login: %d", w.Code)
	}
	if w := do("GET", "/login?token=nope", "", ""); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "That token is not valid") || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("a wrong token: %d %v", w.Code, w.Header())
	}
	for _, w := range []*httptest.ResponseRecorder{do("GET", "/login?token=good", "", ""), do("POST", "/login", url.Values{"token": {"good"}}.Encode(), "")} {
		c := w.Header().Get("Set-Cookie")
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" || !strings.Contains(c, dashboard.Cookie+"=good") ||
			!strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") {
			t.Errorf("login: %d %v", w.Code, w.Header())
		}
	}
	w := do("GET", "/", "", "good")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-user="alice" data-admin="false"`) ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'self'") || w.Header().Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page: %d %v", w.Code, w.Header())
	}
	if w := do("POST", "/logout", "", "good"); w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %d %v", w.Code, w.Header())
	}
	w = do("GET", "/static/app.js", "", "")
	b, _ := io.ReadAll(w.Body)
	if w.Code != http.StatusOK || !strings.Contains(string(b), "X-Gssh-Request") {
		t.Errorf("app.js: %d", w.Code)
	}
}
