package state

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
)

// damagedFile makes a state file of a few jobs, then lets edit change
// the first page of the jobs/ bucket (its bytes, the page id, the page
// size) and the file's length: edit returns the length to keep.
func damagedFile(t *testing.T, edit func(p []byte, id, pageSize, pages uint64) int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if _, err := s.Submit(job.Job{User: "a", Spec: job.Spec{Argv: []string{strings.Repeat("x", 300)}, Host: "auto", GPUs: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	var pageSize int
	var pages uint64
	err = db.View(func(tx *bolt.Tx) error {
		root, pageSize = uint64(tx.Bucket([]byte(bucketJobs)).Root()), tx.DB().Info().PageSize
		pages = uint64(tx.Size()) / uint64(pageSize)
		return nil
	})
	db.Close()
	if err != nil || root == 0 {
		t.Fatalf("jobs/ root page %d: %v", root, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := edit(data[root*uint64(pageSize):], root, uint64(pageSize), pages)
	if err := os.WriteFile(path, data[:n], 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Without the page walk (walkOnce, as if it had passed), a panic of
// bbolt's and a fault reading its map are each ErrDamaged, and the store
// writes nothing after either: guard alone keeps the process alive.
func TestGuard(t *testing.T) {
	ne := binary.NativeEndian
	for _, tc := range []struct {
		name string
		edit func(p []byte, id, pageSize, pages uint64) int64
		want string
	}{
		{"page id", func(p []byte, id, _, pages uint64) int64 {
			ne.PutUint64(p, id+1000) // bbolt asserts the page says it is itself
			return -1
		}, "bbolt: assertion failed: Page expected to be"},
		{"fault", func(p []byte, id, pageSize, pages uint64) int64 {
			// The file cut after its last page in use, the first key of
			// jobs/ pointing one page past that: inside bbolt's map (a
			// power of two, at least 32 KiB) but past the end of the
			// file: SIGBUS.
			end := pages * pageSize
			if end&(end-1) == 0 {
				t.Fatalf("the fixture's pages in use (%d bytes) fill the map: no room to fault in; give it another job", end)
			}
			target := end + pageSize // from the start of the file
			elem := id*pageSize + 16 // the first element
			pos := target - elem
			if ne.Uint16(p[8:]) == 0x02 { // leaf: flags, pos, ksize, vsize
				ne.PutUint32(p[16+4:], uint32(pos))
			} else { // branch: pos, ksize, pgid
				ne.PutUint32(p[16:], uint32(pos))
			}
			return int64(end)
		}, "reading it faulted at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := damagedFile(t, func(p []byte, id, ps, pages uint64) int64 {
				n := tc.edit(p, id, ps, pages)
				if n < 0 {
					return int64(pages * ps)
				}
				return n
			})
			s := &Bolt{path: path, timeout: DefaultTimeout, now: time.Now}
			s.damage.walked = true // as if the walk had passed: guard alone
			before, _ := os.ReadFile(path)
			_, err := s.Get(3)
			var fe *FileError
			if !errors.Is(err, ErrDamaged) || !errors.As(err, &fe) || fe.Path != path || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "gssh state restore") {
				t.Fatalf("Get = %v, want ErrDamaged saying %q, naming the file and gssh state restore", err, tc.want)
			}
			t.Log(err)
			_, err = s.Submit(job.Job{User: "b", Spec: job.Spec{Argv: []string{"true"}, Host: "auto", GPUs: 1}})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "refused to write") {
				t.Errorf("Submit after = %v, want the write refused", err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("the file changed")
			}
			// The walk (a fresh store's first operation) finds it too,
			// before bbolt reads it.
			s2 := &Bolt{path: path, timeout: DefaultTimeout, now: time.Now}
			if _, err := s2.Get(3); !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "bbolt:") || strings.Contains(err.Error(), "faulted") {
				t.Errorf("Get with the walk = %v, want ErrDamaged from the walk", err)
			}
			// And Check reports it, exit 0 for the process.
			r, err := Check(path, Options{})
			if err != nil || len(r.Problems) == 0 {
				t.Errorf("Check = %+v, %v; want problems", r.Problems, err)
			}
		})
	}
}
