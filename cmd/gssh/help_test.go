package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpText is what `gssh ARGS... --help` prints.
func helpText(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	code := Main(append(args, "--help"), strings.NewReader(""), &out, &out, nil)
	if code != 0 {
		t.Fatalf("gssh %v --help: exit %d\n%s", args, code, out.String())
	}
	return out.String()
}

// allCommands is every command under root, root excluded, cobra's own
// (help, completion) too.
func allCommands(root *cobra.Command) []*cobra.Command {
	var all []*cobra.Command
	for _, c := range root.Commands() {
		all = append(all, c)
		all = append(all, allCommands(c)...)
	}
	return all
}

// gssh --help is short prose, then the commands in their groups; every
// command is in a group.
func TestRootHelp(t *testing.T) {
	out := helpText(t)
	lines := strings.Split(out, "\n")
	first := -1
	for i, l := range lines {
		if l == "Jobs:" {
			first = i
			break
		}
	}
	if first < 0 || first > 25 {
		t.Errorf("the command list starts at line %d (at most 25 lines before it):\n%s", first+1, out)
	}
	for _, g := range []string{"Jobs:", "GPUs and hosts:", "The queue:", "Operating gssh:", "docs/"} {
		if !strings.Contains(out, g) {
			t.Errorf("gssh --help lacks %q", g)
		}
	}
	if strings.Contains(out, "Additional Commands:") {
		t.Errorf("a command is in no group:\n%s", out)
	}
}

// Every command's help: a few lines, 2-4 examples, its exit statuses,
// nothing wider than 100 columns; submit's under 60 lines.
func TestCommandHelp(t *testing.T) {
	root := testApp().newRootCmd()
	for _, c := range allCommands(root) {
		if c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			continue
		}
		path := strings.Fields(c.CommandPath())[1:]
		out := helpText(t, path...)
		name := strings.Join(path, " ")
		if n := strings.Count(c.Long, "\n") + 1; n > 8 {
			t.Errorf("gssh %s: %d lines before its usage (at most 8; the rest belongs in docs/)", name, n)
		}
		examples := 0
		for l := range strings.Lines(c.Example) {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				examples++
			}
		}
		if examples < 2 || examples > 4 {
			t.Errorf("gssh %s: %d examples, want 2-4", name, examples)
		}
		src, _ := shellText(codeBlock{lang: "sh", text: c.Example})
		cmds, err := gsshCommands("gssh "+name+" --help", 1, src)
		if err != nil || len(cmds) == 0 {
			t.Errorf("gssh %s: examples that are not shell: %v", name, err)
		}
		for _, dc := range cmds {
			if err := checkDocCommand(dc.args); err != nil {
				t.Errorf("gssh %s --help: example %s: %v", name, dc, err)
			}
		}
		if c.Runnable() && !strings.Contains(out, "\nExit status:\n") {
			t.Errorf("gssh %s --help lists no exit status", name)
		}
		for i, l := range strings.Split(out, "\n") {
			if w := len([]rune(l)); w > 100 {
				t.Errorf("gssh %s --help line %d is %d columns: %s", name, i+1, w, l)
			}
		}
	}
	if n := strings.Count(helpText(t, "submit"), "\n"); n >= 60 {
		t.Errorf("gssh submit --help: %d lines, want under 60", n)
	}
}

// gssh version prints the build's version, the Go that built it and
// the OS and architecture, in words and in JSON.
func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"version"}, strings.NewReader(""), &out, &errb, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := fmt.Sprintf("gssh %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out.String() != want {
		t.Errorf("gssh version: %q, want %q", out.String(), want)
	}
	out.Reset()
	if code := Main([]string{"version", "--json"}, strings.NewReader(""), &out, &errb, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Schema != "gssh.version/v1" || v.Version != version || v.Go != runtime.Version() || v.Arch != runtime.GOARCH {
		t.Errorf("gssh version --json: %s (%v)", out.String(), err)
	}
}

// An "Exit status:" entry that holds with a flag ("with --wait: the
// job's status") is an entry of its own, at the codes' column, not
// indented under the code above it as if part of it.
func TestExitsOwnEntry(t *testing.T) {
	for _, c := range []struct{ cmd, entry string }{{"submit", "with --wait: "}, {"logs", "with -f: "}} {
		out := helpText(t, c.cmd)
		_, exits, _ := strings.Cut(out, "\nExit status:\n")
		if !strings.Contains("\n"+exits, "\n  "+c.entry) {
			t.Errorf("gssh %s --help: no entry %q of its own:\n%s", c.cmd, c.entry, exits)
		}
	}
	root := testApp().newRootCmd()
	for _, c := range allCommands(root) {
		_, exits, _ := strings.Cut(helpText(t, strings.Fields(c.CommandPath())[1:]...), "\nExit status:\n")
		for l := range strings.Lines(exits) {
			if strings.HasPrefix(strings.TrimLeft(l, " "), "with -") && strings.HasPrefix(l, "   ") {
				t.Errorf("gssh %s --help: %q reads as part of the entry above it", c.Name(), l)
			}
		}
	}
}
