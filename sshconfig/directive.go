package sshconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// directive is one line of a file that gssh uses, its value already checked.
type directive struct {
	file  string
	line  int
	key   string     // keyword, lower case
	raw   string     // the line after the keyword (ProxyCommand, ProxyJump)
	args  []string   // the words after the keyword, quotes removed
	val   string     // the single value, normalised (yes/no words, commands)
	num   int        // Port, ServerAliveCountMax; seconds for times, -1 for "none"
	hops  []hop      // ProxyJump; nil for "none"
	match *matchLine // Match
	files []*file    // Include: the files read, in order
	never bool       // a Host or Match line that cannot be understood
	err   error      // a bad value: Resolve fails for hosts the line applies to
}

// keyName returns the usual spelling of a keyword that gssh uses, or "" for
// the keywords it ignores.
func keyName(lower string) string {
	switch lower {
	case "host":
		return "Host"
	case "match":
		return "Match"
	case "include":
		return "Include"
	case "hostname":
		return "HostName"
	case "user":
		return "User"
	case "port":
		return "Port"
	case "identityfile":
		return "IdentityFile"
	case "identitiesonly":
		return "IdentitiesOnly"
	case "identityagent":
		return "IdentityAgent"
	case "proxyjump":
		return "ProxyJump"
	case "proxycommand":
		return "ProxyCommand"
	case "hostkeyalias":
		return "HostKeyAlias"
	case "userknownhostsfile":
		return "UserKnownHostsFile"
	case "globalknownhostsfile":
		return "GlobalKnownHostsFile"
	case "stricthostkeychecking":
		return "StrictHostKeyChecking"
	case "connecttimeout":
		return "ConnectTimeout"
	case "serveraliveinterval":
		return "ServerAliveInterval"
	case "serveralivecountmax":
		return "ServerAliveCountMax"
	}
	return ""
}

// parseValue checks d.args for d.key and fills the parsed fields. The error
// says what is wrong and what to write instead.
func (d *directive) parseValue() error {
	switch d.key {
	case "host":
		for _, p := range d.args {
			if p == "" || p == "!" {
				return errors.New("empty host pattern")
			}
		}
		return nil
	case "match":
		var err error
		d.match, err = parseMatch(d.args)
		return err
	case "include":
		return nil
	case "userknownhostsfile", "globalknownhostsfile":
		for _, a := range d.args {
			if a == "" {
				return errors.New("empty file name")
			}
			if strings.EqualFold(a, "none") && len(d.args) > 1 {
				return errors.New(`"none" must appear alone`)
			}
		}
		return nil
	case "proxycommand":
		d.val = strings.TrimLeft(d.raw, " \t=")
		return nil
	case "proxyjump":
		return d.parseJump()
	}
	if len(d.args) > 1 {
		return fmt.Errorf("takes one value, not %d; quote a value that holds spaces", len(d.args))
	}
	v := d.args[0]
	var err error
	switch d.key {
	case "port":
		d.num, err = parsePort(v)
	case "serveralivecountmax":
		d.num, err = strconv.Atoi(v)
		if err != nil || d.num < 0 {
			err = fmt.Errorf("%q: use a whole number of probes, 0 or more", v)
		}
	case "connecttimeout", "serveraliveinterval":
		d.num, err = parseSeconds(v)
	case "identitiesonly":
		d.val, err = oneOf(v, "use yes or no", "yes", "yes", "true", "yes", "no", "no", "false", "no")
	case "stricthostkeychecking":
		d.val, err = oneOf(v, "use yes, no, accept-new or ask",
			"yes", "yes", "true", "yes", "no", "no", "false", "no", "off", "no", "ask", "ask", "accept-new", "accept-new")
	case "hostname", "user", "identityfile", "identityagent", "hostkeyalias":
		if v == "" {
			err = errors.New("empty value")
		}
	}
	return err
}

// oneOf maps v (case-insensitive) through pairs of word and meaning.
func oneOf(v, hint string, pairs ...string) (string, error) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.EqualFold(v, pairs[i]) {
			return pairs[i+1], nil
		}
	}
	return "", fmt.Errorf("%q: %s", v, hint)
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q: use a number from 1 to 65535", s)
	}
	return n, nil
}

// parseSeconds reads an OpenSSH time value (convtime): "none" (-1), or a
// sequence of numbers each with an optional unit s, m, h, d or w ("1m30s").
func parseSeconds(s string) (int, error) {
	if s == "none" {
		return -1, nil
	}
	bad := fmt.Errorf("%q: use seconds, a time such as 1m30s, or none", s)
	var total int64
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i > 10 {
			return 0, bad
		}
		n, _ := strconv.ParseInt(rest[:i], 10, 64)
		unit := int64(1)
		if i < len(rest) {
			switch rest[i] | 0x20 { // lower case
			case 's':
			case 'm':
				unit = 60
			case 'h':
				unit = 60 * 60
			case 'd':
				unit = 24 * 60 * 60
			case 'w':
				unit = 7 * 24 * 60 * 60
			default:
				return 0, bad
			}
			i++
		}
		total += n * unit
		if total > 1<<31-1 { // OpenSSH keeps an int
			return 0, bad
		}
		rest = rest[i:]
	}
	return int(total), nil
}

// hop is one ProxyJump element: [user@]host[:port] or ssh://[user@]host[:port].
type hop struct {
	user, host string
	port       int
}

func (h hop) String() string {
	s := h.host
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if h.user != "" {
		s = h.user + "@" + s
	}
	if h.port != 0 {
		s += ":" + strconv.Itoa(h.port)
	}
	return s
}

// parseJump reads a ProxyJump value as OpenSSH does: the raw rest of the
// line up to a '#', hops separated by commas, or "none".
func (d *directive) parseJump() error {
	s, _, _ := strings.Cut(strings.TrimLeft(d.raw, " \t="), "#")
	s = strings.TrimRight(s, " \t")
	d.val = s
	if strings.EqualFold(s, "none") {
		d.val = "none"
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		h, err := parseHop(part)
		if err != nil {
			return fmt.Errorf("%q: %v; use [user@]host[:port] hops separated by commas, or none", s, err)
		}
		d.hops = append(d.hops, h)
	}
	return nil
}

func parseHop(s string) (hop, error) {
	var h hop
	if len(s) > 6 && strings.EqualFold(s[:6], "ssh://") {
		s = s[6:]
		if strings.Contains(s, "/") {
			return h, errors.New("an ssh:// hop cannot have a path")
		}
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if i == 0 {
			return h, errors.New("empty user name")
		}
		h.user, s = s[:i], s[i+1:]
	}
	port := ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
			return h, errors.New("bad [address]")
		}
		h.host = s[1:end]
		if end+1 < len(s) {
			port = s[end+2:]
		}
	} else {
		h.host, port, _ = strings.Cut(s, ":")
	}
	if h.host == "" {
		return h, errors.New("empty host name")
	}
	if port != "" {
		var err error
		if h.port, err = parsePort(port); err != nil {
			return h, err
		}
	}
	return h, nil
}

// lineError is an error found at one line of a file.
type lineError struct {
	file string
	line int
	err  error
}

func (e *lineError) Error() string {
	if e.line == 0 {
		return e.file + ": " + e.err.Error()
	}
	return e.file + ":" + strconv.Itoa(e.line) + ": " + e.err.Error()
}

func (e *lineError) Unwrap() error { return e.err }

// fail returns err located at d, with the keyword named.
func (d *directive) fail(err error) error {
	return &lineError{file: d.file, line: d.line, err: fmt.Errorf("%s: %w", keyName(d.key), err)}
}
