package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gssh/gssh/doctor"
	"github.com/gssh/gssh/service"
)

// TestDoctorNoisyLogin: a worker whose login prints a banner before
// every command (a ForceCommand, as a .bashrc's echo would) fails gssh
// doctor's shell-output check, saying what it prints and what to do.
func TestDoctorNoisyLogin(t *testing.T) {
	l := sshLabConfig(t, `ForceCommand printf 'Welcome to the cluster\n'; eval "$SSH_ORIGINAL_COMMAND"`)
	doc, err := l.svc.Doctor(context.Background(), service.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var shell *doctor.Check
	for i, c := range doc.Checks {
		if c.Name == "shell output" {
			shell = &doc.Checks[i]
		}
	}
	if shell == nil || shell.Verdict != doctor.Fail || !strings.Contains(shell.Detail, `"Welcome to the cluster\n"`) || !strings.Contains(shell.Fix, "[ -t 1 ]") {
		t.Errorf("the shell-output check of a noisy login: %+v (all: %+v)", shell, doc.Checks)
	}
	if doc.Failed == 0 {
		t.Error("no check failed")
	}
}

// TestDoctorQuietLogin: the same worker without the banner passes it.
func TestDoctorQuietLogin(t *testing.T) {
	l := sshLab(t)
	doc, err := l.svc.Doctor(context.Background(), service.HostQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Checks {
		if c.Verdict == doctor.Fail {
			t.Errorf("a healthy worker's check failed: %+v", c)
		}
	}
	if len(doc.Checks) < 6 {
		t.Errorf("checks %+v", doc.Checks)
	}
}
