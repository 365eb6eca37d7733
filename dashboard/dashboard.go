// Package dashboard is gssh serve's web dashboard: a page that reads the
// HTTP API (every GPU and who holds it, the queue and why each job waits,
// the hosts, fair-share standing, GPU use over time) and refreshes
// itself, served from files embedded in gssh (no CDN: it works offline).
// A person logs in with an API token, by a form or a link
// (/login?token=TOKEN); the session is an HttpOnly cookie holding it,
// which the API takes in place of the Authorization header.
package dashboard

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// Cookie is the session cookie's name: its value is the token.
const Cookie = "gssh_session"

// CSRFHeader must come with a change the API is asked for on the
// cookie alone: the page's script sends it; a form or link of another
// site cannot.
const CSRFHeader = "X-Gssh-Request"

//go:embed static
var static embed.FS

var pages = template.Must(template.ParseFS(static, "static/index.html", "static/login.html"))

// Options are what the dashboard needs of gssh serve.
type Options struct {
	// TokenUser is the user of a valid token, else an error
	// (service.Local.TokenUser).
	TokenUser func(ctx context.Context, token string) (string, error)
	// Admin reports whether user may act on every job (the page offers
	// to cancel them all); nil: on their own only.
	Admin func(user string) bool
}

// Handler serves GET / (the dashboard, or a redirect to the login),
// GET and POST /login, POST /logout and GET /static/....
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(static, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(files)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(Cookie)
		if err != nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		user, err := o.TokenUser(r.Context(), c.Value)
		if err != nil {
			clear(w, r)
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		admin := o.Admin != nil && o.Admin(user)
		page(w, "index.html", http.StatusOK, map[string]any{"User": user, "Admin": admin})
	})
	login := func(w http.ResponseWriter, r *http.Request, tok string) {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			page(w, "login.html", http.StatusOK, nil)
			return
		}
		if _, err := o.TokenUser(r.Context(), tok); err != nil {
			page(w, "login.html", http.StatusUnauthorized, map[string]string{"Error": "That token is not valid: mistyped, revoked or expired? gssh token create makes one."})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: Cookie, Value: tok, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) { login(w, r, r.URL.Query().Get("token")) })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		login(w, r, r.PostFormValue("token"))
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		clear(w, r)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	return mux
}

// clear ends the session: the cookie expires.
func clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: Cookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

// page writes the template name with data.
func page(w http.ResponseWriter, name string, status int, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	pages.ExecuteTemplate(w, name, data)
}
