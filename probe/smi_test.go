package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gssh/gssh/sshexec"
)

// cannedRunner answers every Run with res and err and records the calls.
type cannedRunner struct {
	res   sshexec.Result
	err   error
	calls []string // "host|cmd"
	ctxs  []context.Context
}

func (r *cannedRunner) Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error) {
	r.calls = append(r.calls, host+"|"+cmd)
	r.ctxs = append(r.ctxs, ctx)
	return r.res, r.err
}

type ctxKey struct{}

// TestSMIOneSession: a Snapshot is one Run of SMIScript on the host, with
// the caller's context.
func TestSMIOneSession(t *testing.T) {
	run := &cannedRunner{res: sshexec.Result{Stdout: script(healthy()...)}}
	ctx := context.WithValue(context.Background(), ctxKey{}, "probe")
	s, err := SMI(run, "gpu-node.example").Snapshot(ctx)
	wantState(t, s, err, HostOK, 2)
	if len(run.calls) != 1 || run.calls[0] != "gpu-node.example|"+sshexec.EndWithSession(SMIScript) || run.ctxs[0].Value(ctxKey{}) != "probe" {
		t.Errorf("calls %q", run.calls)
	}
	if s.Host != "gpu-node.example" || s.Source != SourceSMI {
		t.Errorf("host %q source %q", s.Host, s.Source)
	}
}

// TestSMITransportErrors: a host that cannot be reached is a state and an
// error; sshexec's reason names the state.
func TestSMITransportErrors(t *testing.T) {
	for sentinel, want := range map[error]HostState{
		sshexec.ErrUnreachable:    HostUnreachable,
		sshexec.ErrTimeout:        HostTimeout,
		sshexec.ErrAuth:           HostAuthFailed,
		sshexec.ErrHostKey:        HostKeyMismatch,
		sshexec.ErrUnknownHostKey: HostKeyUnknown,
		sshexec.ErrConfig:         HostConfigError,
		sshexec.ErrUnknownHost:    HostUnknownHost,
		sshexec.ErrNoOutcome:      HostConnectionLost,
		context.DeadlineExceeded:  HostTimeout,
		errors.New("odd"):         HostTransportError,
	} {
		terr := fmt.Errorf("gpu-node.example: dial: %w", sentinel)
		s, err := SMI(&cannedRunner{err: terr}, "gpu-node.example").Snapshot(context.Background())
		if err != terr || s.State != want || s.Error != terr.Error() || s.Host != "gpu-node.example" || len(s.GPUs) != 0 || s.Warnings == nil {
			t.Errorf("%v: state %q, error %v; want %q", sentinel, s.State, err, want)
		}
	}
}

// TestSMIExitError: the script always exits 0, so an exit error means the
// shell failed; its stdout is still parsed, and what the shell said
// explains a probe error.
func TestSMIExitError(t *testing.T) {
	exit := &sshexec.ExitError{Host: "h", Code: 1, Stderr: "Illegal variable name."}
	s, err := SMI(&cannedRunner{err: exit}, "h").Snapshot(context.Background())
	if s.State != HostProbeError || !errors.Is(err, ErrUnparsable) || !strings.Contains(s.Error, "the shell said: h: command exit status 1: Illegal variable name.") {
		t.Errorf("state %q (%s), error %v", s.State, s.Error, err)
	}
	// Killed after printing everything: the output stands.
	s, err = SMI(&cannedRunner{res: sshexec.Result{Stdout: script(healthy()...)}, err: &sshexec.ExitError{Host: "h", Code: -1, Signal: "HUP"}}, "h").Snapshot(context.Background())
	wantState(t, s, err, HostOK, 2)
}

// TestSMIScriptText: the script asks for gssh's fields and nothing variable.
func TestSMIScriptText(t *testing.T) {
	for _, part := range []string{
		"--query-gpu=index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,temperature.gpu,driver_version,mig.mode.current --format=csv,noheader,nounits",
		"--query-compute-apps=gpu_uuid,pid,process_name,used_gpu_memory --format=csv,noheader,nounits",
		`"$N" -L`, "ps -o pid= -o user= -p", "LC_ALL=C", "/usr/lib/wsl/lib/nvidia-smi", "/usr/bin/nvidia-smi", "@@gssh end@@",
	} {
		if !strings.Contains(SMIScript, part) {
			t.Errorf("SMIScript lacks %q", part)
		}
	}
}
