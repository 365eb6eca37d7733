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

// setProcessGroup makes cmd lead a new process group, so that killing the
// group also kills the children sshd forks (privilege separation).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills the process group that p leads.
func killProcessGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// killMarked kills every process whose initial environment holds the entry
// marker ("NAME=value"), read from /proc (so Linux only), repeating while
// it finds some: a dying shell may still fork.
func killMarked(marker string) {
	want := []byte("\x00" + marker + "\x00")
	for range 50 {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		found := false
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err == nil && bytes.Contains(append([]byte{0}, env...), want) {
				found = syscall.Kill(pid, syscall.SIGKILL) == nil || found
			}
		}
		if !found {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
