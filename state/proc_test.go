package state_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// The tests re-execute their own binary as child processes; the role and
// its arguments come in the environment.
const (
	envRole = "GSSH_STATE_TEST_ROLE" // "submit" or "hold"
	envPath = "GSSH_STATE_TEST_PATH"
	envName = "GSSH_STATE_TEST_NAME"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "":
		os.Exit(m.Run())
	case "submit":
		os.Exit(childSubmit())
	case "hold":
		os.Exit(childHold())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", envRole)
		os.Exit(2)
	}
}

// childSubmit waits for stdin to close (the start gun), submits one job
// and prints its id.
func childSubmit() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	s, err := state.Open(os.Getenv(envPath), state.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	j, err := s.Submit(job.Job{User: "child", Spec: job.Spec{Name: os.Getenv(envName), Argv: []string{"true"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(j.ID)
	return 0
}

// childHold opens the bbolt file (taking its lock), says "locked" and keeps
// it until stdin closes.
func childHold() int {
	db, err := bolt.Open(os.Getenv(envPath), 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	db.Close()
	return 0
}

func child(t *testing.T, role, path, name string) (*exec.Cmd, io.WriteCloser, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"="+role, envPath+"="+path, envName+"="+name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	return cmd, stdin, stderr
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestProcessesSubmit: 50 processes submit to one file at the same moment;
// every job is stored under its own id, 1..50.
func TestProcessesSubmit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts 50 processes")
	}
	const n = 50
	s, path := openTemp(t)
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *strings.Builder
		stderr *strings.Builder
	}
	procs := make([]proc, n)
	for i := range procs {
		cmd, stdin, stderr := child(t, "submit", path, itoa(i))
		out := new(strings.Builder)
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", i, err)
		}
		procs[i] = proc{cmd, stdin, out, stderr}
	}
	for _, p := range procs { // all started: go
		p.stdin.Close()
	}
	var ids []job.ID
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v: %s", i, err, p.stderr)
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(p.stdout.String()), 10, 64)
		if err != nil {
			t.Errorf("child %d printed %q", i, p.stdout)
			continue
		}
		ids = append(ids, job.ID(id))
	}
	slices.Sort(ids)
	want := make([]job.ID, n)
	for i := range want {
		want[i] = job.ID(i + 1)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("ids = %v, want 1..%d once each", ids, n)
	}
	all, err := s.List(state.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]job.ID{}
	for _, j := range all {
		if prev, dup := names[j.Spec.Name]; dup {
			t.Errorf("child %s stored twice: jobs %d and %d", j.Spec.Name, prev, j.ID)
		}
		names[j.Spec.Name] = j.ID
	}
	if len(all) != n || len(names) != n {
		t.Errorf("stored %d jobs from %d children, want %d", len(all), len(names), n)
	}
	active, err := s.Active()
	if err != nil || len(active) != n {
		t.Errorf("Active = %d jobs, %v; want %d", len(active), err, n)
	}
}

// TestProcessBusy: while another process holds the file, Open gives up
// after its timeout with ErrBusy naming that process.
func TestProcessBusy(t *testing.T) {
	_, path := openTemp(t)
	s, err := state.Open(path, state.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cmd, stdin, stderr := child(t, "hold", path, "")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("holder: %v: %s", err, stderr)
			}
		})
	}
	t.Cleanup(release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q, %v: %s", line, err, stderr)
	}

	start := time.Now()
	_, err = state.Open(path, state.Options{Timeout: 200 * time.Millisecond})
	waited := time.Since(start)
	checkBusy(t, err, cmd.Process.Pid)
	t.Log(err)
	if waited < 150*time.Millisecond || waited > 5*time.Second {
		t.Errorf("Open gave up after %v, want about 200ms", waited)
	}
	_, err = s.Submit(job.Job{User: "a"})
	checkBusy(t, err, cmd.Process.Pid)

	release()
	if _, err := state.Open(path, state.Options{Timeout: 200 * time.Millisecond}); err != nil {
		t.Errorf("Open after the holder left: %v", err)
	}
}
