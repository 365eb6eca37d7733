package sshexec

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshconfig"
)

// hostKeys checks server keys against known_hosts as OpenSSH does:
// entries are looked up under HostKeyAlias or HostName with the port in
// `[host]:port` form; hashed entries match; the host key algorithms offered
// are limited to the key types known for the host (else a host that also has
// an ECDSA key would fail against an ed25519-only entry).
//
// StrictHostKeyChecking: "yes" and "ask" refuse unknown keys (gssh has no
// prompt); "accept-new" and "no" add unknown keys to the first
// UserKnownHostsFile. A changed key is always refused, also with "no":
// OpenSSH lets such a connection through with restrictions, gssh runs
// commands unattended and does not.
type hostKeys struct {
	lookup   string // knownhosts.Normalize(host:port) of HostKeyAlias or HostName: how known_hosts names it ("h" on port 22, "[h]:2222")
	addr     string // host:port of HostKeyAlias or HostName, always with the port: what the knownhosts callback parses
	keyscan  string // the ssh-keyscan command that fetches the key
	strict   string
	files    []string // existing files, user then global
	addTo    string   // where accept-new writes
	db       ssh.HostKeyCallback
	warn     func(string)
	appendMu *sync.Mutex
}

func newHostKeys(s sshconfig.Settings, warn func(string), appendMu *sync.Mutex) (*hostKeys, error) {
	name := s.HostName
	if s.HostKeyAlias != "" {
		name = s.HostKeyAlias
	}
	addr := net.JoinHostPort(name, strconv.Itoa(s.Port))
	hk := &hostKeys{
		lookup:   knownhosts.Normalize(addr),
		addr:     addr,
		strict:   s.StrictHostKeyChecking,
		warn:     warn,
		appendMu: appendMu,
	}
	if len(s.UserKnownHostsFiles) > 0 {
		hk.addTo = s.UserKnownHostsFiles[0]
	}
	hk.keyscan = fmt.Sprintf("ssh-keyscan -p %d %s >> %s", s.Port, s.HostName, cmp.Or(hk.addTo, "~/.ssh/known_hosts"))
	for _, f := range append(append([]string(nil), s.UserKnownHostsFiles...), s.GlobalKnownHostsFiles...) {
		if _, err := os.Stat(f); err == nil {
			hk.files = append(hk.files, f)
		}
	}
	if len(hk.files) > 0 {
		db, err := knownhosts.New(hk.files...)
		if err != nil {
			return nil, fault(ErrConfig, "known_hosts: %v", err)
		}
		hk.db = db
	}
	return hk, nil
}

// remoteAddr is what the knownhosts callback needs to parse; the look-up
// itself uses hk.addr (OpenSSH's CheckHostIP is off by default).
var remoteAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}

// known returns the keys known_hosts holds for the host, one per key type.
func (hk *hostKeys) known() []knownhosts.KnownKey {
	if hk.db == nil {
		return nil
	}
	err := hk.db(hk.addr, remoteAddr, probeKey{})
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) {
		return ke.Want
	}
	return nil
}

// algorithms returns the host key algorithms to offer: those of the key types
// known for the host, or nil (x/crypto's defaults) when none is known.
func (hk *hostKeys) algorithms() []string {
	var out []string
	for _, k := range hk.known() {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			out = append(out, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			out = append(out, t)
		}
	}
	return out
}

// check is the ssh.HostKeyCallback.
func (hk *hostKeys) check(_ string, _ net.Addr, key ssh.PublicKey) error {
	if hk.db != nil {
		err := hk.db(hk.addr, remoteAddr, key)
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &re):
			return fault(ErrHostKey, "%s offers a key revoked at %s:%d", hk.lookup, re.Revoked.Filename, re.Revoked.Line)
		case errors.As(err, &ke) && len(ke.Want) > 0:
			w := ke.Want[0]
			return fault(ErrHostKey, "%s offers %s %s, but %s:%d holds %s %s; if the host was reinstalled, remove that line (ssh-keygen -R '%s') and connect again",
				hk.lookup, key.Type(), ssh.FingerprintSHA256(key), w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key), hk.lookup)
		case !errors.As(err, &ke):
			return fault(ErrConfig, "known_hosts: %v", err)
		}
	}
	// Unknown host.
	switch hk.strict {
	case "accept-new", "no":
		return hk.add(key)
	}
	return fault(ErrUnknownHostKey, "no known_hosts entry for %s (%s %s) and StrictHostKeyChecking is %s; check the fingerprint and add it with `%s`, connect once with ssh, or set StrictHostKeyChecking accept-new for this host in your ssh config",
		hk.lookup, key.Type(), ssh.FingerprintSHA256(key), cmp.Or(hk.strict, "ask"), hk.keyscan)
}

func (hk *hostKeys) add(key ssh.PublicKey) error {
	if hk.addTo == "" {
		return fault(ErrConfig, "no UserKnownHostsFile to add the key of %s to", hk.lookup)
	}
	hk.appendMu.Lock()
	defer hk.appendMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(hk.addTo), 0o700); err != nil {
		return fault(ErrConfig, "known_hosts: %v", err)
	}
	f, err := os.OpenFile(hk.addTo, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fault(ErrConfig, "known_hosts: %v", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, knownhosts.Line([]string{hk.lookup}, key)); err != nil {
		return fault(ErrConfig, "known_hosts: %v", err)
	}
	if hk.warn != nil {
		hk.warn(fmt.Sprintf("added the %s key of %s (%s) to %s", key.Type(), hk.lookup, ssh.FingerprintSHA256(key), hk.addTo))
	}
	return nil
}

// probeKey is a public key equal to no real key, used to make the known_hosts
// callback list the keys it holds for a host.
type probeKey struct{}

func (probeKey) Type() string                        { return "gssh-probe" }
func (probeKey) Marshal() []byte                     { return []byte("gssh-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }
