package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptEnvKeys are the variables of a script's environment that the
// commands started by pty and waitfor get (TZ, GSSH_TEST_CLOCK and
// libfaketime's: the script's clock, see testClock).
var scriptEnvKeys = []string{"PATH", "HOME", "TZ", "GSSH_STATE", "GSSH_INVENTORY", "GSSH_FAKE_SMI_DIR", "GSSH_CLAIMS_DIR",
	"GSSH_HELPER", "GSSH_TEST_CLOCK", "LD_PRELOAD", "FAKETIME", "FAKETIME_SHARED", "GORACE", "LD_LIBRARY_PATH", "SSH_AUTH_SOCK", "XDG_STATE_HOME", "GSSH_SERVER", "GSSH_TOKEN", testInventoryEnv}

// scriptEnv is the environment of the script's commands: scriptEnvKeys
// as the script has them now.
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range scriptEnvKeys {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// waitforCmd is the testscript command `waitfor [-t DURATION] WHAT
// ARGS...`: it checks every 50 ms until WHAT holds, and fails the script,
// saying what it saw last, when DURATION (30s unless given) passes
// first. It is what a script does instead of sleeping "long enough":
//
//	exit ID...          each job's exit file is written and its run.sh
//	                    (the pid in its pid file) has ended, as a pass
//	                    needs to record the end (its job dir is the one
//	                    gssh show names: every test host's home is on
//	                    this machine)
//	file PATH...        each file exists
//	dead [-group] FILE  the process whose pid is FILE's first word (a
//	                    glob naming one file) runs no more, or, with
//	                    -group, no process of that process group does
//	                    (a zombie is dead: it ended)
//	log ID REGEXP       gssh logs ID prints a match of REGEXP
//	exec CMD [ARGS...]  CMD exits 0
func waitforCmd(ts *testscript.TestScript, neg bool, args []string) {
	timeout := 30 * time.Second
	if len(args) > 1 && args[0] == "-t" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		timeout, args = d, args[2:]
	}
	if neg || len(args) < 2 {
		ts.Fatalf("usage: waitfor [-t DURATION] exit|file|dead|log|exec ARGS...")
	}
	var check func() (bool, string) // holds; what was seen
	switch what, rest := args[0], args[1:]; what {
	case "exit":
		dirs := map[string]string{}
		check = func() (bool, string) {
			for _, id := range rest {
				if dirs[id] == "" {
					out, err := gsshOutput(ts, "show", id)
					if err != nil {
						return false, fmt.Sprintf("gssh show %s: %v\n%s", id, err, out)
					}
					m := regexp.MustCompile(`(?m)^job dir: +(\S+)$`).FindStringSubmatch(out)
					if m == nil {
						return false, fmt.Sprintf("job %s: no job dir yet:\n%s", id, out)
					}
					dirs[id] = m[1]
				}
				if st, err := os.Stat(filepath.Join(dirs[id], "exit")); err != nil || st.Size() == 0 {
					return false, fmt.Sprintf("job %s: no exit file in %s", id, dirs[id])
				}
				if pid, ok := runsOn(filepath.Join(dirs[id], "pid")); ok {
					return false, fmt.Sprintf("job %s: its exit file is written, its run.sh (pid %d) still runs", id, pid)
				}
			}
			return true, ""
		}
	case "file":
		check = func() (bool, string) {
			for _, p := range rest {
				if _, err := os.Stat(ts.MkAbs(p)); err != nil {
					return false, err.Error()
				}
			}
			return true, ""
		}
	case "dead":
		group := rest[0] == "-group"
		if group {
			rest = rest[1:]
		}
		if len(rest) != 1 {
			ts.Fatalf("usage: waitfor dead [-group] FILE")
		}
		files, err := filepath.Glob(ts.MkAbs(rest[0]))
		ts.Check(err)
		if len(files) != 1 {
			ts.Fatalf("waitfor dead: %s names %d files, want one", rest[0], len(files))
		}
		f := strings.Fields(ts.ReadFile(files[0]))
		if len(f) == 0 {
			ts.Fatalf("waitfor dead: %s is empty", files[0])
		}
		pid, err := strconv.Atoi(f[0])
		ts.Check(err)
		check = func() (bool, string) {
			if live := liveProcs(pid, group); len(live) > 0 {
				return false, fmt.Sprintf("still running: pids %v", live)
			}
			return true, ""
		}
	case "log":
		if len(rest) != 2 {
			ts.Fatalf("usage: waitfor log ID REGEXP")
		}
		re, err := regexp.Compile("(?m)" + rest[1])
		ts.Check(err)
		check = func() (bool, string) {
			out, err := gsshOutput(ts, "logs", rest[0])
			return err == nil && re.MatchString(out), fmt.Sprintf("gssh logs %s (%v):\n%s", rest[0], err, out)
		}
	case "exec":
		check = func() (bool, string) {
			out, err := commandOutput(ts, rest[0], rest[1:]...)
			return err == nil, fmt.Sprintf("%s: %v\n%s", strings.Join(rest, " "), err, out)
		}
	default:
		ts.Fatalf("waitfor: unknown condition %q: give exit, file, dead, log or exec", what)
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor %s: not so after %s; last seen: %s", strings.Join(args, " "), timeout, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gsshOutput runs the script's gssh with args and returns its stdout and
// stderr together.
func gsshOutput(ts *testscript.TestScript, args ...string) (string, error) {
	return commandOutput(ts, "gssh", args...)
}

// commandOutput runs name (looked up in the script's PATH) in the
// script's directory and environment, and returns its stdout and stderr
// together.
func commandOutput(ts *testscript.TestScript, name string, args ...string) (string, error) {
	path, err := lookPath(name, ts.Getenv("PATH"))
	if err != nil {
		return "", err
	}
	c := exec.Command(path, args...)
	c.Dir = ts.MkAbs(".")
	c.Env = scriptEnv(ts)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Run()
	return out.String(), err
}

// liveProcs are the pids of the processes that run (are no zombies):
// pid alone, or every member of process group pid when group.
func liveProcs(pid int, group bool) []int {
	var live []int
	stats := []string{fmt.Sprintf("/proc/%d/stat", pid)}
	if group {
		stats, _ = filepath.Glob("/proc/[0-9]*/stat")
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest) // state, ppid, pgrp, ...
		if !ok || len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if group && f[2] != strconv.Itoa(pid) {
			continue
		}
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		live = append(live, n)
	}
	return live
}

// runsOn says whether the process a job's pid file names ("PID
// STARTTIME", launch's run.sh writes it) still runs: its /proc entry is
// there, not a zombie, with the same start time (so never a reused pid),
// as launch's alive() tells.
func runsOn(pidFile string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return pid, false
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return pid, false
	}
	return pid, fields[19] == f[1]
}
