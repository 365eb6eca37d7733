package probe

import (
	"context"
	"errors"
	"io"

	"github.com/gssh/gssh/sshexec"
)

// Runner is what probe needs of sshexec: run a POSIX shell command line on
// a host and return what it wrote (sshexec.Runner satisfies it).
type Runner interface {
	Run(ctx context.Context, host, cmd string, stdin io.Reader) (sshexec.Result, error)
}

var _ Runner = sshexec.Runner(nil)

// SourceSMI is Snapshot.Source for snapshots read from nvidia-smi.
const SourceSMI = "nvidia-smi"

// The fields SMIScript asks nvidia-smi for, in this order. ParseSMI reads
// the rows by these lists.
const (
	smiGPUFields  = "index,uuid,pci.bus_id,name,memory.total,memory.used,memory.free,utilization.gpu,temperature.gpu,driver_version,mig.mode.current"
	smiProcFields = "gpu_uuid,pid,process_name,used_gpu_memory"
)

// SMIScript is the POSIX sh command line SMI runs on a host, in one
// session. It finds nvidia-smi (PATH, then /usr/lib/wsl/lib and /usr/bin,
// where a WSL2 or non-login SSH session can miss it) and runs, with
// LC_ALL=C and stderr merged into stdout:
//
//	host  the host's CPUs and memory: the MemTotal and MemAvailable lines
//	      of /proc/meminfo, the Cpus_allowed_list line of /proc/self/status
//	      (the login's affinity, which its jobs inherit) and
//	      "online: $(getconf _NPROCESSORS_ONLN)" (gpuinfo.ParseHostInfo)
//	gpu   nvidia-smi --query-gpu=<smiGPUFields> --format=csv,noheader,nounits
//	list  nvidia-smi -L                            (MIG devices and their UUIDs)
//	apps  nvidia-smi --query-compute-apps=<smiProcFields> --format=csv,noheader,nounits
//	ps    ps -o pid= -o user= -p PIDS              (the owners of the pids apps found)
//
// The last three run only when the first printed rows (exit 0, or output
// with a comma: a lost GPU makes nvidia-smi exit non-zero after printing
// the others), and ps only when apps found pids. Each section is framed
// by marker lines:
//
//	@@gssh section=NAME@@        what follows is the command's stderr
//	@@gssh section=NAME rc=N@@   it exited N; what follows is its stdout
//	@@gssh end@@                 the script ran to its end
//
// stdout is captured and printed after the command exits, so the two never
// interleave, and a space goes before any stdout line starting with "@",
// so that no output (a process name with a newline in it) can pass for a
// marker. The script always exits 0: outcomes are in the markers. Nothing
// in it comes from user input.
const SMIScript = `exec 2>&1; LC_ALL=C; export LC_ALL
N=$(command -v nvidia-smi) || for N in /usr/lib/wsl/lib/nvidia-smi /usr/bin/nvidia-smi nvidia-smi; do [ -x "$N" ] && break; done
q() { echo "@@gssh section=$1@@"; s=$1; shift; o=$("$@"); r=$?; printf '\n@@gssh section=%s rc=%d@@\n' "$s" $r; printf '%s\n' "$o" | sed 's/^@/ @/'; return $r; }
h() { grep -E '^(MemTotal|MemAvailable):' /proc/meminfo; grep '^Cpus_allowed_list:' /proc/self/status; echo "online: $(getconf _NPROCESSORS_ONLN)"; }
q host h
q gpu "$N" --query-gpu=` + smiGPUFields + ` --format=csv,noheader,nounits
case $r,$o in 0,*|*,*,*)
q list "$N" -L
q apps "$N" --query-compute-apps=` + smiProcFields + ` --format=csv,noheader,nounits &&
p=$(printf '%s\n' "$o" | sed -n 's/^[^,]*, *\([0-9][0-9]*\),.*/\1/p' | paste -sd, -) && [ -n "$p" ] && q ps ps -o pid= -o user= -p "$p"
esac
echo '@@gssh end@@'
`

// SMI returns a Source that probes host through nvidia-smi: each Snapshot
// is one run.Run of SMIScript (one SSH session). The caller bounds the
// probe with ctx.
func SMI(run Runner, host string) Source {
	return smiSource{run: run, host: host}
}

type smiSource struct {
	run  Runner
	host string
}

// Snapshot runs SMIScript on the host and parses its output. When the
// host could not be reached or the session failed (any error but an
// *sshexec.ExitError), the snapshot holds only the transport state and the
// error is returned too. Otherwise it is ParseSMI's result: a host whose
// driver is broken is a state, not an error.
func (s smiSource) Snapshot(ctx context.Context) (Snapshot, error) {
	res, err := s.run.Run(ctx, s.host, SMIScript, nil)
	var exit *sshexec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return Snapshot{
			Host:     s.host,
			State:    TransportState(err),
			Error:    err.Error(),
			Source:   SourceSMI,
			Warnings: []string{},
			GPUs:     []GPU{},
		}, err
	}
	snap, perr := ParseSMI(s.host, res.Stdout)
	if perr != nil && (exit != nil || len(res.Stderr) > 0) {
		// The script itself failed (a login shell that is not POSIX, a
		// killed session): what the shell said explains the output.
		why := string(res.Stderr)
		if exit != nil {
			why = exit.Error()
		}
		snap.Error += "; the shell said: " + clip(why)
	}
	return snap, perr
}

// TransportState names a transport failure in HostState's words, from
// the sentinel err wraps (a deadline passed is a timeout too).
func TransportState(err error) HostState {
	for _, m := range []struct {
		sentinel error
		state    HostState
	}{
		{sshexec.ErrHostKey, HostKeyMismatch},
		{sshexec.ErrUnknownHostKey, HostKeyUnknown},
		{sshexec.ErrAuth, HostAuthFailed},
		{sshexec.ErrTimeout, HostTimeout},
		{context.DeadlineExceeded, HostTimeout},
		{sshexec.ErrUnreachable, HostUnreachable},
		{sshexec.ErrUnknownHost, HostUnknownHost},
		{sshexec.ErrConfig, HostConfigError},
		{sshexec.ErrNoOutcome, HostConnectionLost},
	} {
		if errors.Is(err, m.sentinel) {
			return m.state
		}
	}
	return HostTransportError
}
