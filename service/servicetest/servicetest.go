// Package servicetest makes services for the tests of the packages
// above service (the HTTP API, the metrics): a personal queue over the
// local host "ctl", whose nvidia-smi is the fake replaying the a100x4
// fixture (GPUs 0-2 busy with other people's processes, GPU 3 idle), so
// that jobs really run, as local processes, with no SSH.
package servicetest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/service"
)

// Local is a service of user over the local host ctl (see the package
// comment), its state in a temporary directory; closed when t ends.
func Local(t testing.TB, user string) *service.Local {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "probe/testdata/fake-nvidia-smi"), filepath.Join(bin, "nvidia-smi")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin", "GSSH_FAKE_SMI_DIR=" + filepath.Join(root, "probe/testdata/fleet/a100x4"),
		launch.ClaimsDirEnv + "=" + filepath.Join(home, "claims")} // the test's own GPU claims, not the machine's
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "ctl", Local: true, ReservePct: 10}}}
	svc := service.New(service.Options{
		Fleet:     fleet.Options{Inventory: inv, Home: home, Environ: env, ConnectTimeout: 2 * time.Second},
		StatePath: filepath.Join(t.TempDir(), "state.db"), StateExplicit: true, User: user, Owner: user,
	})
	t.Cleanup(func() { svc.Close() })
	return svc
}
