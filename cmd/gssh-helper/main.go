// Command gssh-helper prints one gssh.helper/v1 JSON document describing
// this host's GPUs as NVML sees them, whatever happened: a host without a
// driver gets a document with init_code 12 (NVML_ERROR_LIBRARY_NOT_FOUND).
// It exits 0, or 1 when it cannot write the document.
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

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gssh/gssh/nvmlsnap"
	"github.com/gssh/gssh/probe"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole helper; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gssh-helper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Bool("version", false, "print the document schema ("+probe.HelperSchema+") and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		if _, err := fmt.Fprintln(stdout, probe.HelperSchema); err != nil {
			return 1
		}
		return 0
	}
	sum, herr := fileSHA256("/proc/self/exe")
	doc := nvmlsnap.Collect(nvml.New(), nvmlsnap.NewProcFS("/proc"), nvmlsnap.Self{SHA256: sum})
	if herr != nil {
		doc.Warnings = append(doc.Warnings, "helper sha256: "+herr.Error())
	}
	if err := json.NewEncoder(stdout).Encode(doc); err != nil {
		fmt.Fprintln(stderr, "gssh-helper: write:", err)
		return 1
	}
	return 0
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
