package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/syntax"
)

// docCommand is one gssh command line shown in the docs: the file and
// line it starts on, and its words after "gssh" (an expansion, such as
// $ID or $(gssh submit ...), is placeholderWord).
type docCommand struct {
	file string
	line int
	args []string
}

func (c docCommand) String() string {
	return fmt.Sprintf("%s:%d: gssh %s", c.file, c.line, strings.Join(c.args, " "))
}

// placeholderWord stands for a word the shell would expand.
const placeholderWord = "\x00expansion"

// docFiles is README.md and every docs/**/*.md, relative to the module root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// codeBlock is one fenced block of a markdown file: its info string
// ("sh", "console", "" ...), its first line's number and its text.
type codeBlock struct {
	lang string
	line int
	text string
}

// codeBlocks returns the fenced blocks (``` or ~~~) of a markdown text,
// indented ones (in a list item) included.
func codeBlocks(text string) []codeBlock {
	var blocks []codeBlock
	var cur *codeBlock
	var fence, indent string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trimmed := strings.TrimLeft(l, " ")
		if cur == nil {
			if f := trimmed[:min(3, len(trimmed))]; f == "```" || f == "~~~" {
				fence, indent = f, l[:len(l)-len(trimmed)]
				cur = &codeBlock{lang: strings.TrimSpace(strings.TrimLeft(trimmed, "`~")), line: n + 1}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.text += strings.TrimPrefix(l, indent) + "\n"
	}
	return blocks
}

// shellLangs are the blocks read as shell; a block without a language
// is read as shell when it parses (otherwise it is output).
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "": true}

// cronLine is a crontab entry's five time fields.
var cronLine = regexp.MustCompile(`^\s*(?:[*0-9/,-]+\s+){5}`)

// shellText turns a block into shell text: console blocks (and blocks
// without a language that hold "$ " lines) keep only their "$ " lines, crontab entries lose their time fields, and an ini
// block keeps the commands of its Exec*= lines.
func shellText(b codeBlock) (string, bool) {
	if b.lang == "ini" {
		var out []string
		for l := range strings.Lines(b.text) {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.HasPrefix(k, "Exec") {
				out = append(out, strings.TrimLeft(v, "-+!@:"))
			} else {
				out = append(out, "")
			}
		}
		return strings.Join(out, "\n"), true
	}
	if !shellLangs[b.lang] {
		return "", false
	}
	// A transcript: its "$ " lines are the commands, the rest output.
	console := b.lang == "console" || b.lang == "" && (strings.HasPrefix(b.text, "$ ") || strings.Contains(b.text, "\n$ "))
	var out []string
	cont := false
	for l := range strings.Lines(b.text) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case strings.HasPrefix(l, "$ "), strings.HasPrefix(l, "# ") && console:
			l = l[2:]
		case console && !cont:
			l = "" // output
		}
		cont = strings.HasSuffix(l, "\\")
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			l = cronLine.ReplaceAllString(l, "")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), true
}

// wrappers run the command they are given: `sudo -u gssh gssh schedule`.
var wrappers = map[string]bool{"sudo": true, "env": true, "time": true, "timeout": true, "watch": true,
	"nohup": true, "xargs": true, "exec": true, "command": true, "runuser": true, "nice": true}

// isGssh reports whether a command word names gssh (gssh, bin/gssh,
// /opt/gssh/bin/gssh).
func isGssh(w string) bool { return w == "gssh" || strings.HasSuffix(w, "/gssh") }

// isShortOption reports whether w is an option such as -u, whose value
// follows it.
func isShortOption(w string) bool { return len(w) == 2 && w[0] == '-' && w != "--" }

// gsshCommands returns every gssh command of a shell text, with the line
// of each counted from line.
func gsshCommands(file string, line int, src string) ([]docCommand, error) {
	f, err := syntax.NewParser(syntax.KeepComments(false)).Parse(strings.NewReader(src), file)
	if err != nil {
		return nil, err
	}
	var cmds []docCommand
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = wordText(w)
		}
		for i, w := range words {
			if isGssh(w) && (i == 0 || !isShortOption(words[i-1])) { // sudo -u gssh gssh ...
				cmds = append(cmds, docCommand{file: file, line: line + int(call.Args[i].Pos().Line()) - 1, args: words[i+1:]})
				break
			}
			if i == 0 && !wrappers[w] {
				break
			}
		}
		return true
	})
	return cmds, nil
}

// wordText is a shell word as the shell would pass it, each expansion
// in it replaced by placeholderWord.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(p.Value)
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			default:
				b.WriteString(placeholderWord)
			}
		}
	}
	parts(w.Parts)
	s := b.String()
	if strings.Contains(s, placeholderWord) {
		return placeholderWord
	}
	return s
}

// placeholder matches the docs' stand-ins for a value: ID, HOST, N,
// FILE.json, ID... .
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\.[a-z]+)?(\.\.\.)?$`)

// sampleValue is a value a flag of type typ parses, for a placeholder.
func sampleValue(typ string) string {
	switch typ {
	case "duration":
		return "1s"
	case "bool":
		return "true"
	}
	return "1"
}

// checkDocCommand finds the command args name in the real command tree
// and parses its flags, running nothing: an unknown command, an unknown
// flag, a flag's value of the wrong type, or arguments the command does
// not take are errors.
func checkDocCommand(args []string) error {
	root := testApp().newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return fmt.Errorf("unknown command %q", rest[0])
	}
	rest = fillPlaceholders(cmd, rest)
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if h, _ := cmd.Flags().GetBool("help"); h {
		return nil
	}
	if cmd.Runnable() {
		return cmd.ValidateArgs(cmd.Flags().Args())
	}
	return nil
}

// fillPlaceholders gives each flag whose value is a placeholder (ID, N,
// $x) a value of the flag's type, and each positional placeholder "1".
func fillPlaceholders(cmd *cobra.Command, args []string) []string {
	fs := cmd.Flags()
	fs.AddFlagSet(cmd.InheritedFlags())
	out := slices.Clone(args)
	lookup := func(a string) *pflag.Flag {
		if strings.HasPrefix(a, "--") {
			return fs.Lookup(a[2:])
		}
		if len(a) == 2 && a[0] == '-' {
			return fs.ShorthandLookup(a[1:])
		}
		return nil
	}
	isPlaceholder := func(s string) bool { return s == placeholderWord || placeholder.MatchString(s) }
	for i, a := range out {
		if a == "--" {
			break
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") && isPlaceholder(v) {
			if f := lookup(k); f != nil {
				out[i] = k + "=" + sampleValue(f.Value.Type())
			}
			continue
		}
		if i+1 < len(out) && isPlaceholder(out[i+1]) {
			if f := lookup(a); f != nil && f.NoOptDefVal == "" {
				out[i+1] = sampleValue(f.Value.Type())
			}
		}
		if a == placeholderWord {
			out[i] = "1"
		}
	}
	return out
}

// Every gssh command the README and docs/ show exists, and its flags
// parse with the current flags.
func TestDocsCommandsParse(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, path := range docFiles(t, root) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, b := range codeBlocks(string(text)) {
			src, ok := shellText(b)
			if !ok {
				continue
			}
			cmds, err := gsshCommands(rel, b.line, src)
			if err != nil {
				if b.lang != "" {
					t.Errorf("%s:%d: a %q block that is not shell: %v", rel, b.line, b.lang, err)
				}
				continue // output, not commands
			}
			for _, c := range cmds {
				seen++
				if err := checkDocCommand(c.args); err != nil {
					t.Errorf("%s\n\t%v", c, err)
				}
			}
		}
	}
	if seen < 50 {
		t.Errorf("found %d gssh commands in the docs: the extraction is broken", seen)
	}
	t.Logf("%d gssh commands checked", seen)
}

// The checker fails on what it is for: an unknown command, an unknown
// flag, a value of the wrong type, a missing argument; and it reads
// pipes, prompts, continuations, substitutions and env assignments.
func TestDocsCommandChecker(t *testing.T) {
	bad := map[string]string{
		"gssh frobnicate":                  "unknown command",
		"gssh ps --frob":                   "unknown flag",
		"gssh submit --gpus two -- x":      "invalid argument",
		"gssh state frob":                  "unknown command",
		"gssh show":                        "",
		"gssh logs 1 --tail":               "needs an argument",
		"X=1 gssh cancel --yes --nope 1":   "unknown flag",
		"gssh ps | awk 1 && gssh gpus -Q":  "unknown shorthand",
		"echo $(gssh submit --nah -- x)":   "unknown flag",
		"sudo -u gssh gssh schedule --bad": "unknown flag",
	}
	for line, want := range bad {
		cmds, err := gsshCommands("t", 1, line)
		if err != nil || len(cmds) == 0 {
			t.Fatalf("%q: %v, %v", line, cmds, err)
		}
		var errs []string
		for _, c := range cmds {
			if err := checkDocCommand(c.args); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, "; "), want) {
			t.Errorf("%q: %q, want an error with %q", line, errs, want)
		}
	}
	good := "$ X=1 gssh submit --gpus N --mem 8G --timeout D \\\n  --after $(gssh submit --json -- a | jq .id) -- python t.py --gpus 3\n" +
		"output line\n$ gssh logs -f ID | tail -n 3; gssh show ID\n"
	src, _ := shellText(codeBlock{lang: "console", text: good})
	cmds, err := gsshCommands("t", 1, src)
	if err != nil || len(cmds) != 4 {
		t.Fatalf("%v, %v", cmds, err)
	}
	for _, c := range cmds {
		if err := checkDocCommand(c.args); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	cron, _ := shellText(codeBlock{lang: "sh", text: "*/5 * * * * /opt/gssh/bin/gssh schedule --nope\n"})
	if cmds, _ := gsshCommands("t", 1, cron); len(cmds) != 1 || checkDocCommand(cmds[0].args) == nil {
		t.Errorf("crontab line: %v", cmds)
	}
}

// Every relative link of the docs names a file that exists, and an
// anchor a heading of it makes.
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		text, err := os.ReadFile(path)
		if err == nil {
			fenced := false
			for l := range strings.Lines(string(text)) {
				if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
					fenced = !fenced
				}
				if !fenced && strings.HasPrefix(l, "#") {
					a[slug(strings.TrimLeft(l, "# "))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, path := range docFiles(t, root) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for n, l := range strings.Split(string(text), "\n") {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link to %s: %v", rel, n+1, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !headings(dest)[anchor] {
					t.Errorf("%s:%d: link to %s: no heading makes #%s", rel, n+1, target, anchor)
				}
			}
		}
	}
}

// slug is the anchor GitHub makes of a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
