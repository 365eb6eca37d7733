// Command gssh-helper prints one gssh.helper/v1 JSON document describing
// this host's GPUs as NVML sees them, whatever happened: a host without a
// driver gets a document with init_code 12 (NVML_ERROR_LIBRARY_NOT_FOUND).
// It exits 0, or 1 when it cannot write the document.
//
// With -watch D it keeps going: one document per line every D (at least
// 100ms), each a fresh read of NVML and the host, until its output is
// closed (the SSH session that reads it ended: the write fails and it
// exits 0) or NVML hangs (it prints the timeout document and exits 1, so
// that the reader starts it again). gssh serve reads GPU state this way,
// one long-lived session per host.
//
// A hung driver must not leave the helper hanging: when NVML has not
// answered within -timeout (default 30s) it prints a document with
// init_code 10 (NVML_ERROR_TIMEOUT) and exits.
//
// Build it with cgo and lazy binding (never -z now, never -static):
//
//	CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -trimpath -ldflags '-s -w' ./cmd/gssh-helper
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/nvmlsnap"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole helper; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gssh-helper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Bool("version", false, "print the document schema ("+gpuinfo.HelperSchema+") and exit")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on NVML after this long (a hung driver)")
	watch := fs.Duration("watch", 0, "print a document every this long (at least 100ms), one per line, until stdout is closed; 0: once")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *watch != 0 && (*watch < minWatch || *watch > maxWatch) {
		fmt.Fprintf(stderr, "gssh-helper: -watch %v: give an interval from %v to %v\n", *watch, minWatch, maxWatch)
		return 2
	}
	if *version {
		if _, err := fmt.Fprintln(stdout, gpuinfo.HelperSchema); err != nil {
			return 1
		}
		return 0
	}
	sum, herr := fileSHA256("/proc/self/exe")
	lib := nvml.New()
	enc := json.NewEncoder(stdout)
	for {
		start := time.Now()
		doc := collect(lib, nvmlsnap.Self{SHA256: sum}, *timeout)
		if herr != nil {
			doc.Warnings = append(doc.Warnings, "helper sha256: "+herr.Error())
		}
		var hw []string
		doc.HostInfo, hw = gpuinfo.ReadHostInfo("/proc", "/sys")
		doc.Warnings = append(doc.Warnings, hw...)
		if err := enc.Encode(doc); err != nil {
			if *watch != 0 {
				return 0 // the reader went away
			}
			fmt.Fprintln(stderr, "gssh-helper: write:", err)
			return 1
		}
		switch {
		case *watch == 0:
			return 0
		case doc.InitCode == int(nvml.ERROR_TIMEOUT):
			return 1 // NVML hangs: the goroutine stuck in it would hold the next read
		}
		time.Sleep(*watch - time.Since(start))
	}
}

// The bounds of -watch.
const (
	minWatch = 100 * time.Millisecond
	maxWatch = time.Hour
)

// collect runs nvmlsnap.Collect, or gives up after timeout: the goroutine
// stuck in NVML then dies with the process.
func collect(lib nvml.Interface, self nvmlsnap.Self, timeout time.Duration) gpuinfo.HelperDoc {
	done := make(chan gpuinfo.HelperDoc, 1)
	go func() { done <- nvmlsnap.Collect(lib, nvmlsnap.NewProcFS("/proc"), self) }()
	select {
	case doc := <-done:
		return doc
	case <-time.After(timeout):
		return gpuinfo.HelperDoc{
			Schema: gpuinfo.HelperSchema, SHA256: self.SHA256,
			InitError: fmt.Sprintf("nvml did not answer within %v", timeout), InitCode: int(nvml.ERROR_TIMEOUT),
			GPUs: []gpuinfo.GPU{}, Warnings: []string{},
		}
	}
}

// fileSHA256 is the hex sha256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
