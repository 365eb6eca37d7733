package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/url"
	"os"
	"strings"
	"time"
)

// postWebhook posts notice to w in w's format. A 2xx answer is success;
// 4xx (but 408 and 429) is permanent; the rest may pass another time.
func postWebhook(ctx context.Context, client *http.Client, w Webhook, notice Notice) error {
	var body any
	switch w.Format {
	case FormatSlack:
		body = map[string]string{"text": notice.Subject}
	case FormatMattermost:
		body = map[string]string{"text": notice.Subject, "username": "gssh"}
	default:
		body = struct {
			Text  string          `json:"text"`
			Event json.RawMessage `json:"event"`
		}{notice.Subject, bytes.TrimSpace(notice.Line)}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return &permanent{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(b))
	if err != nil {
		return &permanent{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gssh")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return &permanent{fmt.Errorf("the webhook answered %s", resp.Status)}
	default:
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
}

// sendMail sends notice to one address through m's server: TLS from the
// start on port 465, else STARTTLS (required unless m.StartTLS is
// false), PLAIN auth when m.User is set.
func sendMail(ctx context.Context, m Email, to string, notice Notice, roots *x509.CertPool) error {
	host, port, err := net.SplitHostPort(m.Server)
	if err != nil {
		return &permanent{err}
	}
	tlsCfg := &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Server)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if port == "465" {
		conn = tls.Client(conn, tlsCfg)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if port != "465" {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsCfg); err != nil {
				return fmt.Errorf("STARTTLS: %w", err)
			}
		} else if m.StartTLS {
			return &permanent{fmt.Errorf("%s offers no STARTTLS: give starttls: false to send in the clear (only to a relay on this machine)", m.Server)}
		}
	}
	if m.User != "" {
		pass, err := password(m.PasswordFile)
		if err != nil {
			return &permanent{err}
		}
		if err := c.Auth(smtp.PlainAuth("", m.User, pass, host)); err != nil {
			return &permanent{fmt.Errorf("auth as %s: %w", m.User, err)}
		}
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return &permanent{fmt.Errorf("from %q: %w", m.From, err)}
	}
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(message(m.From, to, notice, time.Now())); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// password is the first line of file.
func password(file string) (string, error) {
	if file == "" {
		return "", errors.New("smtp user set, but no password_file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("smtp password: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// message is notice as a mail (RFC 5322, UTF-8 text, CRLF lines).
func message(from, to string, notice Notice, now time.Time) []byte {
	var id [12]byte
	rand.Read(id[:])
	domain := "gssh"
	if a, err := mail.ParseAddress(from); err == nil {
		if _, d, ok := strings.Cut(a.Address, "@"); ok {
			domain = d
		}
	}
	var b strings.Builder
	subject := notice.Subject // one line (NoticeOf)
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@%s>\r\n", from, to,
		mime.QEncoding.Encode("utf-8", subject), now.Format(time.RFC1123Z), hex.EncodeToString(id[:]), domain)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	for line := range strings.SplitSeq(strings.TrimRight(notice.Text, "\n"), "\n") {
		b.WriteString(line + "\r\n") // smtp's data writer dot-stuffs
	}
	return []byte(b.String())
}

// redact is a destination as a warning names it: a webhook's URL
// without its path and query (Slack's carry the secret).
func redact(to string) string {
	if u, err := url.Parse(to); err == nil && u.Scheme != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return to
}
