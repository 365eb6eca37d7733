package sshconfig

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxJumps bounds a ProxyJump chain, counting the target.
const maxJumps = 16

// Resolve computes the Settings for alias as `ssh -G alias` does, with ov
// applied the way ssh's command-line options are (they win over the files).
// ProxyJump hops are resolved too, through the same configuration.
//
// The error, "resolve ALIAS: ...", names the file and line of a bad value
// that applies to alias or to one of its hops (Port abc, an unknown %
// token, ...), or the chain of a ProxyJump loop or of a chain longer than 16
// hosts. Lines that do not apply to alias are not an error (OpenSSH refuses
// the whole file), only Warnings.
func (c *Config) Resolve(alias string, ov Overrides) (Settings, error) {
	if alias == "" {
		return Settings{}, errors.New("resolve: empty host name")
	}
	s, err := c.resolve(alias, ov, nil)
	if err != nil {
		return Settings{}, fmt.Errorf("resolve %s: %w", alias, err)
	}
	return s, nil
}

// resolve evaluates alias and then its ProxyJump hops. OpenSSH reaches the
// last hop by running `ssh -J <the other hops> -W host:port last`, so the
// first hop is the only one whose own configuration chooses how it is
// reached: its own ProxyJump chain goes first, and the later hops' own
// ProxyJump and ProxyCommand are overridden. path lists the hosts whose
// chains are being resolved, outermost first, to stop loops.
func (c *Config) resolve(alias string, ov Overrides, path []string) (Settings, error) {
	s, hops, err := c.evaluate(alias, ov)
	if err != nil || len(hops) == 0 {
		return s, err
	}
	path = append(path[:len(path):len(path)], alias)
	if len(hops) >= maxJumps {
		chain := make([]string, 0, len(hops)+1)
		for _, h := range hops {
			chain = append(chain, h.host)
		}
		return Settings{}, &chainError{append(chain, alias)}
	}
	for i, h := range hops {
		var hs Settings
		hov := Overrides{User: h.user, Port: h.port}
		if i == 0 {
			if slices.Contains(path, h.host) || len(path) >= maxJumps {
				// Crossing order: this hop, then the hosts of path inwards out.
				chain := []string{h.host}
				for j := len(path) - 1; j >= 0; j-- {
					chain = append(chain, path[j])
				}
				return Settings{}, &chainError{chain}
			}
			hs, err = c.resolve(h.host, hov, path)
			s.ProxyJump = append(s.ProxyJump, hs.ProxyJump...)
			hs.ProxyJump = nil
		} else {
			hs, _, err = c.evaluate(h.host, hov)
			hs.ProxyCommand = ""
		}
		var ce *chainError
		if errors.As(err, &ce) {
			return Settings{}, err // it names the whole chain already
		}
		if err != nil {
			return Settings{}, fmt.Errorf("jump host %s: %w", h, err)
		}
		s.ProxyJump = append(s.ProxyJump, hs)
	}
	chain := make([]string, 0, len(s.ProxyJump)+1)
	for _, hs := range s.ProxyJump {
		chain = append(chain, hs.Alias)
	}
	chain = append(chain, alias)
	for i, a := range chain {
		if slices.Contains(chain[:i], a) || i >= maxJumps {
			return Settings{}, &chainError{chain}
		}
	}
	return s, nil
}

// chainError is a ProxyJump chain that loops or is too long; chain lists
// the hosts in crossing order, the target last.
type chainError struct{ chain []string }

func (e *chainError) Error() string {
	if len(e.chain) > maxJumps {
		return fmt.Sprintf("proxyjump chain longer than %d hosts: %s", maxJumps, strings.Join(e.chain, " -> "))
	}
	return fmt.Sprintf("proxyjump loop: %s; a host cannot be reached through itself", strings.Join(e.chain, " -> "))
}

// eval is the state of one host's evaluation: OpenSSH's Options while it
// reads the files. Every single-valued key keeps the first value obtained.
type eval struct {
	c         *Config
	alias     string // the name asked for (%n, Match originalhost)
	host      string // what Host patterns match: alias, then the final host name
	final     bool   // second pass, for Match final / canonical
	finalHost string
	one       map[string]*directive // first obtained value per key
	ids       []*directive          // IdentityFile values in order, without duplicates
	idFrom    []origin
}

// evaluate reads the configuration for one host, without following ProxyJump.
func (c *Config) evaluate(alias string, ov Overrides) (Settings, []hop, error) {
	e := &eval{c: c, alias: alias, host: alias, one: map[string]*directive{}}
	if err := e.override(ov); err != nil {
		return Settings{}, nil, err
	}
	if err := e.pass(); err != nil {
		return Settings{}, nil, err
	}
	if c.hasFinal {
		// As OpenSSH: a second pass over all files, where Match final and
		// canonical hold and Host patterns see the host name found so far.
		host, err := e.hostName()
		if err != nil {
			return Settings{}, nil, err
		}
		e.final, e.host, e.finalHost = true, host, host
		if err := e.pass(); err != nil {
			return Settings{}, nil, err
		}
	}
	return e.settings()
}

// override takes ov as values obtained before the files are read.
func (e *eval) override(ov Overrides) error {
	set := func(key, v string) *directive {
		d := &directive{file: "overrides", key: key, args: []string{v}}
		e.one[key] = d
		return d
	}
	if ov.HostName != "" {
		set("hostname", ov.HostName)
	}
	if ov.User != "" {
		set("user", ov.User)
	}
	if ov.Port != 0 {
		d := set("port", strconv.Itoa(ov.Port))
		if ov.Port < 0 || ov.Port > 65535 {
			return d.fail(fmt.Errorf("bad port %d: use a number from 1 to 65535", ov.Port))
		}
		d.num = ov.Port
	}
	if ov.KnownHostsFile != "" {
		set("userknownhostsfile", ov.KnownHostsFile)
	}
	if ov.IdentityFile != "" {
		e.addIdentity(&directive{file: "overrides", key: "identityfile", args: []string{ov.IdentityFile}}, fromOverride)
	}
	return nil
}

func (e *eval) pass() error {
	for _, f := range e.c.files {
		if err := e.walk(f.lines, true, false, f.from); err != nil {
			return err
		}
	}
	return nil
}

// walk applies the lines of one file. active is whether the lines apply; an
// Include shares it with the included file and gets it back afterwards, and
// never marks files included from a block that does not apply (their Host and
// Match blocks never apply either), as in OpenSSH.
func (e *eval) walk(lines []*directive, active, never bool, from origin) error {
	for _, d := range lines {
		var err error
		switch d.key {
		case "host":
			active = !never && !d.never && hostMatches(d.args, e.host)
		case "match":
			active = false
			if !never && !d.never {
				active, err = e.matches(d.match)
			}
		case "include":
			for _, f := range d.files {
				if err = e.walk(f.lines, active, never || !active, from); err != nil {
					break
				}
			}
		default:
			if active {
				err = e.apply(d, from)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// apply takes the value of d unless one was obtained already.
func (e *eval) apply(d *directive, from origin) error {
	if d.err != nil {
		return d.fail(d.err)
	}
	switch d.key {
	case "identityfile":
		e.addIdentity(d, from)
		return nil
	case "connecttimeout", "serveraliveinterval":
		if d.num < 0 {
			return nil // "none" leaves the key unset: a later value still counts
		}
	case "proxyjump":
		// ProxyJump and ProxyCommand: the first one obtained wins.
		if e.one["proxyjump"] != nil || e.one["proxycommand"] != nil {
			return nil
		}
		if d.hops != nil {
			e.one["proxycommand"] = &directive{key: "proxycommand", val: "none"}
		}
	}
	if e.one[d.key] == nil {
		e.one[d.key] = d
	}
	return nil
}

// addIdentity appends an IdentityFile value unless the same text came from
// the same origin before.
func (e *eval) addIdentity(d *directive, from origin) {
	for i, x := range e.ids {
		if e.idFrom[i] == from && x.args[0] == d.args[0] {
			return
		}
	}
	e.ids = append(e.ids, d)
	e.idFrom = append(e.idFrom, from)
}

// hostName is the host name as it stands: HostName with %h expanded to the
// alias, or the alias, lower case (as ssh does before connecting).
func (e *eval) hostName() (string, error) {
	if e.final {
		return e.finalHost, nil
	}
	d := e.one["hostname"]
	if d == nil {
		return strings.ToLower(e.alias), nil
	}
	h, err := expand(d.args[0], map[byte]string{'h': e.alias})
	if err != nil {
		return "", d.fail(err)
	}
	return strings.ToLower(h), nil
}

// user is the remote user as it stands.
func (e *eval) user() string {
	if d := e.one["user"]; d != nil {
		return d.args[0]
	}
	return e.c.env.LocalUser
}

// settings turns the obtained values into Settings, with OpenSSH's defaults
// and with ~ and % tokens expanded where OpenSSH expands them.
func (e *eval) settings() (Settings, []hop, error) {
	env := e.c.env
	s := Settings{
		Alias:                 e.alias,
		Port:                  22,
		User:                  e.user(),
		StrictHostKeyChecking: "ask",
		ServerAliveCountMax:   3,
		UserKnownHostsFiles:   []string{"~/.ssh/known_hosts", "~/.ssh/known_hosts2"},
		GlobalKnownHostsFiles: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
	}
	var err error
	if s.HostName, err = e.hostName(); err != nil {
		return Settings{}, nil, err
	}
	if d := e.one["port"]; d != nil {
		s.Port = d.num
	}
	if d := e.one["hostkeyalias"]; d != nil {
		s.HostKeyAlias = strings.ToLower(d.args[0])
	}
	if d := e.one["stricthostkeychecking"]; d != nil {
		s.StrictHostKeyChecking = d.val
	}
	if d := e.one["identitiesonly"]; d != nil {
		s.IdentitiesOnly = d.val == "yes"
	}
	if d := e.one["connecttimeout"]; d != nil {
		s.ConnectTimeout = time.Duration(d.num) * time.Second
	}
	if d := e.one["serveraliveinterval"]; d != nil {
		s.ServerAliveInterval = time.Duration(d.num) * time.Second
	}
	if d := e.one["serveralivecountmax"]; d != nil {
		s.ServerAliveCountMax = d.num
	}

	files := e.fileTokens(s)
	path := func(d *directive, p string, tokens map[byte]string) (string, error) {
		p, err := env.tilde(p)
		if err == nil && tokens != nil {
			p, err = expand(p, tokens)
		}
		if err != nil && d != nil {
			err = d.fail(err)
		}
		return p, err
	}
	paths := func(key string, tokens map[byte]string, dflt []string) ([]string, error) {
		d := e.one[key]
		list := dflt
		if d != nil {
			list = d.args
			if strings.EqualFold(list[0], "none") {
				return nil, nil
			}
		}
		out := make([]string, len(list))
		for i, p := range list {
			var err error
			if out[i], err = path(d, p, tokens); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if s.UserKnownHostsFiles, err = paths("userknownhostsfile", files, s.UserKnownHostsFiles); err != nil {
		return Settings{}, nil, err
	}
	// OpenSSH expands only ~ in GlobalKnownHostsFile.
	if s.GlobalKnownHostsFiles, err = paths("globalknownhostsfile", nil, s.GlobalKnownHostsFiles); err != nil {
		return Settings{}, nil, err
	}

	s.IdentitiesExplicit = len(e.ids) > 0
	for _, d := range e.ids {
		p, err := path(d, d.args[0], files)
		if err != nil {
			return Settings{}, nil, err
		}
		s.IdentityFiles = append(s.IdentityFiles, p)
	}
	if !s.IdentitiesExplicit {
		for _, name := range []string{"id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"} {
			p, err := path(nil, "~/.ssh/"+name, nil)
			if err != nil {
				return Settings{}, nil, err
			}
			s.IdentityFiles = append(s.IdentityFiles, p)
		}
	}

	if d := e.one["identityagent"]; d != nil {
		// "none" and $VARIABLE are kept as they are; SSH_AUTH_SOCK means
		// the usual socket, as when unset.
		switch v := d.args[0]; {
		case v == "SSH_AUTH_SOCK":
		case v == "none" || strings.HasPrefix(v, "$"):
			s.IdentityAgent = v
		default:
			if s.IdentityAgent, err = path(d, v, files); err != nil {
				return Settings{}, nil, err
			}
		}
	}

	if d := e.one["proxycommand"]; d != nil && d.val != "none" {
		keyAlias := s.HostKeyAlias
		if keyAlias == "" {
			keyAlias = e.alias
		}
		s.ProxyCommand, err = expand(d.val, map[byte]string{
			'h': s.HostName, 'k': keyAlias, 'n': e.alias, 'p': strconv.Itoa(s.Port), 'r': s.User,
		})
		if err != nil {
			return Settings{}, nil, d.fail(err)
		}
	}
	var hops []hop
	if d := e.one["proxyjump"]; d != nil {
		hops = d.hops
	}
	return s, hops, nil
}

// fileTokens are the % tokens of file names (IdentityFile,
// UserKnownHostsFile, IdentityAgent): OpenSSH's DEFAULT_CLIENT_PERCENT_EXPAND.
func (e *eval) fileTokens(s Settings) map[byte]string {
	env := e.c.env
	port := strconv.Itoa(s.Port)
	keyAlias := s.HostKeyAlias
	if keyAlias == "" {
		keyAlias = e.alias
	}
	t := map[byte]string{
		'd': env.Home, 'h': s.HostName, 'k': keyAlias, 'n': e.alias,
		'p': port, 'r': s.User, 'u': env.LocalUser,
	}
	if env.LocalHost != "" {
		short, _, _ := strings.Cut(env.LocalHost, ".")
		sum := sha1.Sum([]byte(env.LocalHost + s.HostName + port + s.User))
		t['l'], t['L'], t['C'] = env.LocalHost, short, hex.EncodeToString(sum[:])
	}
	return t
}

// expand replaces the % tokens of s; %% is a percent sign. A token not in
// tokens is an error, as in OpenSSH.
func expand(s string, tokens map[byte]string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", fmt.Errorf("%q ends with a lone %%; write %%%% for a percent sign", s)
		case s[i] == '%':
			b.WriteByte('%')
		default:
			v, ok := tokens[s[i]]
			if !ok {
				// File names (the token set with %d) know %l, %L and %C
				// when the local host name is known.
				if _, files := tokens['d']; files && strings.IndexByte("lLC", s[i]) >= 0 {
					return "", fmt.Errorf("%q: %%%c needs the local host name, which gssh was not given", s, s[i])
				}
				return "", fmt.Errorf("%q: %%%c is not a token gssh can expand here", s, s[i])
			}
			b.WriteString(v)
		}
	}
	return b.String(), nil
}

// tilde expands a leading ~ or ~/ to the home directory (also ~LOCALUSER).
func (env Env) tilde(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "~")
	if !ok {
		return p, nil
	}
	user, tail := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		user, tail = rest[:i], rest[i:]
	}
	if user != "" && user != env.LocalUser {
		return "", fmt.Errorf("%q: ~user paths are not supported; write the full path", p)
	}
	if env.Home == "" {
		return "", errors.New("the home directory is unknown, so ~ cannot be expanded")
	}
	if tail == "" {
		return env.Home, nil
	}
	return strings.TrimRight(env.Home, "/") + tail, nil
}
