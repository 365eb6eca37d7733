package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/gssh/gssh/state"
)

// The HTTP API's tokens. A token is "gssh_" + its id (8 hex digits, also
// its record's key and what gssh token list and revoke name it by) + "_"
// + 43 characters of base64url (32 random bytes); the state keeps its
// SHA-256 alone (state.Token), so a copy of the state opens nothing. A
// request's token is looked up by its id and its SHA-256 compared in
// constant time (crypto/subtle). Each request it carries is made as the
// token's user, with that user's rights, as a request over the socket
// is made as its peer's.

// DefaultTokenExpiry is how long a token lasts when TokenRequest gives
// no expiry.
const DefaultTokenExpiry = 90 * 24 * time.Hour

// ErrBadToken is the one error of a token that opens nothing: malformed,
// unknown, revoked or expired (which of them is not said).
var ErrBadToken = errors.New("the token is not valid (wrong, revoked or expired)")

// TokenRequest is gssh token create.
type TokenRequest struct {
	// User is whose requests the token makes ("": the caller's). Only a
	// lab's admins (policy users: admin: true) and its pass user make
	// tokens for others.
	User string `json:"user,omitempty"`
	Name string `json:"name,omitempty"` // what it is for ("laptop")
	// Expires is how long it lasts from now: 0 for DefaultTokenExpiry,
	// negative for never.
	Expires time.Duration `json:"expires,omitempty"`
}

// TokenInfo is what gssh token list shows of a token: never the token.
type TokenInfo struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"` // zero: never
	By      string    `json:"by,omitempty"`     // who made it, when not its user
}

// TokenCreated is a new token, shown once: Token is the secret.
type TokenCreated struct {
	Token string    `json:"token"`
	Info  TokenInfo `json:"info"`
}

// TokensDoc is gssh token list --json (schema gssh.tokens/v1).
type TokensDoc struct {
	Schema string      `json:"schema"`
	Tokens []TokenInfo `json:"tokens"`
}

func tokenInfo(t state.Token) TokenInfo {
	return TokenInfo{ID: t.ID, User: t.User, Name: t.Name, Created: t.Created, Expires: t.Expires, By: t.By}
}

// tokenAdmin reports whether l's user may make, list and revoke the
// tokens of others: in personal mode, the one user; in a lab, its pass
// user and its admins.
func (l *Local) tokenAdmin() (bool, error) {
	if l.guest() {
		return false, nil
	}
	if l.lab == nil || !l.member() {
		return true, nil
	}
	f, err := l.hosts()
	if err != nil {
		return false, err
	}
	return f.Inventory().Policy.Plan.Users[l.opt.User].Admin, nil
}

// CreateToken makes a token for r.User and stores its record: the token
// is in the result alone, once. Errors: a user who may not make one for
// another, a user or name that is not one, the state's.
func (l *Local) CreateToken(ctx context.Context, r TokenRequest) (TokenCreated, error) {
	user := cmp.Or(r.User, l.opt.User)
	switch {
	case !plainWord(user, 64):
		return TokenCreated{}, fmt.Errorf("user %q: give an account name (letters, digits, . _ -; at most 64)", user)
	case len(r.Name) > 100 || strings.ContainsFunc(r.Name, unicode.IsControl):
		return TokenCreated{}, fmt.Errorf("name %q: give a short name of printable characters (at most 100), such as laptop", r.Name)
	case user != l.opt.User && l.guest():
		return TokenCreated{}, fmt.Errorf("only %s, whose queue this is, makes tokens for others; you are %s: leave --user out for one of your own", l.opt.Owner, l.opt.User)
	case user != l.opt.User && l.lab == nil:
		f, err := l.hosts()
		if err != nil {
			return TokenCreated{}, err
		}
		if _, ok := f.Inventory().Policy.Plan.Users[user]; !ok {
			return TokenCreated{}, fmt.Errorf("this is %s's own queue: a token for another user is for someone you share it with through the HTTP API, listed under the inventory's `policy: users:`; %s is not there: add it (e.g. `%s: {weight: 1}`), or leave --user out", l.opt.User, user, user)
		}
	case user != l.opt.User:
		admin, err := l.tokenAdmin()
		if err != nil {
			return TokenCreated{}, err
		}
		if !admin {
			return TokenCreated{}, fmt.Errorf("only the lab's admins (policy users: admin: true) and its pass user make tokens for others; you are %s: leave --user out for one of your own", l.opt.User)
		}
	}
	st, err := l.store(true)
	if err != nil {
		return TokenCreated{}, err
	}
	now := l.opt.Now().UTC().Truncate(time.Second)
	rec := state.Token{User: user, Name: r.Name, Created: now}
	switch {
	case r.Expires == 0:
		rec.Expires = now.Add(DefaultTokenExpiry)
	case r.Expires > 0:
		rec.Expires = now.Add(r.Expires)
	}
	if user != l.opt.User {
		rec.By = l.opt.User
	}
	for try := 0; ; try++ {
		var id [4]byte
		var secret [32]byte
		rand.Read(id[:]) // never fails (crypto/rand)
		rand.Read(secret[:])
		rec.ID = hex.EncodeToString(id[:])
		tok := "gssh_" + rec.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
		sum := sha256.Sum256([]byte(tok))
		rec.SHA256 = hex.EncodeToString(sum[:])
		err := st.AddToken(rec)
		if err == nil {
			return TokenCreated{Token: tok, Info: tokenInfo(rec)}, nil
		}
		if try == 3 || !strings.Contains(err.Error(), "stored already") {
			return TokenCreated{}, err
		}
	}
}

// plainWord reports whether s is 1 to max characters of letters,
// digits, '.', '_' and '-' (an account name).
func plainWord(s string, max int) bool {
	return s != "" && len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
	})
}

// Tokens lists the tokens l's user may see: their own, or every one for
// an admin (see tokenAdmin), by user then creation.
func (l *Local) Tokens(ctx context.Context) (TokensDoc, error) {
	doc := TokensDoc{Schema: "gssh.tokens/v1", Tokens: []TokenInfo{}}
	st, none, err := l.readStore()
	if err != nil || none {
		return doc, err
	}
	admin, err := l.tokenAdmin()
	if err != nil {
		return doc, err
	}
	recs, err := st.Tokens()
	for _, t := range recs {
		if admin || t.User == l.opt.User {
			doc.Tokens = append(doc.Tokens, tokenInfo(t))
		}
	}
	slices.SortFunc(doc.Tokens, func(a, b TokenInfo) int {
		return cmp.Or(cmp.Compare(a.User, b.User), a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return doc, err
}

// RevokeTokens removes the tokens of ids that l's user may revoke (their
// own; an admin's, any), in one transaction: a request carrying one is
// refused from then on. It returns those removed; an id that names no
// token of theirs is an error naming it (the others are removed).
func (l *Local) RevokeTokens(ctx context.Context, ids []string) ([]TokenInfo, error) {
	if len(ids) == 0 {
		return nil, errors.New("no token given: name the tokens by their ids (gssh token list)")
	}
	admin, err := l.tokenAdmin()
	if err != nil {
		return nil, err
	}
	st, err := l.store(false)
	if errors.Is(err, state.ErrNoState) {
		return nil, fmt.Errorf("token %s: %w", ids[0], state.ErrNoToken)
	}
	if err != nil {
		return nil, err
	}
	gone, err := st.RemoveTokens(ids, func(t state.Token) bool { return admin || t.User == l.opt.User })
	out := []TokenInfo{}
	for _, t := range gone {
		out = append(out, tokenInfo(t))
	}
	if err != nil {
		return out, err
	}
	var missing []string
	for _, id := range ids {
		if !slices.ContainsFunc(gone, func(t state.Token) bool { return t.ID == id }) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("token %s: %w of yours (gssh token list shows them)", strings.Join(missing, ", "), state.ErrNoToken)
	}
	return out, nil
}

// TokenUser is the user whose requests tok makes, when it is a token
// stored and not expired; else an error wrapping ErrBadToken, the same
// whatever is wrong (a state that cannot be read: its own error).
func (l *Local) TokenUser(ctx context.Context, tok string) (string, error) {
	rest, ok := strings.CutPrefix(tok, "gssh_")
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(id) != 8 || len(tok) > 200 {
		return "", ErrBadToken
	}
	st, none, err := l.readStore()
	switch {
	case err != nil:
		return "", err
	case none:
		return "", ErrBadToken
	}
	rec, err := st.Token(id)
	if errors.Is(err, state.ErrNoToken) {
		return "", ErrBadToken
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(tok))
	want, derr := hex.DecodeString(rec.SHA256)
	if derr != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return "", ErrBadToken
	}
	if !rec.Expires.IsZero() && !l.opt.Now().Before(rec.Expires) {
		return "", ErrBadToken
	}
	return rec.User, nil
}

// CheckAPI refuses an HTTP API (gssh serve --listen) over a lab whose
// members may write the state (one without serve: true): a token record
// could be forged there.
func (l *Local) CheckAPI() error {
	if l.lab != nil && !l.lab.dir.Served {
		return fmt.Errorf("the lab of %s lets its members write the state, where they could forge a token: the HTTP API needs a lab kept by gssh serve alone (serve: true; docs/lab.md says how to move it)", l.lab.file)
	}
	return nil
}
