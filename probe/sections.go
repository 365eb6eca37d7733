package probe

import (
	"strconv"
	"strings"
)

// section is one command's output in SMIScript's output (see SMIScript for
// the markers that frame it).
type section struct {
	name   string
	rc     int    // exit status
	done   bool   // the rc marker was seen: rc and stdout are complete
	stderr []line // what the command wrote to stderr
	stdout []line // what it wrote to stdout, numbered from 1
}

// sections is SMIScript's output cut at its markers.
type sections struct {
	byName  map[string]*section
	outside []line   // lines in no section: before the first marker, after the end
	ended   bool     // the end marker was seen
	twice   []string // names of sections that appear more than once
}

// splitSections cuts out at SMIScript's marker lines. The script runs each
// section once and escapes command output that could pass for a marker,
// so a section named twice means output gssh cannot trust: it is recorded
// in twice, and only the first is kept.
func splitSections(out []byte) sections {
	secs := sections{byName: map[string]*section{}}
	var cur *section
	n := 0
	open := func(name string) {
		cur = &section{name: name}
		if secs.byName[name] != nil {
			secs.twice = append(secs.twice, name)
			return
		}
		secs.byName[name] = cur
	}
	for _, l := range splitLines(out) {
		name, rc, hasRC, ok := parseMarker(l.text)
		switch {
		case ok && name == "end":
			secs.ended, cur = true, nil
		case ok && !hasRC:
			open(name)
		case ok:
			if cur == nil || cur.name != name || cur.done {
				open(name)
			}
			cur.rc, cur.done, n = rc, true, 0
		case cur == nil:
			secs.outside = append(secs.outside, l)
		case cur.done:
			n++
			cur.stdout = append(cur.stdout, line{n: n, text: l.text})
		default:
			cur.stderr = append(cur.stderr, l)
		}
	}
	return secs
}

// parseMarker reads a marker line: `@@gssh section=NAME@@`,
// `@@gssh section=NAME rc=N@@` or `@@gssh end@@`.
func parseMarker(s string) (name string, rc int, hasRC, ok bool) {
	body, ok := strings.CutPrefix(s, "@@gssh ")
	if !ok {
		return "", 0, false, false
	}
	if body, ok = strings.CutSuffix(body, "@@"); !ok {
		return "", 0, false, false
	}
	if body == "end" {
		return "end", 0, false, true
	}
	f := strings.Fields(body)
	if len(f) < 1 || len(f) > 2 {
		return "", 0, false, false
	}
	if name, ok = strings.CutPrefix(f[0], "section="); !ok || name == "" {
		return "", 0, false, false
	}
	if len(f) == 1 {
		return name, 0, false, true
	}
	v, ok := strings.CutPrefix(f[1], "rc=")
	if !ok {
		return "", 0, false, false
	}
	rc, err := strconv.Atoi(v)
	if err != nil {
		return "", 0, false, false
	}
	return name, rc, true, true
}
