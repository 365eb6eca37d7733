package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"
)

// ptyCmd is the testscript command `pty [-cols N] SESSION CMD [ARGS...]`:
// it runs CMD on a new pseudo-terminal (stdin, stdout and stderr) of 24
// rows and N columns (80 unless given) in the script's directory and
// environment and plays SESSION, a file of lines
//
//	expect REGEXP   wait (up to 30 s) until the output so far matches
//	send TEXT       type TEXT (Go escapes: \r, \x03 for Ctrl-C)
//
// then waits for CMD to end. Its stdout is all CMD wrote, then a line
// "exit N". It fails when an expect times out or CMD does not end within
// 60 s.
func ptyCmd(ts *testscript.TestScript, neg bool, args []string) {
	cols := 80
	if len(args) > 1 && args[0] == "-cols" {
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		cols, args = n, args[2:]
	}
	if neg || len(args) < 2 {
		ts.Fatalf("usage: pty [-cols N] SESSION CMD [ARGS...]")
	}
	session, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	path, err := lookPath(args[1], ts.Getenv("PATH"))
	ts.Check(err)
	c := exec.Command(path, args[2:]...)
	c.Dir = ts.Getenv("WORK")
	c.Env = append(scriptEnv(ts), "TERM=xterm")
	f, err := pty.StartWithSize(c, &pty.Winsize{Rows: 24, Cols: uint16(cols)})
	ts.Check(err)
	defer f.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				close(read)
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	lines := bufio.NewScanner(bytes.NewReader(session))
	for lines.Scan() {
		verb, arg, _ := strings.Cut(lines.Text(), " ")
		switch verb {
		case "expect":
			re := regexp.MustCompile(arg)
			deadline := time.Now().Add(30 * time.Second)
			for !re.MatchString(output()) {
				if time.Now().After(deadline) {
					c.Process.Kill()
					ts.Fatalf("pty: no %q in the output within 30s:\n%s", arg, output())
				}
				time.Sleep(20 * time.Millisecond)
			}
		case "send":
			text, err := strconv.Unquote(`"` + arg + `"`)
			ts.Check(err)
			_, err = f.Write([]byte(text))
			ts.Check(err)
		case "":
		default:
			ts.Fatalf("pty: unknown step %q", verb)
		}
	}
	var werr error
	select {
	case werr = <-done:
	case <-time.After(60 * time.Second):
		c.Process.Kill()
		ts.Fatalf("pty: %s did not end within 60s:\n%s", args[1], output())
	}
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	code := 0
	var xe *exec.ExitError
	if errors.As(werr, &xe) {
		code = xe.ExitCode()
	} else if werr != nil {
		ts.Fatalf("pty: %v", werr)
	}
	fmt.Fprintf(ts.Stdout(), "%s\nexit %d\n", strings.ReplaceAll(output(), "\r\n", "\n"), code)
}

// lookPath finds name in the directories of path, as the shell would.
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", name)
}
