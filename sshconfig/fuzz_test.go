package sshconfig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: no configuration text makes Parse or Resolve panic. Include
// reads nothing from disk here: every included path is missing.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.txt")
	more, _ := filepath.Glob("testdata/conformance/*.conf")
	for _, p := range append(seeds, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(string(data))
		}
	}
	f.Add("Host a\n ProxyJump b,c\nHost b\n ProxyJump a\nMatch final host a* !exec x\n HostName %h.%%\n Include *\n")
	f.Add("Host *\n ProxyJump [::1]:22,ssh://u@h:1\n ProxyCommand %h %p %k %n %r\n IdentityFile %C%l%L%d%u\n")
	missing := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	glob := func(p string) ([]string, error) { return []string{p}, nil }
	env := Env{Home: "/home/me", LocalUser: "me", LocalHost: "box.example"}
	f.Fuzz(func(t *testing.T, text string) {
		c := parseWith(env, "fuzz", []byte(text), missing, glob)
		for _, alias := range []string{"a", "b", "web01", "My-Host", "", "%h"} {
			s, err := c.Resolve(alias, Overrides{IdentityFile: "~/k"})
			if err == nil && (s.Port < 1 || s.Port > 65535 || len(s.IdentityFiles) == 0) {
				t.Fatalf("%q: bad settings %+v", alias, s)
			}
			var ce *chainError
			if errors.As(err, &ce) && len(ce.chain) < 2 {
				t.Fatalf("chain error without a chain: %v", err)
			}
		}
		_ = c.Warnings()
	})
}
