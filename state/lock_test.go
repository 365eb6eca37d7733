package state_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// TestLockWait: an operation that finds the file locked waits in the
// kernel's queue and gets the lock as it is released; one that gives up
// (its Cancel closed, or no wait asked) stores nothing, and the lock it
// was still waiting for is released once it is granted. The trace hook
// sees each operation with what it waited and held.
func TestLockWait(t *testing.T) {
	_, path := openTemp(t)
	var mu sync.Mutex
	var ops []state.Op
	trace := func(o state.Op) { mu.Lock(); ops = append(ops, o); mu.Unlock() }
	hold := func() *bolt.DB {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}

	// No wait: busy at once, saying nothing was stored and how to wait.
	db := hold()
	_, err := state.Open(path, state.Options{Timeout: -1})
	if err == nil {
		t.Fatal("Open with the file locked: no error")
	}
	checkBusy(t, err, os.Getpid())
	for _, want := range []string{"nothing was stored", "--state-wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	db.Close()

	// Cancelled while it waits: nothing stored, and the lock that the
	// blocked flock takes later is released (a Submit after it gets it).
	cancel := make(chan struct{})
	s, err := state.Open(path, state.Options{Timeout: time.Hour, Cancel: cancel, Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	db = hold()
	go func() { waitForWaiter(t, path); close(cancel) }()
	var fe *state.FileError
	if _, err := s.Submit(job.Job{User: "a"}); !errors.Is(err, context.Canceled) || errors.Is(err, state.ErrBusy) || errors.Is(err, state.ErrCorrupt) ||
		!errors.As(err, &fe) || !strings.Contains(err.Error(), "interrupted while waiting for the lock (nothing was stored)") {
		t.Errorf("Submit cancelled while it waited: %v, want context.Canceled", err)
	}
	db.Close()
	after, err := state.Open(path, state.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.Submit(job.Job{User: "b"}); err != nil {
		t.Errorf("Submit after the cancelled wait: %v", err)
	}

	// A waiter gets the lock as the holder lets it go.
	s, err = state.Open(path, state.Options{Timeout: time.Hour, Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	db = hold()
	go func() { waitForWaiter(t, path); db.Close() }()
	j, err := s.Submit(job.Job{User: "c"})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.List(state.Filter{})
	if err != nil || len(all) != 2 || all[0].User != "b" || all[1].ID != j.ID || all[1].User != "c" {
		t.Errorf("jobs %+v, %v; want b's and c's only", all, err)
	}

	mu.Lock()
	defer mu.Unlock()
	names := map[string]state.Op{}
	for _, o := range ops {
		names[o.Name] = o // the last of each
	}
	if o := names["SubmitAll"]; !o.Write || o.Waited <= 0 || o.Held <= 0 || o.Err != nil {
		t.Errorf("trace of the Submit that waited: %+v", o)
	}
	if o := names["List"]; o.Write || o.Held <= 0 || o.Err != nil {
		t.Errorf("trace of List: %+v", o)
	}
	if o := names["Open"]; o.Write || o.Err != nil {
		t.Errorf("trace of Open: %+v", o)
	}
	if ops[1].Name != "SubmitAll" || !errors.Is(ops[1].Err, context.Canceled) || ops[1].Held != 0 {
		t.Errorf("trace of the cancelled Submit: %+v", ops[1])
	}
}

// waitForWaiter returns once /proc/locks shows a process waiting for the
// flock of path ("N: -> FLOCK ... MAJ:MIN:INODE ...").
func waitForWaiter(t *testing.T, path string) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Error(err)
		return
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10) + " "
	for {
		data, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Error(err)
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "-> FLOCK") && strings.Contains(line, ino) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}
