package main

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// exitUnreached is the exit statuses a command's help lists that no test
// makes it return, each with why ("COMMAND CODE": why).
var exitUnreached = map[string]string{
	"gssh sim 130":    "a replay of the test traces ends before a signal could be sure to find it running",
	"gssh sim 143":    "as 130",
	"gssh lab init 0": "it sets up a lab as root (a group, the state directory): TestSharedLab runs it, not a script",
	"gssh lab init 3": "as 0: it refuses a lab inventory others may write, or fs.protected_hardlinks=0, as root",
}

// exitLogFor is the exit log (see exitLogEnv) of t's scripts: a file in
// a directory of its own. Once t and its subtests are done, it checks
// that every command returned only exit statuses its help lists, and,
// when every script ran and passed (some: t runs some of them only),
// that each status listed was returned by some test (or is in
// exitUnreached).
func exitLogFor(t *testing.T, some bool) string {
	path := filepath.Join(t.TempDir(), "exits.log")
	t.Cleanup(func() {
		run, skip := flag.Lookup("test.run").Value.String(), flag.Lookup("test.skip").Value.String()
		checkExits(t, path, !some && !strings.Contains(run, "/") && skip == "" && !t.Failed())
	})
	return path
}

// exitCodes is the exit statuses cmd's help lists (exits): exitJob for a
// job's status passed through.
func exitCodes(cmd *cobra.Command) []int {
	var out []int
	for _, w := range strings.Fields(cmd.Annotations[exitCodesKey]) {
		if w == exitJobWord {
			out = append(out, exitJob)
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil {
			panic(fmt.Sprintf("%s: exit code %q", cmd.CommandPath(), w))
		}
		out = append(out, n)
	}
	return out
}

// codeWord is code as the exit log writes it.
func codeWord(code int) string {
	if code == exitJob {
		return exitJobWord
	}
	return strconv.Itoa(code)
}

// readExitLog is what the exit log at path holds: for each command path,
// the exit statuses seen ("1", "job") and how often.
func readExitLog(t *testing.T, path string) map[string]map[string]int {
	seen := map[string]map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return seen
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cmd, code, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Errorf("exit log: line %q", sc.Text())
			continue
		}
		if seen[cmd] == nil {
			seen[cmd] = map[string]int{}
		}
		seen[cmd][code]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

// checkExits checks the exit log at path against each command's help
// (see exitLogFor); all: every test ran, so every listed status must
// have been seen.
func checkExits(t *testing.T, path string, all bool) {
	seen := readExitLog(t, path)
	n := 0
	for _, codes := range seen {
		for _, k := range codes {
			n += k
		}
	}
	t.Logf("exit log: %d exits of %d commands", n, len(seen))
	root := testApp().newRootCmd()
	listed := map[string][]string{} // command path: the codes its help lists
	union := map[string]bool{}
	for _, c := range allCommands(root) {
		if c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			continue // cobra's own
		}
		var words []string
		for _, code := range exitCodes(c) {
			words = append(words, codeWord(code))
			union[codeWord(code)] = true
		}
		if len(words) == 0 {
			t.Errorf("%s --help lists no exit status", c.CommandPath())
		}
		listed[c.CommandPath()] = words
	}
	var rootWords []string
	for _, code := range exitCodes(root) {
		rootWords = append(rootWords, codeWord(code))
	}
	if want := slices.Sorted(maps.Keys(union)); !slices.Equal(slices.Sorted(slices.Values(rootWords)), want) {
		t.Errorf("gssh --help lists exit statuses %v; its commands return %v", rootWords, want)
	}
	listed[root.CommandPath()] = rootWords
	for cmd, codes := range seen {
		words, ok := listed[cmd]
		if !ok {
			continue // cobra's own (gssh help, gssh completion bash)
		}
		for code, n := range codes {
			if !slices.Contains(words, code) {
				t.Errorf("%s exited %s (%d times), which its --help does not list (it lists %v)", cmd, code, n, words)
			}
		}
	}
	for key, why := range exitUnreached {
		i := strings.LastIndex(key, " ")
		cmd, code := key[:i], key[i+1:]
		switch {
		case !slices.Contains(listed[cmd], code):
			t.Errorf("exitUnreached %q (%s): %s --help lists no exit %s", key, why, cmd, code)
		case seen[cmd][code] > 0:
			t.Errorf("exitUnreached %q (%s): a test made it return %s: take it out", key, why, code)
		}
	}
	if !all {
		return
	}
	for _, cmd := range slices.Sorted(maps.Keys(listed)) {
		if cmd == root.CommandPath() {
			continue // the union of its commands', checked above
		}
		for _, code := range listed[cmd] {
			if seen[cmd][code] == 0 && exitUnreached[cmd+" "+code] == "" {
				t.Errorf("%s --help lists exit %s, which no test made it return", cmd, code)
			}
		}
	}
}
