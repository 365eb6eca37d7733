package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

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
//	      (fewer fields for an nvidia-smi that rejects some: see SMIMemo)
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

// The --query-gpu fields a driver may not know, oldest driver first: R418
// knows no mig.mode.current (R450 added it with MIG). Without one, the fact
// it gives is unknown on every GPU of the host (nil, ""), never a default.
// The other fields of smiGPUFields are in every nvidia-smi that has
// --query-gpu, and the probe needs them: index, uuid, name and memory to
// place jobs, pci.bus_id to match lost-GPU lines, driver_version to tell
// that a remembered field list still holds. --query-compute-apps has no
// optional field: without any of smiProcFields process lists are unknown.
var smiGPUOptional = []string{"utilization.gpu", "temperature.gpu", "mig.mode.current"}

// SMI returns a Source that probes host through nvidia-smi: each Snapshot
// is one run.Run of SMIScript (one SSH session), and more only when the
// host's nvidia-smi rejects a query field (see SMIMemo). The caller bounds
// the probe with ctx.
func SMI(run Runner, host string) Source {
	return smiSource{run: run, host: host}
}

// SMIMemo is SMI remembering in memo (may be nil) which --query-gpu fields
// the host's nvidia-smi rejects, so that later probes ask the right query
// at once: one run, not a rejected one first.
//
// A driver older than gssh's query (R418: `Field "mig.mode.current" is
// not a valid field to query.`, exit 2) fails the whole query. The probe
// then asks again without the field it names, one optional field at a
// time (smiGPUOptional); when the rejected field is none it asked as
// optional, it asks once more for the fields every driver has. The GPUs
// are listed with the facts of the missing fields unknown,
// Snapshot.MissingFields names the fields and a warning says so in words.
// A required field rejected is a probe error that says which.
//
// An entry is checked on every probe against the driver version the
// answer carries (driver_version is in every query): a driver upgraded
// or downgraded is noticed at its first probe, which asks the full query
// again. Entries also expire after FieldsRecheck, for an nvidia-smi that
// changed under the same version (a container's own binary).
func SMIMemo(run Runner, host string, memo FieldMemo) Source {
	return smiSource{run: run, host: host, memo: memo}
}

// FieldMemo remembers, per host, the --query-gpu fields its nvidia-smi
// rejects (fleet.FieldsFile keeps it in a file on the controller).
type FieldMemo interface {
	// Fields returns what is remembered for host, if still valid.
	Fields(host string) (SMIFields, bool)
	// PutFields remembers f for host for ttl.
	PutFields(host string, f SMIFields, ttl time.Duration)
	// ForgetFields drops host's entry.
	ForgetFields(host string)
}

// SMIFields is what FieldMemo keeps of one host.
type SMIFields struct {
	Driver  string   `json:"driver_version"` // driver_version of the answer without Missing ("" if it gave none)
	Missing []string `json:"missing_fields"` // --query-gpu fields its nvidia-smi rejects, in query order
}

// FieldsRecheck is how long a host's rejected fields are remembered before
// the full query is tried again (one extra nvidia-smi run per host a day).
const FieldsRecheck = 24 * time.Hour

type smiSource struct {
	run  Runner
	host string
	memo FieldMemo
}

// Snapshot runs SMIScript on the host and parses its output, asking again
// without the fields the host's nvidia-smi rejects (see SMIMemo). When the
// host could not be reached or the session failed (any error but an
// *sshexec.ExitError), the snapshot holds only the transport state and the
// error is returned too. Otherwise it is ParseSMI's result: a host whose
// driver is broken is a state, not an error.
func (s smiSource) Snapshot(ctx context.Context) (Snapshot, error) {
	all := strings.Split(smiGPUFields, ",")
	fields, known := all, SMIFields{}
	remembered := false
	if s.memo != nil {
		if known, remembered = s.memo.Fields(s.host); remembered {
			fields = without(all, known.Missing...)
		}
	}
	learnt := false
	for try := 0; ; try++ {
		snap, err := s.once(ctx, fields)
		var rej *RejectedFieldError
		if errors.As(err, &rej) {
			next, ok := retryWithout(fields, rej.Field)
			if !ok || try > len(smiGPUOptional) {
				return rejected(snap, rej), err
			}
			fields, learnt = next, true
			continue
		}
		if remembered && snap.Driver != "" && snap.Driver != known.Driver && len(fields) < len(all) {
			// Another driver than the one that rejected the fields:
			// the full query may pass now.
			s.memo.ForgetFields(s.host)
			fields, remembered, learnt = all, false, false
			continue
		}
		missing := without(all, fields...)
		if learnt && s.memo != nil {
			s.memo.PutFields(s.host, SMIFields{Driver: snap.Driver, Missing: missing}, FieldsRecheck)
		}
		return withMissing(snap, missing), err
	}
}

// withMissing is snap of a query that left out the fields missing: its
// GPUs' facts of those are unknown, which MissingFields and a warning say.
func withMissing(snap Snapshot, missing []string) Snapshot {
	if len(missing) > 0 && len(snap.GPUs) > 0 {
		snap.MissingFields = missing
		snap.Warnings = append(snap.Warnings, OldDriverNote(snap.Driver, missing))
	}
	return snap
}

// once is one run of the probe script asking --query-gpu for fields.
func (s smiSource) once(ctx context.Context, fields []string) (Snapshot, error) {
	res, err := runEnding(ctx, s.run, s.host, smiScript(fields))
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
	snap, perr := parseSMI(s.host, fields, res.Stdout)
	if perr != nil && errors.Is(perr, ErrUnparsable) && (exit != nil || len(res.Stderr) > 0) {
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

// smiScript is SMIScript asking --query-gpu for fields instead.
func smiScript(fields []string) string {
	return strings.Replace(SMIScript, "--query-gpu="+smiGPUFields+" ", "--query-gpu="+strings.Join(fields, ",")+" ", 1)
}

// retryWithout is the field list to ask after nvidia-smi rejected field:
// fields without it when it is optional; the fields every driver has when
// nvidia-smi named a field gssh did not ask as optional (and fields were
// more than those); ok false when asking again cannot help (the field is
// one gssh needs).
func retryWithout(fields []string, field string) ([]string, bool) {
	switch {
	case slices.Contains(smiGPUOptional, field) && slices.Contains(fields, field):
		return without(fields, field), true
	case slices.Contains(fields, field) && !slices.Contains(smiGPUOptional, field):
		return nil, false // required: every query asks for it
	}
	required := without(strings.Split(smiGPUFields, ","), smiGPUOptional...)
	if len(fields) == len(required) {
		return nil, false
	}
	return required, true
}

// without returns fields less drop, in order.
func without(fields []string, drop ...string) []string {
	out := []string{}
	for _, f := range fields {
		if !slices.Contains(drop, f) {
			out = append(out, f)
		}
	}
	return out
}

// rejected is the snapshot of a host whose nvidia-smi rejects even the
// query of the fields the probe cannot do without.
func rejected(snap Snapshot, rej *RejectedFieldError) Snapshot {
	required := without(strings.Split(smiGPUFields, ","), smiGPUOptional...)
	what := "the query field " + rej.Field + ", which gssh needs"
	if !slices.Contains(required, rej.Field) {
		what = "even the fields gssh needs"
	}
	snap.Error = fmt.Sprintf("this nvidia-smi does not know %s (gssh asks at least for %s): %s; is the NVIDIA driver very old or unusual?",
		what, strings.Join(required, ", "), rej.Message)
	return snap
}

// OldDriverNote says in words which facts of a host are unknown because
// its nvidia-smi rejects the query fields missing (Snapshot.MissingFields):
// "old driver 418.87.01: nvidia-smi cannot report MIG mode (it does not
// know mig.mode.current); shown as unknown".
func OldDriverNote(driver string, missing []string) string {
	if driver == "" {
		driver = "(version unknown)"
	}
	return fmt.Sprintf("old driver %s: nvidia-smi cannot report %s (it does not know %s); shown as unknown",
		driver, MissingFacts(missing), strings.Join(missing, ", "))
}

// MissingFacts names the facts query fields give, for people:
// [utilization.gpu mig.mode.current] → "utilization and MIG mode".
func MissingFacts(fields []string) string {
	var facts []string
	for _, f := range fields {
		switch f {
		case "utilization.gpu":
			f = "utilization"
		case "temperature.gpu":
			f = "temperature"
		case "mig.mode.current":
			f = "MIG mode"
		}
		facts = append(facts, f)
	}
	if n := len(facts); n > 1 {
		return strings.Join(facts[:n-1], ", ") + " and " + facts[n-1]
	}
	return strings.Join(facts, "")
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
