package launch_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sshexec"
)

// lockedBuffer is a bytes.Buffer for a writer and a later reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func interactive(id job.ID, argv ...string) job.Job {
	j := newJob(id, argv...)
	j.Spec.Interactive = &job.Interactive{Session: "0123456789abcdef0123456789abcdef"}
	return j
}

// An interactive job over real sshd: stdin in, stdout and stderr out,
// the exit status back, recorded on the worker as any job's is; the
// value gssh places in the command stay quoted.
func TestAttach(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(41, "sh", "-c", `read x; echo "in:$x"; echo err >&2; echo "$CUDA_VISIBLE_DEVICES $1"; exit 3`, "gssh-job", `$(touch /tmp/pwned-attach); 'x'`)
	var out, errb lockedBuffer
	var remote job.Remote
	err := launch.Attach(context.Background(), p, "w", cluster, j, strings.NewReader("hello\n"), &out, &errb, nil, func(r job.Remote) error {
		remote = r
		return nil
	})
	var xe *sshexec.ExitError
	if !errors.As(err, &xe) || xe.Code != 3 {
		t.Fatalf("Attach: %v (stderr %q)", err, errb.String())
	}
	if got, want := out.String(), "in:hello\nGPU-a $(touch /tmp/pwned-attach); 'x'\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if errb.String() != "err\n" {
		t.Errorf("stderr %q", errb.String())
	}
	if remote.PID <= 0 || !strings.HasSuffix(remote.Dir, ".gssh/jobs/"+cluster+"-41.1") {
		t.Fatalf("started with %+v", remote)
	}
	j.Remote = remote
	st := waitEnd(t, p, j)
	if st.State != job.Failed || st.ExitCode == nil || *st.ExitCode != 3 || st.Orphans != 0 {
		t.Errorf("poll after: %+v", st)
	}
	var log bytes.Buffer
	if err := launch.Logs(context.Background(), p, "w", cluster, j, -1, false, &log); err != nil || !strings.Contains(log.String(), "is interactive (gssh run)") {
		t.Errorf("log %q, %v", log.String(), err)
	}
}

// gssh run gone (its ctx ends: the session is cut, as a dropped
// connection cuts it): the keeper stops the job, marked so that Poll
// says why; what a job leaves in the background when it ends is stopped
// too, so that its session ends with it.
func TestAttachKeeper(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(42, "sleep", "300")
	ctx, cancel := context.WithCancel(context.Background())
	var remote job.Remote
	done := make(chan error, 1)
	go func() {
		done <- launch.Attach(ctx, p, "w", cluster, j, nil, &lockedBuffer{}, &lockedBuffer{}, nil, func(r job.Remote) error {
			remote = r
			cancel()
			return nil
		})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Attach of a job cut off returned no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Attach did not return after its ctx ended")
	}
	j.Remote = remote
	st := waitEnd(t, p, j)
	if st.State != job.Cancelled || !strings.Contains(st.Reason, "its gssh run went away") {
		t.Errorf("after the keeper: %+v", st)
	}

	bg := interactive(43, "sh", "-c", "sleep 301 & echo started")
	var out lockedBuffer
	start := time.Now()
	err := launch.Attach(context.Background(), p, "w", cluster, bg, nil, &out, &lockedBuffer{}, nil, func(r job.Remote) error { bg.Remote = r; return nil })
	if err != nil || out.String() != "started\n" {
		t.Fatalf("a job leaving a process behind: %v, %q", err, out.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("its session lasted %v: the leftover held it", d)
	}
	if st := waitEnd(t, p, bg); st.State != job.Succeeded || st.Orphans != 0 {
		t.Errorf("after the leftover was stopped: %+v", st)
	}
}

// An attempt taken already (a cancel or a pass abandoned it) never runs:
// Attach says it did not start and never calls started.
func TestAttachAbandoned(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(44, "sh", "-c", "echo ran")
	if ok, err := launch.Abandon(context.Background(), p, "w", cluster, j); err != nil || !ok {
		t.Fatalf("abandon: %v %v", ok, err)
	}
	var out lockedBuffer
	err := launch.Attach(context.Background(), p, "w", cluster, j, nil, &out, &lockedBuffer{}, nil, func(job.Remote) error {
		t.Error("started called for an abandoned attempt")
		return nil
	})
	if !errors.Is(err, launch.ErrNotStarted) || !strings.Contains(err.Error(), "exists already") || out.String() != "" {
		t.Errorf("Attach of an abandoned attempt: %v, %q", err, out.String())
	}
	// started refusing (the job was cancelled meanwhile): stopped at once.
	k := interactive(45, "sleep", "300")
	start := time.Now()
	err = launch.Attach(context.Background(), p, "w", cluster, k, nil, &out, &lockedBuffer{}, nil, func(r job.Remote) error {
		k.Remote = r
		return errors.New("job 45 was cancelled meanwhile")
	})
	if !errors.Is(err, launch.ErrNotStarted) || time.Since(start) > 20*time.Second {
		t.Errorf("started refused: %v after %v", err, time.Since(start))
	}
	if st := waitEnd(t, p, k); st.State != job.Cancelled {
		t.Errorf("after started refused: %+v", st)
	}
}

// Signal passes only the signals gssh run forwards, and only to the job
// its pid names (a pid reused since is left alone).
func TestSignal(t *testing.T) {
	j := interactive(46, "true")
	j.Remote = job.Remote{PID: 1, StartTicks: 1}
	if _, err := launch.Signal(context.Background(), sshexec.Local{}, "w", j, "INT; rm -rf ~"); err == nil {
		t.Error("a hostile signal name was passed on")
	}
	if sent, err := launch.Signal(context.Background(), sshexec.Local{}, "w", j, "INT"); err != nil || sent {
		t.Errorf("a pid whose start time differs was signalled: %v %v", sent, err)
	}
}
