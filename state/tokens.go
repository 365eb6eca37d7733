package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketTokens holds the HTTP API's tokens (tokens/, by id): made by the
// first token's write, in a file of any schema version (an older gssh
// leaves the bucket alone), so no migration is needed.
const bucketTokens = "tokens"

// ErrNoToken means no token of that id is stored.
var ErrNoToken = errors.New("no such token")

// Token is the record of one API token: never the token itself, only
// the SHA-256 of it (hex), which a request's token is compared with.
type Token struct {
	ID      string    `json:"id"`   // the token's public part (8 hex digits), its key
	User    string    `json:"user"` // whose requests it makes
	Name    string    `json:"name,omitempty"`
	SHA256  string    `json:"sha256"` // of the whole token, hex
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"` // zero: never
	By      string    `json:"by,omitempty"`     // who made it (an admin, for another user)
}

// Tokens returns every token record, by id; a file without any has none.
// A record that cannot be decoded is left out and reported with an
// error wrapping ErrBadRecord (its token then opens nothing).
func (s *Bolt) Tokens() ([]Token, error) {
	out, bad, err := listRecords(s, bucketTokens, func(t Token) string { return t.ID })
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: the token records %s cannot be decoded (those tokens open nothing; gssh token revoke removes them)", ErrBadRecord, strings.Join(bad, ", "))
	}
	return out, nil
}

// Token returns the token record of id; an error wrapping ErrNoToken
// when there is none (or it cannot be decoded).
func (s *Bolt) Token(id string) (Token, error) {
	var t Token
	found := false
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketTokens))
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		found = v != nil && json.Unmarshal(v, &t) == nil && t.ID == id
		return nil
	})
	if err != nil {
		return Token{}, err
	}
	if !found {
		return Token{}, fmt.Errorf("token %s: %w", id, ErrNoToken)
	}
	return t, nil
}

// AddToken stores t under its id, in one transaction; an error when a
// token of that id is there already (ids are random: make another).
func (s *Bolt) AddToken(t Token) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketTokens))
		if err != nil {
			return err
		}
		if b.Get([]byte(t.ID)) != nil {
			return fmt.Errorf("token %s: one of that id is stored already", t.ID)
		}
		return b.Put([]byte(t.ID), v)
	})
}

// RemoveTokens deletes the token records whose ids are in ids and that
// keep says to remove (keep sees each record as stored; an undecodable
// one as a Token of its id alone), in one transaction, and returns the
// records removed. An id with no record is left out of them.
func (s *Bolt) RemoveTokens(ids []string, remove func(Token) bool) ([]Token, error) {
	return removeRecords(s, bucketTokens, ids, func(id string) Token { return Token{ID: id} }, remove)
}
