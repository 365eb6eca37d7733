//go:build !unix

package sshtest

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(p *os.Process) { p.Kill() }

func killMarked(string) {}
