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

type versionOptions struct {
	json bool
}

func newVersionCmd(a *app, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gssh's version, the Go it was built with, and its OS and architecture",
		Long: `Print the version of this gssh build (git describe of the source it was
built from, set by make), the Go toolchain that built it, and the OS and
architecture it runs on. Give it with any bug report.`,
		Example: `  gssh version
  gssh version --json | jq -r .version`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"schema": "gssh.version/v1", version, go, os, arch}`)
	return cmd
}

// versionRun is gssh version; see newVersionCmd.
func versionRun(a *app, opts *versionOptions) error {
	v := versionInfo{Schema: "gssh.version/v1", Version: buildVersion(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if opts.json {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "gssh %s (%s, %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
	return err
}
