package fleet_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/probe"
)

// TestFieldsFile: entries are per host, survive a new process (a new
// FieldsFile on the same path), expire at their ttl, can be forgotten,
// and a damaged file reads as empty. The file is the user's alone.
func TestFieldsFile(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "gssh", "smi-fields.json")
	m := fleet.NewFieldsFile(path, clock)
	if _, ok := m.Fields("oldsmi"); ok {
		t.Fatal("an empty memo knows oldsmi")
	}
	r418 := probe.SMIFields{Driver: "418.87.01", Missing: []string{"mig.mode.current"}}
	m.PutFields("oldsmi", r418, probe.FieldsRecheck)
	m.PutFields("k80", probe.SMIFields{Driver: "390.48", Missing: []string{"mig.mode.current", "temperature.gpu"}}, time.Hour)

	again := fleet.NewFieldsFile(path, clock) // another gssh process
	if got, ok := again.Fields("oldsmi"); !ok || got.Driver != r418.Driver || !slices.Equal(got.Missing, r418.Missing) {
		t.Errorf("oldsmi: %+v %v", got, ok)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file %v %v", fi, err)
	}
	if _, ok := again.Fields("a100"); ok {
		t.Error("a100 known")
	}

	now = now.Add(2 * time.Hour) // k80's hour is over; oldsmi has a day
	if _, ok := m.Fields("k80"); ok {
		t.Error("k80 still known after its ttl")
	}
	if _, ok := m.Fields("oldsmi"); !ok {
		t.Error("oldsmi forgotten before its ttl")
	}
	now = now.Add(probe.FieldsRecheck)
	if _, ok := m.Fields("oldsmi"); ok {
		t.Error("oldsmi still known after a day: the full query is never re-checked")
	}

	m.PutFields("oldsmi", r418, probe.FieldsRecheck)
	m.ForgetFields("oldsmi")
	if _, ok := m.Fields("oldsmi"); ok {
		t.Error("oldsmi known after ForgetFields")
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Fields("oldsmi"); ok {
		t.Error("a damaged file gave an entry")
	}
	m.PutFields("oldsmi", r418, probe.FieldsRecheck) // and is replaced whole
	if _, ok := m.Fields("oldsmi"); !ok {
		t.Error("no entry after rewriting a damaged file")
	}
}
