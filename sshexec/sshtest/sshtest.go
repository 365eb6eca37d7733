// Package sshtest holds SSH test helpers for gssh's tests and benchmarks,
// shipped like k0sproject/rig's rigtest. Only tests import it.
//
// Two kinds of fake host are offered, both on loopback TCP addresses and
// both with fresh host keys that clients pin through known_hosts:
//
//   - NewServer: an in-process x/crypto/ssh server answering exec requests
//     with an ExecFunc. Fast; for pool reuse, per-host concurrency,
//     timeouts and partial failures.
//   - StartSSHD: a real OpenSSH sshd, started per accepted connection in
//     inetd mode. For conformance with the real thing.
//
// Everything a helper starts is torn down with tb.Cleanup.
package sshtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Key is a client key pair written to disk in OpenSSH format.
type Key struct {
	Path           string     // private key file, mode 0600
	PubPath        string     // Path + ".pub"
	Signer         ssh.Signer // the same key, ready for ssh.PublicKeys
	AuthorizedLine string     // "ssh-ed25519 AAAA...", no trailing newline
}

// NewKey generates an ed25519 key pair and writes it to a new file in dir
// (a fresh temp dir when dir is ""). A non-empty passphrase encrypts the
// private key file (bcrypt KDF: about 0.1s, 1s under -race); the Signer is
// usable either way.
func NewKey(tb testing.TB, dir, passphrase string) Key {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("sshtest: generate key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatalf("sshtest: key signer: %v", err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "sshtest")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "sshtest", []byte(passphrase))
	}
	if err != nil {
		tb.Fatalf("sshtest: marshal key: %v", err)
	}
	f, err := os.CreateTemp(dir, "id_ed25519-*") // mode 0600
	if err != nil {
		tb.Fatalf("sshtest: create key file: %v", err)
	}
	_, err = f.Write(pem.EncodeToMemory(block))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("sshtest: write key file: %v", err)
	}
	k := Key{
		Path:           f.Name(),
		PubPath:        f.Name() + ".pub",
		Signer:         signer,
		AuthorizedLine: authorizedLine(signer.PublicKey()),
	}
	writeFile(tb, k.PubPath, k.AuthorizedLine+" sshtest\n", 0o644)
	return k
}

// KnownHosts writes the given known_hosts lines to a new file in dir (a
// fresh temp dir when dir is "") and returns its path.
func KnownHosts(tb testing.TB, dir string, lines ...string) string {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	f, err := os.CreateTemp(dir, "known_hosts-*")
	if err != nil {
		tb.Fatalf("sshtest: create known_hosts: %v", err)
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("sshtest: write known_hosts: %v", err)
	}
	return f.Name()
}

// newHostKey generates a private host key of the given type: "ed25519"
// (also for ""), "ecdsa" (P-256) or "rsa" (2048 bits).
func newHostKey(kind string) (crypto.Signer, error) {
	switch kind {
	case "", "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case "ecdsa":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		return rsa.GenerateKey(rand.Reader, 2048)
	}
	return nil, fmt.Errorf("unknown host key type %q", kind)
}

// listen opens a TCP listener on ip:0 (ip defaults to 127.0.0.1) and
// returns it with its host and port.
func listen(tb testing.TB, ip string) (net.Listener, string, int) {
	tb.Helper()
	if ip == "" {
		ip = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatalf("sshtest: listen: %v", err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	return ln, host, p
}

// knownHostsLine is the known_hosts line pinning key for addr.
func knownHostsLine(addr string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
}

// authorizedLine is key in authorized_keys form, without a newline.
func authorizedLine(key ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

func writeFile(tb testing.TB, path, data string, perm os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
}
