package probe

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// golden compares v, as indented JSON, with testdata/golden/NAME.json, or
// rewrites that file with -update.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./probe -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./probe -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// corpus reads testdata/corpus/ID-*.txt.
func corpus(t testing.TB, id string) []byte {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", "corpus", id+"-*.txt"))
	if err != nil || len(m) != 1 {
		t.Fatalf("corpus case %s: %v %v", id, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mib is n MiB in bytes.
func mib(n uint64) uint64 { return n << 20 }

// eqU64 reports whether p points to want.
func eqU64(p *uint64, want uint64) bool { return p != nil && *p == want }

// eqInt reports whether p points to want.
func eqInt(p *int, want int) bool { return p != nil && *p == want }

// show prints a nullable number for messages.
func show[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}
