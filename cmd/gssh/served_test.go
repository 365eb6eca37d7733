package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
func throughServeCmd(served bool) func(*testscript.TestScript, bool, []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) > 0 {
			ts.Fatalf("usage: through-serve")
		}
		if !served {
			return
		}
		path, err := lookPath("gssh", ts.Getenv("PATH"))
		ts.Check(err)
		c := exec.Command(path, "serve", "--interval", "1h")
		c.Dir = ts.MkAbs(".")
		c.Env = scriptEnv(ts)
		var stderr bytes.Buffer
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
