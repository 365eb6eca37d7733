package fakelab

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/procinfo"
)

// Shim runs argv as a simulated host's nvidia-smi or gssh-helper when
// getenv says the process runs on a lab's host (LabVar and HostVar set)
// and argv[0]'s base name is "nvidia-smi", "gssh-helper" or "helper-*"
// (the name gssh pushes the helper under). It returns the exit status,
// and handled false when argv is none of these: the caller goes on as
// itself. The lab's sessions put a link named nvidia-smi to the shim's
// executable on their PATH; gssh pushes the same executable as its
// helper when the lab's GSSH_HELPER names it.
func Shim(argv []string, getenv func(string) string, stdout, stderr io.Writer) (code int, handled bool) {
	lab, host := getenv(LabVar), getenv(HostVar)
	if lab == "" || host == "" || len(argv) == 0 {
		return 0, false
	}
	base := filepath.Base(argv[0])
	smi := base == "nvidia-smi"
	if !smi && base != "gssh-helper" && !strings.HasPrefix(base, "helper-") {
		return 0, false
	}
	spec, err := readHost(lab, host)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", base, err)
		return 9, true // nvidia-smi's "cannot communicate with the driver"
	}
	procs := procinfo.NewFS("/proc")
	now := func() gpuinfo.HelperDoc {
		return spec.Doc(spec.Uses("/proc", lab, procs), procs, time.Now().Unix()/5)
	}
	if smi {
		return SMI(now(), argv[1:], stdout, stderr), true
	}
	return helper(argv[1:], now, stdout, stderr), true
}

// helper answers gssh-helper's command line: -version, -watch D (one
// document per line every D until stdout is closed), -timeout (taken,
// unused: the model never hangs).
func helper(args []string, now func() gpuinfo.HelperDoc, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gssh-helper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Bool("version", false, "print the document schema and exit")
	fs.Duration("timeout", 30*time.Second, "give up on NVML after this long")
	watch := fs.Duration("watch", 0, "print a document every this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, gpuinfo.HelperSchema)
		return 0
	}
	sum := ""
	if b, err := os.ReadFile("/proc/self/exe"); err == nil {
		h := sha256.Sum256(b)
		sum = hex.EncodeToString(h[:])
	}
	enc := json.NewEncoder(stdout)
	for {
		doc := now()
		doc.SHA256 = sum
		var hw []string
		doc.HostInfo, hw = gpuinfo.ReadHostInfo("/proc", "/sys")
		doc.Warnings = append(doc.Warnings, hw...)
		if err := enc.Encode(doc); err != nil {
			if *watch != 0 {
				return 0
			}
			return 1
		}
		if *watch == 0 {
			return 0
		}
		time.Sleep(max(*watch, 100*time.Millisecond))
	}
}

// labFile is the lab's description in its directory, which the shim reads.
const labFile = "lab.json"

type labDoc struct {
	Hosts []HostSpec `json:"hosts"`
}

// readHost reads host's spec from the lab's lab.json.
func readHost(lab, host string) (HostSpec, error) {
	b, err := os.ReadFile(filepath.Join(lab, labFile))
	if err != nil {
		return HostSpec{}, fmt.Errorf("the simulated lab is gone: %w", err)
	}
	var d labDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return HostSpec{}, fmt.Errorf("%s: %w", filepath.Join(lab, labFile), err)
	}
	for _, h := range d.Hosts {
		if h.Name == host {
			return h, nil
		}
	}
	return HostSpec{}, fmt.Errorf("host %s is not in the simulated lab %s", host, lab)
}
