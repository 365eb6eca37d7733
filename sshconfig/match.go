package sshconfig

import (
	"errors"
	"fmt"
	"strings"
)

// matchLine is a parsed Match line.
type matchLine struct {
	crit     []criterion
	hasFinal bool
	// unsupported says why gssh never applies the block (Match exec, a
	// criterion it does not evaluate); "" when it evaluates every criterion.
	unsupported string
}

type criterion struct {
	negate bool
	kind   string // all, canonical, final, host, originalhost, user, localuser
	arg    string // comma-separated pattern list
}

// parseMatch reads the criteria of a Match line with the rules of OpenSSH's
// match_cfg_line: "all" stands alone (after at most one other criterion) and
// last, "canonical" and "final" take no argument, the others take one.
func parseMatch(args []string) (*matchLine, error) {
	m := &matchLine{}
	for i, n := 0, 0; i < len(args); i, n = i+1, n+1 {
		name := args[i]
		c := criterion{negate: strings.HasPrefix(name, "!")}
		c.kind = strings.ToLower(strings.TrimPrefix(name, "!"))
		switch c.kind {
		case "all":
			if n > 1 || i+1 < len(args) {
				return nil, errors.New(`"all" cannot be combined with other criteria`)
			}
			m.crit = append(m.crit, c)
			return m, nil
		case "canonical", "final":
			m.hasFinal = m.hasFinal || c.kind == "final"
			m.crit = append(m.crit, c)
			continue
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("%q needs an argument", name)
		}
		i++
		c.arg = args[i]
		switch c.kind {
		case "host", "originalhost", "user", "localuser":
			m.crit = append(m.crit, c)
		case "exec":
			m.unsupported = "Match exec: gssh does not run commands, so this block never applies"
		default:
			m.unsupported = fmt.Sprintf("Match %s: not supported by gssh, so this block never applies", name)
		}
	}
	return m, nil
}

// matches evaluates m for the host being resolved.
func (e *eval) matches(m *matchLine) (bool, error) {
	if m.unsupported != "" {
		return false, nil
	}
	ok := true
	for _, c := range m.crit {
		var r bool
		switch c.kind {
		case "all":
			r = true
		case "canonical", "final":
			r = e.final
		case "host":
			host, err := e.hostName()
			if err != nil {
				return false, err
			}
			r = matchHostname(host, c.arg)
		case "originalhost":
			r = matchHostname(e.alias, c.arg)
		case "user":
			r = matchList(e.user(), c.arg, false) == 1
		case "localuser":
			r = matchList(e.c.env.LocalUser, c.arg, false) == 1
		}
		if r == c.negate {
			ok = false
		}
	}
	return ok, nil
}

// hostMatches applies the patterns of a Host line to host: one matching
// pattern is enough, but a matching negated pattern excludes the host.
// Patterns are compared case-sensitively, as OpenSSH does.
func hostMatches(patterns []string, host string) bool {
	ok := false
	for _, p := range patterns {
		if neg, found := strings.CutPrefix(p, "!"); found {
			if matchPattern(host, neg) {
				return false
			}
		} else if matchPattern(host, p) {
			ok = true
		}
	}
	return ok
}

// matchHostname is OpenSSH's match_hostname: case-insensitive matchList.
func matchHostname(host, list string) bool {
	return matchList(strings.ToLower(host), list, true) == 1
}

// matchList matches s against a comma-separated list of patterns, each may be
// negated with '!'. It returns 1 for a match, -1 when a negated pattern
// matches, and 0 otherwise (OpenSSH's match_pattern_list).
func matchList(s, list string, lower bool) int {
	got := 0
	for _, p := range strings.Split(list, ",") {
		p, neg := strings.CutPrefix(p, "!")
		if lower {
			p = strings.ToLower(p)
		}
		if matchPattern(s, p) {
			if neg {
				return -1
			}
			got = 1
		}
	}
	return got
}

// matchPattern reports whether s matches p, where '*' matches any run of
// bytes and '?' one byte. It backtracks only to the last '*', so it takes
// O(len(s)*len(p)) at worst.
func matchPattern(s, p string) bool {
	si, pi, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
