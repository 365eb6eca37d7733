package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// throughServeCmd is the testscript command `through-serve`: in
// TestScriptsServed's run (served) it starts gssh serve for the script's
// state and inventory as its environment has them now, and has every
// command after it go through that gssh serve alone (GSSH_SERVER: a
// command it does not answer fails, exit 3); in TestScripts' run it does
// nothing. Its passes are the ones commands ask for (an interval of an
// hour), as the direct run has them. At the script's end gssh serve is
// stopped (SIGTERM), and what it said on stderr must be no panic.
func throughServeCmd(via int) func(*testscript.TestScript, bool, []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) > 0 {
			ts.Fatalf("usage: through-serve")
		}
		if via == serveNone {
			return
		}
		path, err := lookPath("gssh", ts.Getenv("PATH"))
		ts.Check(err)
		serveArgs := []string{"serve", "--interval", "1h"}
		if via == serveHTTP {
			serveArgs = append(serveArgs, "--listen", "127.0.0.1:0")
		}
		c := exec.Command(path, serveArgs...)
		c.Dir = ts.MkAbs(".")
		c.Env = scriptEnv(ts)
		var stderr lockedBuffer // read while gssh serve writes it
		c.Stdout, c.Stderr = &stderr, &stderr
		ts.Check(c.Start())
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		state := ts.Getenv("GSSH_STATE")
		if state == "" {
			state = filepath.Join(ts.Getenv("HOME"), ".local", "state", "gssh", "state.db")
		}
		sock := state + ".sock"
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			select {
			case err := <-done:
				ts.Fatalf("gssh serve ended before it listened (%v):\n%s", err, stderr.String())
			default:
			}
			if time.Since(start) > 30*time.Second {
				c.Process.Kill()
				ts.Fatalf("gssh serve did not listen on %s within 30s:\n%s", sock, stderr.String())
			}
		}
		ts.Setenv("GSSH_SERVER", sock)
		if via == serveHTTP {
			var url string
			for start := time.Now(); url == ""; time.Sleep(20 * time.Millisecond) {
				if m := regexp.MustCompile(`HTTP API on (http://\S+) `).FindStringSubmatch(stderr.String()); m != nil {
					url = m[1]
				} else if time.Since(start) > 30*time.Second {
					ts.Fatalf("gssh serve --listen said no address within 30s:\n%s", stderr.String())
				}
			}
			tc := exec.Command(path, "token", "create", "--name", "script") // through the socket
			tc.Dir, tc.Env = c.Dir, append(scriptEnv(ts), "GSSH_SERVER="+sock)
			tok, err := tc.Output()
			if err != nil {
				ts.Fatalf("gssh token create: %v", err)
			}
			ts.Setenv("GSSH_SERVER", url)
			ts.Setenv("GSSH_TOKEN", strings.TrimSpace(string(tok)))
		}
		ts.Defer(func() {
			c.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				c.Process.Kill()
				<-done
			}
			if out := stderr.String(); strings.Contains(out, "panic") || strings.Contains(out, "failed answering") {
				ts.Fatalf("gssh serve said:\n%s", out)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe to write and read at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
