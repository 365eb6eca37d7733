package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gssh/gssh/state"
)

// TestTokens: token records are added once per id, read back, listed,
// and removed as remove says, each in one transaction; a file without
// any has none.
func TestTokens(t *testing.T) {
	s, _ := openTemp(t)
	if ts, err := s.Tokens(); err != nil || len(ts) != 0 {
		t.Fatalf("a new file's tokens: %v, %v", ts, err)
	}
	if _, err := s.Token("0a1b2c3d"); !errors.Is(err, state.ErrNoToken) {
		t.Errorf("a token never stored: %v", err)
	}
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	a := state.Token{ID: "0a1b2c3d", User: "alice", Name: "laptop", SHA256: "aa", Created: now, Expires: now.Add(90 * 24 * time.Hour)}
	b := state.Token{ID: "11223344", User: "bob", SHA256: "bb", Created: now}
	for _, tok := range []state.Token{a, b} {
		if err := s.AddToken(tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddToken(a); err == nil {
		t.Error("a second token of the same id was stored")
	}
	if got, err := s.Token(a.ID); err != nil || got != a {
		t.Errorf("Token(%s) = %+v, %v", a.ID, got, err)
	}
	if ts, err := s.Tokens(); err != nil || len(ts) != 2 || ts[0] != a || ts[1] != b {
		t.Errorf("Tokens = %+v, %v", ts, err)
	}
	gone, err := s.RemoveTokens([]string{a.ID, b.ID, "ffffffff"}, func(t state.Token) bool { return t.User == "bob" })
	if err != nil || len(gone) != 1 || gone[0] != b {
		t.Errorf("RemoveTokens of bob's: %+v, %v", gone, err)
	}
	if ts, _ := s.Tokens(); len(ts) != 1 || ts[0] != a {
		t.Errorf("after the removal: %+v", ts)
	}
}
