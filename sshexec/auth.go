package sshexec

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gssh/gssh/sshconfig"
)

// keyring collects the signers to offer, in OpenSSH's order: the configured
// identities first (through the agent when it holds them, else from the
// file), then, unless IdentitiesOnly, the agent's other keys. With no
// configured identity the agent's keys come first and the default files
// after them. Offering the configured key first keeps a full agent from
// tripping the server's MaxAuthTries ("Too many authentication failures").
type keyring struct {
	signers []ssh.Signer
	offered []string // each signer, as a person tells it: its type, fingerprint and where it came from
	notes   []string // why a key could not be offered; shown when auth fails
	close   func()
}

// add offers signer, which came from where ("~/.ssh/id_ed25519",
// "ssh-agent").
func (kr *keyring) add(signer ssh.Signer, where string) {
	kr.signers = append(kr.signers, signer)
	pub := signer.PublicKey()
	kr.offered = append(kr.offered, fmt.Sprintf("%s %s (%s)", strings.TrimPrefix(pub.Type(), "ssh-"), ssh.FingerprintSHA256(pub), where))
}

func loadKeyring(s sshconfig.Settings, agentSock string) *keyring {
	kr := &keyring{close: func() {}}
	sock := agentSock
	if s.IdentityAgent != "" {
		sock = s.IdentityAgent
		if strings.EqualFold(sock, "none") {
			sock = ""
		}
		if strings.EqualFold(sock, "SSH_AUTH_SOCK") {
			sock = agentSock
		}
	}
	var agentSigners []ssh.Signer
	if sock != "" {
		conn, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			kr.notes = append(kr.notes, fmt.Sprintf("ssh-agent at %s: %v", sock, err))
		} else {
			kr.close = func() { conn.Close() }
			ss, err := agent.NewClient(conn).Signers()
			if err != nil {
				kr.notes = append(kr.notes, fmt.Sprintf("ssh-agent: %v", err))
			}
			agentSigners = ss
		}
	}
	used := make([]bool, len(agentSigners))
	fromAgent := func(pub ssh.PublicKey) ssh.Signer {
		for i, a := range agentSigners {
			if bytes.Equal(a.PublicKey().Marshal(), pub.Marshal()) {
				used[i] = true
				return a
			}
		}
		return nil
	}
	addFile := func(path string, explicit bool) {
		if pub := readPublic(path); pub != nil {
			if a := fromAgent(pub); a != nil {
				kr.add(a, path+", through ssh-agent")
				return
			}
		}
		signer, note := readPrivate(path, explicit)
		if note != "" {
			kr.notes = append(kr.notes, note)
		}
		if signer != nil {
			where := path
			if a := fromAgent(signer.PublicKey()); a != nil {
				signer, where = a, path+", through ssh-agent"
			}
			kr.add(signer, where)
		}
	}
	if s.IdentitiesExplicit {
		for _, f := range s.IdentityFiles {
			addFile(f, true)
		}
	}
	if !s.IdentitiesOnly || !s.IdentitiesExplicit {
		for i, a := range agentSigners {
			if !used[i] {
				kr.add(a, "ssh-agent")
			}
		}
	}
	if !s.IdentitiesExplicit {
		for _, f := range s.IdentityFiles {
			addFile(f, false)
		}
	}
	return kr
}

// readPublic reads path.pub, which lets an agent key be matched without
// decrypting the private key.
func readPublic(path string) ssh.PublicKey {
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	return pub
}

// readPrivate loads a private key file. A missing default file is silent; a
// missing configured file, an unreadable file or an encrypted key (gssh asks
// for no passphrase) gives a note for the auth error.
func readPrivate(path string, explicit bool) (ssh.Signer, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			return nil, ""
		}
		return nil, fmt.Sprintf("identity file %s: %v", path, unwrapPathErr(err))
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Sprintf("identity file %s is passphrase-protected and no ssh-agent holds it: run `ssh-add %s` (with SSH_AUTH_SOCK set) before gssh", path, path)
		}
		return nil, fmt.Sprintf("identity file %s: %v", path, err)
	}
	return signer, ""
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
