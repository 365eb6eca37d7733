package launch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	err := launch.Attach(context.Background(), p, "w", cluster, j, launch.Session{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errb, Started: func(r job.Remote) error {
		remote = r
		return nil
	}})
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
		done <- launch.Attach(ctx, p, "w", cluster, j, launch.Session{Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{}, Started: func(r job.Remote) error {
			remote = r
			cancel()
			return nil
		}})
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
	err := launch.Attach(context.Background(), p, "w", cluster, bg, launch.Session{Stdout: &out, Stderr: &lockedBuffer{}, Started: func(r job.Remote) error { bg.Remote = r; return nil }})
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
	err := launch.Attach(context.Background(), p, "w", cluster, j, launch.Session{Stdout: &out, Stderr: &lockedBuffer{}, Started: func(job.Remote) error {
		t.Error("started called for an abandoned attempt")
		return nil
	}})
	if !errors.Is(err, launch.ErrNotStarted) || !strings.Contains(err.Error(), "exists already") || out.String() != "" {
		t.Errorf("Attach of an abandoned attempt: %v, %q", err, out.String())
	}
	// started refusing (the job was cancelled meanwhile): stopped at once.
	k := interactive(45, "sleep", "300")
	start := time.Now()
	err = launch.Attach(context.Background(), p, "w", cluster, k, launch.Session{Stdout: &out, Stderr: &lockedBuffer{}, Started: func(r job.Remote) error {
		k.Remote = r
		return errors.New("job 45 was cancelled meanwhile")
	}})
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
	// A job's session, signalled through the worker's /bin/sh (dash on
	// Debian, whose kill takes no "-INT --"): its trap runs.
	c := exec.Command("/bin/sh", "-c", `trap "exit 7" INT; echo up; while :; do sleep 0.1; done`)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	io.ReadFull(out, make([]byte, 3)) // "up\n": the trap is set
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, _ := strconv.ParseInt(f[19], 10, 64)
	j.Remote = job.Remote{PID: c.Process.Pid, StartTicks: ticks}
	if sent, err := launch.Signal(context.Background(), sshexec.Local{}, "w", j, "INT"); err != nil || !sent {
		t.Errorf("Signal of a live job: %v %v", sent, err)
	}
	timer := time.AfterFunc(10*time.Second, func() { c.Process.Kill() })
	defer timer.Stop()
	err = c.Wait()
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 7 {
		t.Errorf("the job after SIGINT: %v, want its trap's exit 7", err)
	}
}

// silent is a shell whose keeper session goes silent after its first
// beat: its stdin neither brings more nor ends, as over a connection cut
// without a close. failJob makes the job's session fail at once.
type silent struct {
	*sshexec.Pool
	failJob error
}

func (s silent) Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error {
	return s.Pool.Stream(ctx, host, cmd, &untilBeat{r: stdin, ctx: ctx}, stdout, stderr)
}

func (s silent) Interact(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer, tty *sshexec.Terminal) error {
	if s.failJob != nil {
		return s.failJob
	}
	return s.Pool.Interact(ctx, host, cmd, stdin, stdout, stderr, tty)
}

type untilBeat struct {
	r   io.Reader
	ctx context.Context
	mu  sync.Mutex
	cut bool
}

func (u *untilBeat) Read(p []byte) (int, error) {
	u.mu.Lock()
	cut := u.cut
	u.mu.Unlock()
	if cut {
		<-u.ctx.Done()
		return 0, u.ctx.Err()
	}
	n, err := u.r.Read(p)
	if string(p[:n]) == "beat\n" {
		u.mu.Lock()
		u.cut = true
		u.mu.Unlock()
	}
	return n, err
}

// A keeper that hears nothing for StaleAfter stops the job, as a hangup:
// a connection gone silent holds no GPU for the hours TCP takes to notice.
func TestAttachStale(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(47, "sleep", "300")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	err := launch.Attach(ctx, silent{Pool: p}, "w", cluster, j, launch.Session{Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{},
		BeatEvery: 200 * time.Millisecond, StaleAfter: 2 * time.Second, Started: func(r job.Remote) error { j.Remote = r; return nil }})
	var xe *sshexec.ExitError
	if !errors.As(err, &xe) || time.Since(start) > 20*time.Second {
		t.Fatalf("Attach %v after %v: want the job stopped within seconds", err, time.Since(start))
	}
	if st := waitEnd(t, p, j); st.State != job.Cancelled || !strings.Contains(st.Reason, "its gssh run went away") {
		t.Errorf("after the keeper lost its beats: %+v", st)
	}
}

// A job session that fails before run.sh starts: its error, at once, and
// the attempt abandoned (never starts later).
func TestAttachSessionFails(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(48, "sh", "-c", "echo ran")
	refused := errors.New("the server refused a terminal")
	start := time.Now()
	err := launch.Attach(context.Background(), silent{Pool: p, failJob: refused}, "w", cluster, j, launch.Session{Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{},
		Started: func(job.Remote) error { t.Error("started called"); return nil }})
	if !errors.Is(err, launch.ErrNotStarted) || !errors.Is(err, refused) || time.Since(start) > 20*time.Second {
		t.Fatalf("Attach: %v after %v", err, time.Since(start))
	}
	m, _ := launch.Poll(context.Background(), p, "w", cluster, []job.Job{j})
	if !m[j.ID].Abandoned {
		t.Errorf("after a failed session: %+v, want abandoned", m[j.ID])
	}
}

// run.sh killed (the OOM killer, kill -9) while gssh run is there: the
// job is lost, as any job whose run.sh was killed, not a hangup.
func TestAttachRunShKilled(t *testing.T) {
	w := startWorker(t, nil)
	p := w.pool(t)
	j := interactive(49, "sleep", "300")
	err := launch.Attach(context.Background(), p, "w", cluster, j, launch.Session{Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{},
		Started: func(r job.Remote) error {
			j.Remote = r
			go func() { time.Sleep(200 * time.Millisecond); syscall.Kill(-r.PID, syscall.SIGKILL) }()
			return nil
		}})
	var xe *sshexec.ExitError
	if !errors.As(err, &xe) {
		t.Fatalf("Attach: %v", err)
	}
	if st := waitEnd(t, p, j); st.State != job.Lost {
		t.Errorf("after kill -9 of run.sh: %+v, want lost", st)
	}
}
