package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what gssh version prints: the build's version (the
// Makefile's -ldflags "-X main.version=...", `git describe`; for a `go
// install` build the module version), the Go toolchain it was built
// with, and the OS and architecture it runs on.
type versionInfo struct {
	Schema  string `json:"schema"`
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// buildVersion is main.version, or the module's version when the
// Makefile did not set it (`go install github.com/gssh/gssh/cmd/gssh@v1.2.0`).
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

func newVersionCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gssh's version, the Go it was built with, and its OS and architecture",
		Long: `Print the version of this gssh build (git describe of the source it was
built from, set by make), the Go toolchain that built it, and the OS and
architecture it runs on. Give it with any bug report.`,
		Example: `  gssh version
  gssh version --json | jq -r .version`,
		Annotations: exits(exitLineUsage),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionInfo{Schema: "gssh.version/v1", Version: buildVersion(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if asJSON {
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", b)
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "gssh %s (%s, %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "gssh.version/v1", version, go, os, arch}`)
	return cmd
}
