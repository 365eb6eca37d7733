package state_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// TestSharedMode: in shared-lab mode the file is made and kept 0660 in
// its setgid group directory, which is checked, never made; personal
// mode's 0600 rule does not apply.
func TestSharedMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	path := filepath.Join(dir, "state.db")
	sh := &state.Shared{Group: "labgrp", GID: os.Getgid()}
	opt := state.Options{Shared: sh}
	if _, err := state.Open(path, opt); err == nil || !strings.Contains(err.Error(), "mkdir -p "+dir+"; chgrp labgrp "+dir+"; chmod 2770 "+dir) {
		t.Fatalf("missing directory: %v", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o700, 0o770, os.ModeSetgid | 0o750, os.ModeSetgid | 0o777} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		_, err := state.Open(path, opt)
		var fe *state.FileError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "setgid and mode 2770 (as root: chgrp labgrp "+dir+"; chmod 2770 "+dir+")") {
			t.Errorf("directory mode %v: %v", mode, err)
		}
	}
	if err := os.Chmod(dir, os.ModeSetgid|0o770); err != nil {
		t.Fatal(err)
	}
	other := &state.Shared{Group: "other", GID: os.Getgid() + 4242}
	if _, err := state.Open(path, state.Options{Shared: other}); err == nil || !strings.Contains(err.Error(), "needs group other") {
		t.Errorf("directory of another group: %v", err)
	}
	s, err := state.Open(path, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.Submit(job.Job{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, path); got != 0o660 {
		t.Errorf("new shared file mode = %o, want 660", got)
	}
	if fi, err := os.Stat(path); err != nil || int(fi.Sys().(*syscall.Stat_t).Gid) != sh.GID {
		t.Errorf("shared file group: %v, %v", fi, err)
	}
	for _, m := range []os.FileMode{0o600, 0o666} {
		if err := os.Chmod(path, m); err != nil {
			t.Fatal(err)
		}
		if _, err := state.Open(path, state.Options{Shared: sh, NoCreate: true}); err != nil {
			t.Fatal(err)
		}
		if got := perm(t, path); got != 0o660 {
			t.Errorf("mode after reopening a %o shared file = %o, want 660", m, got)
		}
	}
	// Personal mode still tightens it.
	if _, err := state.Open(path, state.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, path); got != 0o600 {
		t.Errorf("personal mode: %o, want 600", got)
	}
}
