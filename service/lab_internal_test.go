package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gssh/gssh/testenv"

	"github.com/gssh/gssh/fleet"
)

// TestFindLabWarnsPersonalEnv: in lab mode a personal $GSSH_INVENTORY
// (no `lab:` block) is ignored with a warning, as --inventory is.
func TestFindLabWarnsPersonalEnv(t *testing.T) {
	testenv.NeedRoot(t, "the lab inventory must be root's")
	dir := t.TempDir()
	labInv := filepath.Join(dir, "lab.yaml")
	doc := "hosts:\n  - name: w1\nlab:\n  state: " + filepath.Join(dir, "lab", "state.db") + "\n  pass_user: root\n  group: root\n"
	if err := os.WriteFile(labInv, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	personal := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(personal, []byte("hosts:\n  - name: w2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warned []string
	opt := Options{LabInventory: labInv, Fleet: fleet.Options{InventoryEnv: personal, Home: dir, Warn: func(s string) { warned = append(warned, s) }}}
	l, err := findLab(&opt)
	if err != nil || l == nil || l.file != labInv {
		t.Fatalf("findLab: %+v %v", l, err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "inventory "+personal+" ($GSSH_INVENTORY) is ignored: "+labInv+":3 has a `lab:` block") {
		t.Errorf("warnings %q", warned)
	}
}
