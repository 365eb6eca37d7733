package service_test

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/service"
)

// TestLogFollowersShare: three followers of a running job's whole log,
// the later ones joining after its first lines, each get the whole log,
// through one tail -F on the worker.
func TestLogFollowersShare(t *testing.T) {
	l := newLab(t, false)
	s := spec("sh", "-c", "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.3; done")
	s.MemPerGPU = 1 << 30
	id := l.submit(t, s).Job.ID
	want := "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 3)
	errs := make([]error, 3)
	tails := 0
	for i := range outs {
		wg.Go(func() {
			_, errs[i] = l.svc.Logs(context.Background(), service.LogsRequest{ID: id, Tail: -1, Follow: true}, &outs[i])
		})
		time.Sleep(400 * time.Millisecond) // the next joins a feed with lines in it
		// This lab's own job directory (under its HOME): other tests' and
		// packages' jobs, run meanwhile, have logs named alike.
		out, _ := exec.Command("pgrep", "-c", "-f", "^(\\S*/)?tail -n \\+1 -F --pid=\\S+ "+regexp.QuoteMeta(l.home)+"/.*-"+strconv.Itoa(int(id))+"\\.1/log$").Output()
		if n := strings.TrimSpace(string(out)); n != "" && n != "0" {
			if c, err := strconv.Atoi(n); err == nil {
				tails = max(tails, c)
			}
		}
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || outs[i].String() != want {
			t.Errorf("follower %d: %q, %v; want the whole log", i, outs[i].String(), errs[i])
		}
	}
	if tails != 1 {
		t.Errorf("%d tail -F on the worker for three followers; want 1", tails)
	}
}
