package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// RPCPath is the HTTP API's route that carries the socket's protocol
// (Server.Exchange), under the server's URL.
const RPCPath = "/v1/rpc"

// IsURL reports whether a server's address is an HTTP API's URL rather
// than a socket's path.
func IsURL(path string) bool {
	return strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://")
}

type tokenKey struct{}

// WithToken is ctx carrying the token of the calls made with it to an
// HTTP API (Authorization: Bearer TOKEN).
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// ErrToken wraps an HTTP API's refusal of the token (401).
var ErrToken = errors.New("gssh serve refused the token")

// httpRoundTrip is roundTrip over an HTTP API at base: req, then what
// in gives, as the request's body (streamed: the answer is read as it
// comes), the answer's lines as the socket's.
func httpRoundTrip(ctx context.Context, base, op string, req []byte, result any, more func(json.RawMessage) error, in <-chan any) error {
	url := strings.TrimSuffix(base, "/") + RPCPath
	var body io.Reader = bytes.NewReader(req)
	if in != nil {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		defer close(done)
		go func() {
			if _, err := pw.Write(req); err == nil {
				sendLines(pw, in, done)
			}
			pw.Close()
		}()
		body = pr
	}
	hreq, err := http.NewRequestWithContext(ctx, "POST", url, body)
	if err != nil {
		return fmt.Errorf("--server %s: %w", base, err)
	}
	hreq.Header.Set("Content-Type", "application/x-ndjson")
	if tok, _ := ctx.Value(tokenKey{}).(string); tok != "" {
		hreq.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return fmt.Errorf("%w (%s: %v)", ErrNotServing, base, oe.Err) // nothing listens there
		}
		return fmt.Errorf("%s: %w", base, errors.Unwrap(err)) // a certificate not trusted, a connection cut
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var p struct{ Detail string }
		json.Unmarshal(b, &p)
		msg := strings.TrimSpace(p.Detail)
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%w: %s (give it with --token-file FILE or $GSSH_TOKEN)", ErrToken, msg)
		}
		return fmt.Errorf("%s: %s: %s", url, resp.Status, msg)
	}
	return readAnswer(ctx, bufio.NewReader(resp.Body), url, op, nil, result, more)
}
