package service

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/labfile"
)

// A gssh run's session is alive while its lock is held, and gone once
// released or never made; a token gssh does not make is never a path.
func TestSessions(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{StatePath: filepath.Join(dir, "state.db")})
	ss := sessions{dir: l.sessionDir()}
	s, err := l.openSession()
	if err != nil {
		t.Fatal(err)
	}
	if !sessionToken.MatchString(s.token) {
		t.Fatalf("token %q", s.token)
	}
	if !ss.Alive(job.Interactive{Session: s.token}) {
		t.Error("a held session is not alive")
	}
	if st, err := os.Stat(s.lock.Name()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v %v", st, err)
	}
	s.close()
	if ss.Alive(job.Interactive{Session: s.token}) {
		t.Error("a closed session is alive")
	}
	// A lock file left by a process that died: not held, so gone (and
	// the file removed).
	stale := filepath.Join(ss.dir, "00000000000000000000000000000000.lock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ss.Alive(job.Interactive{Session: "00000000000000000000000000000000"}) {
		t.Error("an unheld lock file is alive")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale lock file left: %v", err)
	}
	for _, bad := range []string{"", "../state.db", "0000000000000000000000000000000g"} {
		if ss.Alive(job.Interactive{Session: bad}) {
			t.Errorf("token %q is alive", bad)
		}
	}
}

// A lock file removed from under a live gssh run (a tmp cleaner) does not
// make its job look abandoned: the process it names still runs. The
// sweep removes only unheld lock files no active job names.
func TestSessionsPidAndSweep(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{StatePath: filepath.Join(dir, "state.db")})
	ss := sessions{dir: l.sessionDir()}
	s, err := l.openSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	in := job.Interactive{Session: s.token, PID: s.pid, StartTicks: s.ticks}
	if s.pid != os.Getpid() || s.ticks <= 0 {
		t.Fatalf("session of pid %d ticks %d", s.pid, s.ticks)
	}
	os.Remove(s.lock.Name())
	if !ss.Alive(in) {
		t.Error("a live gssh run whose lock file was removed is taken for gone")
	}
	in.StartTicks++ // another process under a reused pid
	if ss.Alive(in) {
		t.Error("a reused pid is taken for the gssh run")
	}

	held, err := l.openSession()
	if err != nil {
		t.Fatal(err)
	}
	defer held.close()
	stale := filepath.Join(ss.dir, "11111111111111111111111111111111.lock")
	named := filepath.Join(ss.dir, "22222222222222222222222222222222.lock")
	other := filepath.Join(ss.dir, "notes.txt")
	for _, p := range []string{stale, named, other} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ss.sweep([]job.Job{{Spec: job.Spec{Interactive: &job.Interactive{Session: "22222222222222222222222222222222"}}}})
	for p, want := range map[string]bool{stale: false, named: true, other: true, held.lock.Name(): true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s after the sweep: %v, want kept=%v", filepath.Base(p), err, want)
		}
	}
}

// A link another made to a live gssh run's lock (a member's, in a lab)
// neither hides the run nor removes its file; once released, the lock
// is gone and its entry removed, the link keeping the old file.
func TestSessionLinked(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{StatePath: filepath.Join(dir, "state.db")})
	lab := labfile.New(dir, "root", 0, "root", 0) // as the pass account sees it
	ss := sessions{dir: l.sessionDir(), lab: &lab, report: func(r labfile.Replaced) { t.Errorf("removed: %+v", r) }}
	s, err := l.openSession()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sessionlink")
	if err := os.Link(s.lock.Name(), link); err != nil {
		t.Fatal(err)
	}
	in := job.Interactive{Session: s.token, PID: s.pid, StartTicks: s.ticks + 1} // not found by its pid
	if !ss.Alive(in) {
		t.Error("a held session with a second link is taken for gone")
	}
	if _, err := os.Stat(s.lock.Name()); err != nil {
		t.Errorf("its lock file: %v", err)
	}
	s.close()
	if ss.Alive(in) {
		t.Error("a released session is alive")
	}
	if _, err := os.Stat(s.lock.Name()); !os.IsNotExist(err) {
		t.Errorf("a released lock file left: %v", err)
	}
	if _, err := os.Stat(link); err != nil {
		t.Errorf("the link: %v", err)
	}
}
