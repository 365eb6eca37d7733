package probe

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"al.essio.dev/pkg/shellescape"

	"github.com/gssh/gssh/sshexec"
)

// HelperBinary is the gssh-helper executable gssh carries and pushes to
// hosts, content-addressed by its sha256.
type HelperBinary struct {
	Path   string // on the controller
	SHA256 string // hex
	Arch   string // `uname -m` of the machines it runs on: "x86_64", "aarch64"
	Data   []byte
}

// LoadHelperBinary reads the helper at path and works out its hash and
// architecture (from the ELF header).
func LoadHelperBinary(path string) (*HelperBinary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("helper: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("helper %s: not an ELF executable: %w", path, err)
	}
	arch := map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64", elf.EM_PPC64: "ppc64le"}[f.Machine]
	if arch == "" {
		arch = strings.ToLower(strings.TrimPrefix(f.Machine.String(), "EM_"))
	}
	sum := sha256.Sum256(data)
	return &HelperBinary{Path: path, SHA256: hex.EncodeToString(sum[:]), Arch: arch, Data: data}, nil
}

// FallbackMemo remembers, per host, why the helper cannot be used there, so a
// host that cannot run it is not retried on every probe. Entries belong to
// one helper hash: a new helper is tried afresh.
type FallbackMemo interface {
	// Get returns the remembered reason for host and helper sha256.
	Get(host, sha string) (reason string, ok bool)
	// Put remembers reason for ttl (0 = until the helper changes).
	Put(host, sha, reason string, ttl time.Duration)
}

// How long a reason that may go away (a full disk, a driver not loaded
// yet) is remembered before the helper is tried again.
const retryAfter = 10 * time.Minute

// HelperUnusable is the error of a Helper source that could not answer
// through NVML on a reachable host; Fallback then asks nvidia-smi and shows
// Reason.
type HelperUnusable struct{ Reason string }

func (e *HelperUnusable) Error() string { return "helper unusable: " + e.Reason }

// Helper returns a Source that runs gssh-helper on host. The helper is kept
// at ~/.cache/gssh/helper-<sha256> on the host; when it is missing or
// damaged it is pushed over the same Runner (temp file, hash verified,
// chmod 0755, rename, so two controllers pushing at once cannot corrupt
// it). With local set it runs bin.Path on the controller as it is.
//
// It fails with *HelperUnusable when the host is reachable but the helper
// cannot answer there (other architecture, glibc too old, libnvidia-ml
// missing, home not writable); the reason is remembered in memo (may be
// nil). Transport errors are returned as they are.
func Helper(run Runner, host string, bin *HelperBinary, memo FallbackMemo, local bool) Source {
	return &helperSource{run: run, host: host, bin: bin, memo: memo, local: local}
}

type helperSource struct {
	run   Runner
	host  string
	bin   *HelperBinary
	memo  FallbackMemo
	local bool
}

// Remote paths. $HOME is the login user's home on the host.
func (h *helperSource) remotePath() string { return "$HOME/.cache/gssh/helper-" + h.bin.SHA256 }

// runScript runs the helper (with args, "" or " -watch 2s") if present;
// else prints a marker with the host's architecture so gssh can decide
// whether to push.
func (h *helperSource) runScript(args string) string {
	if h.local {
		return "exec " + shellescape.Quote(h.bin.Path) + args
	}
	f := h.remotePath()
	return `f="` + f + `"; if [ -x "$f" ]; then exec "$f"` + args + `; fi; echo "@@gssh helper-missing arch=$(uname -m)@@"`
}

// pushScript writes stdin to the helper path atomically, refusing a copy
// whose hash is not the expected one.
func (h *helperSource) pushScript() string {
	return `d="$HOME/.cache/gssh" && mkdir -p "$d" && t=$(mktemp "$d/.helper-XXXXXX") && cat >"$t" &&
s=$(sha256sum "$t" | cut -d' ' -f1) && if [ "$s" = "` + h.bin.SHA256 + `" ]; then chmod 0755 "$t" && mv -f "$t" "$d/helper-` + h.bin.SHA256 + `"; else rm -f "$t"; echo "the copy has sha256 $s" >&2; exit 1; fi`
}

// verifyScript prints the sha256 of the copy on the host.
func (h *helperSource) verifyScript() string {
	return `sha256sum "` + h.remotePath() + `" | cut -d' ' -f1`
}

func (h *helperSource) unusable(reason string, ttl time.Duration) error {
	if h.memo != nil {
		h.memo.Put(h.host, h.bin.SHA256, reason, ttl)
	}
	return &HelperUnusable{Reason: reason}
}

func (h *helperSource) Snapshot(ctx context.Context) (Snapshot, error) {
	if h.memo != nil {
		if why, ok := h.memo.Get(h.host, h.bin.SHA256); ok {
			return Snapshot{}, &HelperUnusable{Reason: why}
		}
	}
	pushed := false
	for {
		res, err := runEnding(ctx, h.run, h.host, h.runScript(""))
		var xe *sshexec.ExitError
		if err != nil && !errors.As(err, &xe) {
			return Snapshot{Host: h.host, State: TransportState(err), Error: err.Error()}, err
		}
		out := bytes.TrimSpace(res.Stdout)
		if arch, ok := missingMarker(out); ok && err == nil {
			if pushed {
				return Snapshot{}, h.unusable("the helper was pushed but is not there to run (is $HOME/.cache/gssh on a noexec or vanishing filesystem?)", retryAfter)
			}
			if arch != h.bin.Arch {
				return Snapshot{}, h.unusable(fmt.Sprintf("the host is %s; this gssh-helper is built for %s", arch, h.bin.Arch), 0)
			}
			pctx, stop, err := h.push(ctx)
			if err != nil {
				return Snapshot{}, err
			}
			defer stop()
			pushed, ctx = true, pctx // the run after a push has the push's budget
			continue
		}
		doc, derr := decodeHelperDoc(out)
		if err == nil && derr == nil && doc.SHA256 == h.bin.SHA256 {
			return h.fromDoc(doc)
		}
		// The helper ran but did not answer: tell a damaged copy (push it
		// again, once) from a host where it cannot run.
		if !h.local && !pushed {
			if damaged, verr := h.damaged(ctx); verr != nil {
				return Snapshot{}, verr
			} else if damaged {
				pctx, stop, err := h.push(ctx)
				if err != nil {
					return Snapshot{}, err
				}
				defer stop()
				pushed, ctx = true, pctx
				continue
			}
		}
		return Snapshot{}, h.unusable(startFailure(res, err, derr), 0)
	}
}

// missingMarker reports whether out is the run script's "not there" marker,
// and the architecture it names.
func missingMarker(out []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(out, []byte("@@gssh helper-missing arch="))
	if !ok {
		return "", false
	}
	return string(bytes.TrimSuffix(rest, []byte("@@"))), true
}

// PushTimeout bounds pushing the helper to a host (and the run that
// follows), apart from the probe's own deadline: a push happens once per
// host and helper, and copying a few MB to many hosts at once can take
// longer than a probe may. Ctrl-C still stops it.
const PushTimeout = 2 * time.Minute

// push copies the helper to the host. It returns the context the push ran
// under, for the run that follows, and the function that releases it.
func (h *helperSource) push(ctx context.Context) (context.Context, func(), error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PushTimeout)
	stopAfter := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel() // interrupted, not out of time
		}
	})
	stop := func() { stopAfter(); cancel() }
	_, err := h.run.Run(pctx, h.host, h.pushScript(), bytes.NewReader(h.bin.Data))
	var xe *sshexec.ExitError
	switch {
	case err == nil:
		return pctx, stop, nil
	case errors.As(err, &xe):
		stop()
		why := lastTextLine(xe.Stderr) // the failing command speaks last; login shells may speak first
		if why == "" {
			why = xe.Error()
		}
		return nil, nil, h.unusable("cannot write the helper to ~/.cache/gssh on the host: "+why, retryAfter)
	}
	stop()
	return nil, nil, err
}

// damaged reports whether the copy on the host differs from the helper.
func (h *helperSource) damaged(ctx context.Context) (bool, error) {
	res, err := h.run.Run(ctx, h.host, h.verifyScript(), nil)
	var xe *sshexec.ExitError
	if err != nil && !errors.As(err, &xe) {
		return false, err
	}
	return strings.TrimSpace(string(res.Stdout)) != h.bin.SHA256, nil
}

// startFailure says why a helper with the right hash gave no document.
func startFailure(res sshexec.Result, err, derr error) string {
	stderr := string(res.Stderr)
	var xe *sshexec.ExitError
	if errors.As(err, &xe) {
		stderr = xe.Stderr
	}
	line := firstTextLine(stderr)
	switch {
	case strings.Contains(stderr, "GLIBC_"):
		return "the helper cannot start: the host's glibc is too old (" + line + ")"
	case xe != nil && xe.Code == 126, strings.Contains(stderr, "Exec format error"):
		return "the helper cannot execute on the host (" + cmp.Or(line, "exit 126") + ")"
	case xe != nil && xe.Code == 127:
		return "the helper cannot start: a library or the loader is missing (" + cmp.Or(line, "exit 127") + ")"
	case xe != nil:
		return fmt.Sprintf("the helper failed with exit status %d: %s", xe.Code, cmp.Or(line, "no message"))
	case derr != nil:
		return "the helper's output is not a gssh.helper/v1 document: " + derr.Error()
	}
	return "the helper reports another sha256 than its own: a stale copy"
}

func decodeHelperDoc(out []byte) (HelperDoc, error) {
	var doc HelperDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return doc, fmt.Errorf("decode: %w", err)
	}
	if doc.Schema != HelperSchema {
		return doc, fmt.Errorf("schema %q, want %q", doc.Schema, HelperSchema)
	}
	return doc, nil
}

// fromDoc turns the helper's document into a snapshot, or reports NVML as
// unusable on the host so nvidia-smi can say what is wrong.
func (h *helperSource) fromDoc(doc HelperDoc) (Snapshot, error) {
	if doc.InitCode != 0 || doc.InitError != "" {
		why := fmt.Sprintf("NVML init failed: %s (code %d)", doc.InitError, doc.InitCode)
		if doc.InitCode == nvmlErrorLibraryNotFound {
			// No driver, or libnvidia-ml.so.1 not loadable: it will not
			// appear by itself while this helper is current.
			why = "NVML not found on the host (libnvidia-ml.so.1 cannot be loaded: no NVIDIA driver?)"
			return Snapshot{}, h.unusable(why, 0)
		}
		return Snapshot{}, h.unusable(why, retryAfter)
	}
	s := Snapshot{Host: h.host, State: HostOK, Source: SourceNVML, Driver: doc.Driver, CUDA: doc.CUDA,
		Warnings: append([]string{}, doc.Warnings...), GPUs: doc.GPUs, ProcsBogus: doc.ProcsBogus, HostInfo: doc.HostInfo}
	if s.GPUs == nil {
		s.GPUs = []GPU{}
	}
	if len(s.GPUs) == 0 {
		s.State, s.Error = HostNoDevices, "NVML reports no GPU"
	}
	for _, g := range s.GPUs {
		if g.Health != HealthOK {
			s.State = HostDegraded
			s.Error = fmt.Sprintf("GPU %d %s: %s", g.Index, g.Health, g.HealthWhy)
			break
		}
	}
	return s, nil
}

// nvmlErrorLibraryNotFound is NVML_ERROR_LIBRARY_NOT_FOUND.
const nvmlErrorLibraryNotFound = 12

func lastTextLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func firstTextLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Fallback returns a Source that asks primary (the helper) and, when it is
// unusable on a reachable host, secondary (nvidia-smi), recording in
// SourceWhy why primary did not answer. When primary answered but its
// process records were bogus, the processes are taken from secondary.
// Transport failures of primary are returned as they are: secondary would
// not reach the host either.
func Fallback(primary, secondary Source) Source { return fallback{primary, secondary} }

type fallback struct{ primary, secondary Source }

func (f fallback) Snapshot(ctx context.Context) (Snapshot, error) {
	s, err := f.primary.Snapshot(ctx)
	var hu *HelperUnusable
	if errors.As(err, &hu) {
		s2, err2 := f.secondary.Snapshot(ctx)
		s2.SourceWhy = hu.Reason
		return s2, err2
	}
	if err != nil || !s.ProcsBogus {
		return s, err
	}
	s2, err2 := f.secondary.Snapshot(ctx)
	if err2 != nil {
		s.Warnings = append(s.Warnings, "NVML's process records were bogus and nvidia-smi could not list processes: "+err2.Error())
		return s, nil
	}
	byUUID := map[string]GPU{}
	for _, g := range s2.GPUs {
		if g.UUID != "" {
			byUUID[g.UUID] = g
		}
	}
	for i := range s.GPUs {
		if g, ok := byUUID[s.GPUs[i].UUID]; ok {
			s.GPUs[i].Procs, s.GPUs[i].ProcsKnown = g.Procs, g.ProcsKnown
		}
	}
	s.SourceWhy = "processes from nvidia-smi: NVML's process records were bogus"
	return s, nil
}
