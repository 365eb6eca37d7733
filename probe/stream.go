package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/units"
)

// StreamRunner is what a stream needs of sshexec: run a command on a host
// and hand its output on as it comes (sshexec.Pool and sshexec.Local).
type StreamRunner interface {
	Stream(ctx context.Context, host, cmd string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Streamer is the long-lived form of a probe: one command on the host
// that prints a snapshot every interval, in one session.
type Streamer interface {
	// Stream runs the command and calls frame with each snapshot, in
	// order, until ctx ends (it returns ctx's error), the command ends
	// or a frame cannot be used (an error saying why: the caller probes
	// once, with a Source, which deals with every case, and starts the
	// stream again), or no frame came within StallAfter(every) (an
	// error wrapping ErrStalled). Each snapshot is what the Source of the
	// same host would answer at that time.
	Stream(ctx context.Context, every time.Duration, frame func(Snapshot)) error
}

// ErrStalled wraps the error of a stream that printed nothing for
// StallAfter of its interval: a hung nvidia-smi or NVML, or a connection
// that no longer carries anything.
var ErrStalled = errors.New("the GPU stream stalled")

// ErrHelperMissing is a helper stream's error when the host has no copy
// of the helper: a probe (a Source's Snapshot) pushes it.
var ErrHelperMissing = errors.New("the helper is not on the host")

// ErrProcsBogus is a helper stream's error on a frame whose NVML process
// records are bogus: the process lists come from nvidia-smi on that host
// (SMIStream).
var ErrProcsBogus = errors.New("NVML's process records are bogus")

// StallAfter is how long a stream of interval every may print nothing
// before it counts as stalled: two intervals, and at least a second.
func StallAfter(every time.Duration) time.Duration { return max(2*every, time.Second) }

// firstFrameWithin bounds the wait for a stream's first frame: the
// command starts and reads the GPUs once, as a probe does.
const firstFrameWithin = 30 * time.Second

// maxFrame bounds one frame of output (a host of 8 GPUs with hundreds of
// processes prints some tens of KiB): a longer one ends the stream.
const maxFrame = 4 << 20

// HelperStream is the helper's stream on host: the copy on the host (or,
// with local, the controller's own gssh-helper) run with -watch, one
// gssh.helper/v1 document per line. A host without the copy is
// ErrHelperMissing; the helper unusable (NVML not found or failing, as a
// probe would find it; remembered in memo, may be nil, like a probe's) a
// *HelperUnusable; a frame whose process records are bogus ErrProcsBogus.
func HelperStream(run StreamRunner, host string, bin *HelperBinary, memo FallbackMemo, local bool) Streamer {
	return helperStream{&helperSource{host: host, bin: bin, memo: memo, local: local}, run}
}

type helperStream struct {
	h   *helperSource
	run StreamRunner
}

func (s helperStream) Stream(ctx context.Context, every time.Duration, frame func(Snapshot)) error {
	h := s.h
	if h.memo != nil {
		if why, ok := h.memo.Get(h.host, h.bin.SHA256); ok {
			return &HelperUnusable{Reason: why}
		}
	}
	return streamFrames(ctx, s.run, h.host, h.runScript(" -watch "+every.String()), every, bufio.ScanLines, func(b []byte) error {
		if _, ok := missingMarker(bytes.TrimSpace(b)); ok {
			return ErrHelperMissing
		}
		doc, err := decodeHelperDoc(b)
		if err != nil {
			return fmt.Errorf("the helper's stream: %w", err)
		}
		if doc.SHA256 != h.bin.SHA256 {
			return errors.New("the helper's stream: the helper reports another sha256 than its own")
		}
		snap, err := h.fromDoc(doc)
		if err != nil {
			return err
		}
		if snap.ProcsBogus {
			return ErrProcsBogus
		}
		frame(snap)
		return nil
	})
}

// SMIStream is nvidia-smi's stream on host: SMIScript's sections run
// again every interval in one shell, each frame ending with its end
// marker, asking --query-gpu for the fields memo (may be nil) says the
// host's nvidia-smi knows. A frame that rejects a field is an error
// wrapping *RejectedFieldError (a probe learns the fields); a frame
// whose output cannot be parsed ends the stream with ParseSMI's error.
// why, when set, is every snapshot's SourceWhy (why not the helper).
//
// (nvidia-smi's own loop, --query-gpu -lms, streams the GPU rows alone:
// the process list, the MIG devices and the host's memory have no loop
// of their own, and a row set carries no end, so a frame could not be
// told from the next. One shell running the probe's sections in a loop
// keeps one parser for probes and streams, each frame whole.)
func SMIStream(run StreamRunner, host string, memo FieldMemo, why string) Streamer {
	return smiStream{run: run, host: host, memo: memo, why: why}
}

type smiStream struct {
	run  StreamRunner
	host string
	memo FieldMemo
	why  string
}

func (s smiStream) Stream(ctx context.Context, every time.Duration, frame func(Snapshot)) error {
	all := strings.Split(smiGPUFields, ",")
	fields := all
	var missing []string
	if s.memo != nil {
		if known, ok := s.memo.Fields(s.host); ok {
			fields, missing = without(all, known.Missing...), known.Missing
		}
	}
	return streamFrames(ctx, s.run, s.host, smiLoop(fields, every), every, scanFrames, func(b []byte) error {
		snap, err := parseSMI(s.host, fields, b)
		var rej *RejectedFieldError
		switch {
		case errors.As(err, &rej):
			return err
		case err != nil && errors.Is(err, ErrUnparsable):
			return err
		}
		snap = withMissing(snap, missing)
		if s.why != "" && snap.SourceWhy == "" {
			snap.SourceWhy = s.why
		}
		frame(snap)
		return nil
	})
}

// smiLoop is SMIScript asking --query-gpu for fields, its sections run
// every interval (sleep takes whole or decimal seconds, as GNU, busybox
// and BSD sleep do) until the session ends (streamFrames ends it).
func smiLoop(fields []string, every time.Duration) string {
	script := smiScript(fields)
	head, body, _ := strings.Cut(script, "\nq host h\n")
	secs := strconv.FormatFloat(every.Seconds(), 'f', -1, 64)
	return head + "\nwhile :; do\nq host h\n" + strings.TrimSuffix(body, "\n") + "\nsleep " + secs + " || exit\ndone\n"
}

// scanFrames splits a stream of SMIScript outputs at their end markers.
func scanFrames(data []byte, atEOF bool) (int, []byte, error) {
	const end = "\n@@gssh end@@\n"
	if bytes.HasPrefix(data, []byte(end[1:])) {
		return len(end) - 1, data[:len(end)-1], nil // a frame with nothing before its end
	}
	if i := bytes.Index(data, []byte(end)); i >= 0 {
		return i + len(end), data[:i+len(end)], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), nil, fmt.Errorf("the stream ended in a frame: %q", clip(string(data)))
	}
	return 0, nil, nil
}

// streamFrames runs cmd on host, splitting its stdout with split and
// handing each piece to use, until ctx ends, the command ends, use fails
// or nothing came for StallAfter(every) (firstFrameWithin for the
// first). It returns once the command's session is closed; the command
// ends on the host with it (sshexec.EndWithSession), even when it hangs
// there.
func streamFrames(parent context.Context, run StreamRunner, host, cmd string, every time.Duration, split bufio.SplitFunc, use func([]byte) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var stalled atomic.Bool
	watchdog := time.AfterFunc(firstFrameWithin, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	stdin, release := sshexec.HeldStdin()
	defer release()
	go func() {
		err := run.Stream(ctx, host, sshexec.EndWithSession(cmd), stdin, pw, io.Discard) // its errors carry what it said on stderr
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 64<<10), maxFrame)
	sc.Split(split)
	frames := 0
	var useErr error
	for sc.Scan() {
		watchdog.Reset(StallAfter(every))
		if useErr = use(sc.Bytes()); useErr != nil {
			break
		}
		frames++
	}
	scanErr := sc.Err()
	cancel()
	pr.CloseWithError(errors.New("the stream's reader stopped"))
	runErr := <-done
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case useErr != nil:
		return useErr
	case stalled.Load():
		if frames == 0 {
			return fmt.Errorf("%s: %w: no frame within %s of its start", host, ErrStalled, firstFrameWithin)
		}
		return fmt.Errorf("%s: %w: no frame for %s after %d %s", host, ErrStalled, StallAfter(every), frames, units.Plural(frames, "frame", "frames"))
	case scanErr != nil && (runErr == io.EOF || !errors.Is(scanErr, runErr)):
		return fmt.Errorf("%s: the GPU stream: %w", host, scanErr)
	case runErr != io.EOF:
		return runErr
	}
	return fmt.Errorf("%s: the GPU stream ended after %d %s", host, frames, units.Plural(frames, "frame", "frames"))
}
