package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gssh/gssh/job"
)

// Stores opened with one Walks walk a file once per change: a walk that
// passed is remembered by the file's identity, and a write makes the next
// store walk again.
func TestWalksOncePerChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var w Walks
	open := func() *Bolt {
		s, err := Open(path, Options{Walks: &w})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	key := func() walkKey {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := keyOf(fi)
		return k
	}
	if _, err := open().Submit(job.Job{User: "ann", Spec: job.Spec{Argv: []string{"true"}, GPUs: 1}}); err != nil {
		t.Fatal(err)
	}
	if w.passed(key()) {
		t.Fatal("the walk before the write is taken for the file after it")
	}
	if _, err := open().Active(); err != nil {
		t.Fatal(err)
	}
	if !w.passed(key()) {
		t.Fatal("a walk that passed is not remembered")
	}
	var none *Walks // a store without Walks walks every time
	if none.passed(key()) {
		t.Fatal("nil Walks passed a file")
	}
}
