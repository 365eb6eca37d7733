package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gssh/gssh/testenv"

	"github.com/gssh/gssh/service"
)

// TestTrustedLabFile: a `lab:` block counts only from a file root owns
// and no one else can write, in directories likewise (or sticky, as
// /tmp), wherever a link to it lies.
func TestTrustedLabFile(t *testing.T) {
	testenv.NeedRoot(t, "the lab inventory's checks need root's files")
	dir := filepath.Join(t.TempDir(), "etc")
	os.Mkdir(dir, 0o755)
	file := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(file, []byte("hosts: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := service.TrustedLabFile(file); err != nil || got != file {
		t.Fatalf("root's file: %q %v", got, err)
	}
	link := filepath.Join(t.TempDir(), "link.yaml")
	os.Symlink(file, link)
	if got, err := service.TrustedLabFile(link); err != nil || got != file {
		t.Errorf("a link to root's file: %q %v", got, err)
	}
	refused := func(what, sub string) {
		t.Helper()
		_, err := service.TrustedLabFile(file)
		if !errors.Is(err, service.ErrUntrustedLab) || !strings.Contains(err.Error(), sub) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("%s: %v", what, err)
		}
	}
	os.Chmod(file, 0o664)
	refused("group-writable", "the file "+file+" has mode 0664: others than root may write it")
	os.Chmod(file, 0o644)
	os.Chown(file, 4243, 4243)
	refused("another owner", "the file "+file+" is owned by 4243, not root")
	os.Chown(file, 0, 0)
	os.Chmod(dir, 0o777)
	refused("a directory others write", "its directory "+dir+" has mode 0777: others than root may write it")
	os.Chmod(dir, os.ModeSticky|0o777)
	if _, err := service.TrustedLabFile(file); err != nil {
		t.Errorf("a sticky directory: %v", err)
	}
}
