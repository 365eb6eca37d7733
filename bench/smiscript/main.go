// Command smiscript prints probe.SMIScript, so the fan-out benchmark can run
// exactly gssh's probe through pdsh and ssh.
package main

import (
	"io"
	"os"

	"github.com/gssh/gssh/probe"
)

func main() { io.WriteString(os.Stdout, probe.SMIScript) }
