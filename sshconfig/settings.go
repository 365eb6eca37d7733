package sshconfig

import (
	"strconv"
	"time"
)

// Settings is everything gssh needs to reach one host, resolved.
type Settings struct {
	// Alias is the name that was resolved (OpenSSH's %n): the inventory name.
	Alias string
	// HostName is the address to dial (%h), after token expansion, lower
	// case as ssh uses it. Defaults to Alias.
	HostName string
	// Port defaults to 22.
	Port int
	// User is the login user; defaults to the local user.
	User string
	// IdentityFiles are the private key paths in OpenSSH's order:
	// Overrides.IdentityFile, then every IdentityFile value of every matching
	// block (a repeated value dropped), ~ and tokens expanded. When none is
	// configured it holds OpenSSH's defaults as OpenSSH 9.2's `ssh -G` prints
	// them (~/.ssh/id_rsa, id_ecdsa, id_ecdsa_sk, id_ed25519, id_ed25519_sk,
	// id_xmss, id_dsa) and IdentitiesExplicit is false.
	IdentityFiles      []string
	IdentitiesExplicit bool
	// IdentitiesOnly: offer only IdentityFiles, never other agent keys.
	IdentitiesOnly bool
	// IdentityAgent overrides SSH_AUTH_SOCK when set ("none" disables the
	// agent): a socket path, ~ and tokens expanded, or a "$VARIABLE" name
	// left as it is. "SSH_AUTH_SOCK" in the file gives "" (the default).
	IdentityAgent string
	// ProxyJump lists the jump hosts in the order they are crossed (the first
	// is dialled directly), each one resolved through the same configuration
	// with the user and port its ProxyJump entry gives. As with OpenSSH, the
	// first hop's own ProxyJump chain comes before it; the later hops are
	// reached through the earlier ones, so their own ProxyJump and ProxyCommand
	// do not apply. The hops' own ProxyJump fields are empty. Empty when direct.
	ProxyJump []Settings
	// ProxyCommand is kept so gssh can say it is unsupported, tokens (%h %p
	// %r %n %k) expanded; "" when unset or "none".
	ProxyCommand string
	// HostKeyAlias replaces HostName for known_hosts look-ups when set; lower case.
	HostKeyAlias string
	// UserKnownHostsFiles and GlobalKnownHostsFiles, ~ expanded (and tokens
	// in UserKnownHostsFiles, as OpenSSH), OpenSSH's defaults when unset
	// (~/.ssh/known_hosts ~/.ssh/known_hosts2; /etc/ssh/ssh_known_hosts
	// /etc/ssh/ssh_known_hosts2), empty for "none".
	UserKnownHostsFiles   []string
	GlobalKnownHostsFiles []string
	// StrictHostKeyChecking is "yes", "accept-new", "no" or "ask" (OpenSSH's
	// default; gssh, having no prompt, treats "ask" as "yes").
	StrictHostKeyChecking string
	// ConnectTimeout is 0 when unset ("none").
	ConnectTimeout time.Duration
	// ServerAliveInterval is 0 when unset (no keepalives); ServerAliveCountMax defaults to 3.
	ServerAliveInterval time.Duration
	ServerAliveCountMax int
}

// Overrides are values that win over the configuration files, as `ssh -p`,
// `ssh -l`, `ssh -i` and `ssh -o HostName=` do. Zero values mean "not set".
type Overrides struct {
	HostName     string
	Port         int
	User         string
	IdentityFile string // put first, before configured identities
	// KnownHostsFile replaces UserKnownHostsFile (one file; ~ expanded).
	KnownHostsFile string
}

// Warning is something in a configuration file that gssh could not use. The
// rest of the file is still used.
type Warning struct {
	File string
	Line int
	Msg  string
}

// String formats w as "FILE:LINE: MSG" ("FILE: MSG" without a line).
func (w Warning) String() string {
	if w.Line > 0 {
		return w.File + ":" + strconv.Itoa(w.Line) + ": " + w.Msg
	}
	return w.File + ": " + w.Msg
}
