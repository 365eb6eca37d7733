package fleet

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// memoFile is a list of entries E kept as JSON in one file (mode 0600,
// replaced whole through a temp file and a rename, so a reader never sees
// half of it): the controller's memos. A missing or damaged file reads as
// empty and write errors are ignored: a memo only saves work. Two gssh
// processes writing at once may lose one's entry, which is then learnt
// again.
type memoFile[E any] struct {
	path string
	mu   sync.Mutex
}

// read returns the entries.
func (m *memoFile[E]) read() []E {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.load()
}

// update replaces the entries with what edit makes of them.
func (m *memoFile[E]) update(edit func([]E) []E) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.save(edit(m.load()))
}

func (m *memoFile[E]) load() []E {
	b, err := os.ReadFile(m.path)
	if err != nil {
		return nil
	}
	var es []E
	if json.Unmarshal(b, &es) != nil {
		return nil // a damaged memo is as good as none
	}
	return es
}

func (m *memoFile[E]) save(es []E) {
	if es == nil {
		es = []E{}
	}
	b, err := json.MarshalIndent(es, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(m.path), ".memo-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Chmod(tmp.Name(), 0o600) != nil || os.Rename(tmp.Name(), m.path) != nil {
		os.Remove(tmp.Name())
	}
}
