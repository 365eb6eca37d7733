//go:build !unix

package sshtest

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

// killAll kills the leaders only: there are no process groups here.
func killAll(leaders []int, _ string) {
	for _, pid := range leaders {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}
