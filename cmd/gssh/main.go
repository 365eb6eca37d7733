// Command gssh turns a handful of GPU servers reached over SSH into one
// shared view (and, later, one fair queue).
package main

import (
	"os"

	"github.com/gssh/gssh/fakelab"
)

func main() {
	// On a host of gssh demo's simulated lab, this binary is also that
	// host's nvidia-smi and gssh-helper.
	if code, ok := fakelab.Shim(os.Args, os.Getenv, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}
