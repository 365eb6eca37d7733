//go:build unix

package sshtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// setProcessGroup makes cmd lead a new process group, holding the children
// sshd forks for privilege separation.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killAll kills the process groups led by leaders, all their descendants,
// and every process whose environment holds the entry marker ("NAME=value").
//
// The groups are stopped first, so that the process tree read from /proc is
// complete: a session child of sshd leaves the group (setsid) before it
// execs, and until it execs it carries sshd's environment, not the marker.
// Descendants and markers are found on Linux only; elsewhere just the groups
// die.
func killAll(leaders []int, marker string) {
	for _, pid := range leaders {
		syscall.Kill(-pid, syscall.SIGSTOP) // no member can fork after this
	}
	doomed := descendants(leaders)
	for _, pid := range leaders {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, pid := range doomed {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	// Detached processes (setsid -f) were reparented: find them by marker,
	// again while some are found, as a dying shell may still fork.
	want := []byte("\x00" + marker + "\x00")
	for range 50 {
		found := false
		for _, p := range readProcs() {
			if bytes.Contains(append([]byte{0}, p.env...), want) {
				found = syscall.Kill(p.pid, syscall.SIGKILL) == nil || found
			}
		}
		if !found {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// descendants returns the pids of all live descendants of roots.
func descendants(roots []int) []int {
	children := map[int][]int{}
	for _, p := range readProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		kids := children[queue[0]]
		queue = append(queue[1:], kids...)
		out = append(out, kids...)
	}
	return out
}

// proc is a process read from /proc. env is empty for zombies.
type proc struct {
	pid, ppid int
	env       []byte // NUL-separated NAME=value entries
}

// readProcs lists the processes in /proc (none where there is no /proc).
func readProcs() []proc {
	ents, _ := os.ReadDir("/proc")
	var ps []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		stat, err := os.ReadFile(filepath.Join(dir, "stat")) // pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		ps = append(ps, proc{pid, ppid, env})
	}
	return ps
}
