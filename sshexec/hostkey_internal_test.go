package sshexec

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshconfig"
)

// A host on port 22 is named without a port in known_hosts ("10.0.0.9
// ssh-ed25519 ...", as ssh writes it): its key is found, and a match
// passes (the knownhosts callback wants host:port, Normalize drops :22).
func TestKnownHostOnPort22(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{"10.0.0.9"}, key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []sshconfig.Settings{
		{HostName: "10.0.0.9", Port: 22, UserKnownHostsFiles: []string{kh}},
		{HostName: "192.0.2.1", HostKeyAlias: "10.0.0.9", Port: 22, UserKnownHostsFiles: []string{kh}},
	} {
		hk, err := newHostKeys(s, func(string) {}, &sync.Mutex{})
		if err != nil {
			t.Fatal(err)
		}
		if got := hk.known(); len(got) != 1 {
			t.Errorf("%+v: known keys %v, want the one in known_hosts", s, got)
		}
		if err := hk.check("", nil, key); err != nil {
			t.Errorf("%+v: check = %v, want the key accepted", s, err)
		}
	}
}
