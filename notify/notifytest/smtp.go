// Package notifytest holds test helpers for notifications: an SMTP
// server on loopback (github.com/emersion/go-smtp) that keeps what it is
// sent, with STARTTLS and PLAIN auth, and a webhook receiver. Only tests
// import it.
package notifytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The account the SMTP server accepts (PLAIN auth).
const (
	User     = "gssh"
	Password = "secret"
)

// Mail is one message the server took.
type Mail struct {
	From, To string
	Data     string // headers and body, CRLF lines
	Auth     bool   // sent after PLAIN auth as User
}

// SMTP is a loopback SMTP server.
type SMTP struct {
	Addr  string         // 127.0.0.1:PORT
	Roots *x509.CertPool // trusts its certificate (with STARTTLS)
	// CertPEM is that certificate in PEM (for SSL_CERT_FILE).
	CertPEM []byte
	mu      sync.Mutex
	mails   []Mail
}

// NewSMTP starts an SMTP server on loopback, offering STARTTLS (a fresh
// certificate for 127.0.0.1) when tlsOn, and stops it at Cleanup.
func NewSMTP(t testing.TB, tlsOn bool) *SMTP {
	t.Helper()
	m := &SMTP{Roots: x509.NewCertPool()}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{box: m}, nil }))
	s.Domain = "127.0.0.1"
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	if tlsOn {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		m.Roots.AddCert(cert)
		m.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Addr = ln.Addr().String()
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return m
}

// Mails is what the server took so far.
func (m *SMTP) Mails() []Mail {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Mail(nil), m.mails...)
}

type session struct {
	box  *SMTP
	mail Mail
	auth bool
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != User || pass != Password {
			return errors.New("bad credentials")
		}
		s.auth = true
		return nil
	}), nil
}
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.mail.From = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error   { s.mail.To = to; return nil }
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.mail.Data, s.mail.Auth = string(b), s.auth
	s.box.mu.Lock()
	s.box.mails = append(s.box.mails, s.mail)
	s.box.mu.Unlock()
	return err
}
func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }

// Hook is a webhook receiver on loopback that keeps each JSON body
// posted to it.
type Hook struct {
	URL    string
	mu     sync.Mutex
	bodies []map[string]any
}

// NewHook starts a webhook receiver, stopped at Cleanup.
func NewHook(t testing.TB) *Hook {
	h := &Hook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.bodies = append(h.bodies, m)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// Bodies is what was posted so far.
func (h *Hook) Bodies() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies...)
}
