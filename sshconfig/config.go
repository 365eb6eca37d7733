package sshconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Env is what token expansion and defaults need. The package reads no
// environment variable and no global state: everything comes from here.
type Env struct {
	// Home is the local home directory: ~, %d, the ~/.ssh base of relative
	// Include paths and the default identity and known_hosts files. Required
	// by Resolve (OpenSSH takes it from the password database, not $HOME).
	Home string
	// LocalUser is the local login name: %u, Match localuser, and the User
	// when the configuration sets none.
	LocalUser string
	// LocalHost is the local host name for %l (as is) and %L (up to the
	// first dot), and part of %C. Optional: a value using these tokens is an
	// error when it is empty.
	LocalHost string
}

// Config is a parsed set of ssh_config files, ready to resolve hosts: the user
// file, then the system file, with their Include files read in. It is
// immutable, so it is safe for concurrent Resolve calls.
type Config struct {
	env      Env
	files    []*file // top-level files, user first
	warnings []Warning
	hasFinal bool // some Match has "final": Resolve makes a second pass
}

const (
	maxIncludeDepth = 16      // READCONF_MAX_DEPTH in OpenSSH
	maxFileSize     = 1 << 20 // bytes; larger files are skipped with a warning
)

// origin tells where a file comes from. It decides the base of relative
// Include paths, and which IdentityFile values are duplicates: OpenSSH drops
// a repeated IdentityFile only within the same origin (SSHCONF_USERCONF flag).
type origin int

const (
	fromSystem   origin = iota // system file and its includes
	fromOverride               // Overrides (ssh -i)
	fromUser                   // user file and its includes
)

type file struct {
	name  string
	from  origin
	lines []*directive
}

// Load reads userFile and then systemFile, as OpenSSH does (~/.ssh/config,
// then /etc/ssh/ssh_config), with every file they Include. Relative Include
// paths are taken under Env.Home/.ssh for the user file and under the
// directory of systemFile (/etc/ssh) for the system file. An empty path or a
// missing file is skipped. The error, which names the path, is only for a
// file that exists but cannot be read (permissions, a directory); problems
// inside files, and unreadable Include files, are Warnings instead.
func Load(env Env, userFile, systemFile string) (*Config, error) {
	c := &Config{env: env}
	l := loader{cfg: c, readFile: readConfigFile, glob: filepath.Glob}
	for _, top := range []struct {
		path string
		from origin
		base string
	}{
		{userFile, fromUser, userBase(env)},
		{systemFile, fromSystem, filepath.Dir(systemFile)},
	} {
		if top.path == "" {
			continue
		}
		data, err := readConfigFile(top.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, errTooLarge):
			c.warn(top.path, 0, err.Error())
			continue
		case err != nil:
			return nil, fmt.Errorf("load ssh config: %w", err)
		}
		l.from, l.base = top.from, top.base
		c.files = append(c.files, l.parse(top.path, data, 0, nil))
	}
	return c, nil
}

// Parse parses one configuration text as a user file (Include paths relative
// to Env.Home/.ssh, included files read from disk). name is the file name used
// in warnings and errors. The error is only for a failing reader; problems in
// the text are Warnings.
func Parse(env Env, name string, r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	return parseWith(env, name, data, readConfigFile, filepath.Glob), nil
}

// parseWith is Parse with the file system calls made replaceable (tests, fuzzing).
func parseWith(env Env, name string, data []byte, read func(string) ([]byte, error), glob func(string) ([]string, error)) *Config {
	c := &Config{env: env}
	l := loader{cfg: c, readFile: read, glob: glob, from: fromUser, base: userBase(env)}
	if len(data) > maxFileSize {
		c.warn(name, 0, errTooLarge.Error())
		return c
	}
	c.files = append(c.files, l.parse(name, data, 0, nil))
	return c
}

// userBase is the directory of relative Include paths in user files: ~/.ssh.
func userBase(env Env) string {
	if env.Home == "" {
		return ""
	}
	return filepath.Join(env.Home, ".ssh")
}

// Warnings lists, in file order, what the files hold that gssh could not use:
// Match criteria it does not evaluate, bad values, unreadable Include files.
func (c *Config) Warnings() []Warning {
	return append([]Warning(nil), c.warnings...)
}

func (c *Config) warn(name string, line int, msg string) {
	c.warnings = append(c.warnings, Warning{File: name, Line: line, Msg: msg})
}

var errTooLarge = fmt.Errorf("file larger than %d bytes: ignored", maxFileSize)

// readConfigFile reads at most maxFileSize bytes of a file.
func readConfigFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if len(data) > maxFileSize {
		return nil, errTooLarge
	}
	return data, nil
}

// loader parses one top-level file and, recursively, what it includes.
type loader struct {
	cfg      *Config
	readFile func(string) ([]byte, error)
	glob     func(string) ([]string, error)
	from     origin
	base     string // directory of relative Include paths
	// ignoreUnknown holds the IgnoreUnknown patterns read so far.
	ignoreUnknown []string
}

// parse splits data into directives. stack holds the files being included
// around this one, to stop include loops.
func (l *loader) parse(name string, data []byte, depth int, stack []string) *file {
	f := &file{name: name, from: l.from}
	stack = append(stack, name)
	for i, text := range bytes.Split(data, []byte("\n")) {
		if d := l.parseLine(name, i+1, string(text), depth, stack); d != nil {
			f.lines = append(f.lines, d)
		}
	}
	return f
}

func (l *loader) parseLine(name string, line int, text string, depth int, stack []string) *directive {
	key, rest := splitKeyword(text)
	if key == "" || key[0] == '#' {
		return nil
	}
	d := &directive{file: name, line: line, key: strings.ToLower(key), raw: rest}
	if keyName(d.key) == "" {
		// A keyword gssh does not use. OpenSSH refuses unknown ones: say so,
		// since a typo (`Prot 2222`) would otherwise pass unnoticed.
		switch {
		case d.key == "ignoreunknown":
			for _, a := range strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '"' }) {
				l.ignoreUnknown = append(l.ignoreUnknown, a)
			}
		case !openSSHKeywords[d.key] && !ignored(l.ignoreUnknown, d.key):
			l.cfg.warn(name, line, fmt.Sprintf("unknown keyword %q: OpenSSH refuses this file; gssh ignores the line (a typo? list it in IgnoreUnknown if it is meant for another client)", key))
		}
		return nil
	}
	args, err := splitArgs(rest)
	switch {
	case err != nil:
		d.err = err
	case len(args) == 0:
		d.err = errors.New("missing value")
	default:
		d.args = args
		d.err = d.parseValue()
	}
	if d.key == "match" && d.match != nil && d.match.hasFinal {
		l.cfg.hasFinal = true
	}
	if d.err != nil {
		msg := keyName(d.key) + ": " + d.err.Error()
		if d.key == "host" || d.key == "match" {
			msg += "; this block is ignored"
			d.err = nil
			d.never = true
		}
		l.cfg.warn(name, line, msg)
		return d
	}
	if d.key == "match" && d.match.unsupported != "" {
		l.cfg.warn(name, line, d.match.unsupported)
	}
	if d.key == "include" {
		l.include(d, depth, stack)
	}
	return d
}

// include reads the files an Include line names, as OpenSSH does: relative
// paths under the base directory, ~ only in user files, glob patterns in
// sorted order, missing files ignored.
func (l *loader) include(d *directive, depth int, stack []string) {
	for _, arg := range d.args {
		path := arg
		switch {
		case strings.HasPrefix(arg, "~"):
			var err error
			if l.from == fromSystem {
				err = errors.New("~ is not allowed in the system file")
			} else {
				path, err = l.cfg.env.tilde(arg)
			}
			if err != nil {
				l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: %v", arg, err))
				continue
			}
		case !filepath.IsAbs(arg):
			if l.base == "" {
				l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: relative path, but the home directory is unknown", arg))
				continue
			}
			path = filepath.Join(l.base, arg)
		}
		matches, err := l.glob(path)
		if err != nil {
			l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: %v", arg, err))
			continue
		}
		for _, m := range matches {
			switch {
			case depth+1 > maxIncludeDepth:
				l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: more than %d nested includes: not read", m, maxIncludeDepth))
				continue
			case slices.Contains(stack, m):
				l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: the file includes itself: not read again", m))
				continue
			}
			data, err := l.readFile(m)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				l.cfg.warn(d.file, d.line, fmt.Sprintf("Include %s: %v", m, err))
				continue
			}
			d.files = append(d.files, l.parse(m, data, depth+1, stack))
		}
	}
}

// splitKeyword splits a line into its keyword and the rest, as OpenSSH's
// strdelim does: the keyword ends at white space or at one '=', which may be
// surrounded by white space.
func splitKeyword(line string) (key, rest string) {
	const space = " \t\r\n\f"
	line = strings.Trim(line, space)
	end := strings.IndexAny(line, space+"=")
	if end < 0 {
		return line, ""
	}
	key, rest = line[:end], strings.TrimLeft(line[end:], space)
	if line[end] == '=' || strings.HasPrefix(rest, "=") {
		if line[end] == '=' {
			rest = line[end+1:]
		} else {
			rest = rest[1:]
		}
		rest = strings.TrimLeft(rest, space)
	}
	return key, rest
}

// splitArgs splits the rest of a line into words as OpenSSH's argv_split does:
// words are separated by spaces or tabs; double and single quotes quote; a backslash
// escapes a quote, a backslash, or (outside quotes) a space, and is kept
// before anything else; a '#' that starts a word starts a comment.
func splitArgs(s string) ([]string, error) {
	var args []string
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		if s[i] == '#' {
			break
		}
		var w strings.Builder
		var quote byte
	word:
		for ; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"' || s[i+1] == '\\' || (quote == 0 && s[i+1] == ' ')):
				i++
				w.WriteByte(s[i])
			case quote == 0 && (c == ' ' || c == '\t'):
				break word
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
			case quote != 0 && c == quote:
				quote = 0
			default:
				w.WriteByte(c)
			}
		}
		if quote != 0 {
			return nil, errors.New("unbalanced quotes")
		}
		args = append(args, w.String())
	}
	return args, nil
}
