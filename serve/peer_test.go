package serve

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/gssh/gssh/testenv"
)

// clientEnv makes this test binary a client (see TestMain): it sends a
// wake to the socket the variable names and prints the error, if any.
const clientEnv = "GSSH_SERVE_TEST_CLIENT"

func TestMain(m *testing.M) {
	if path := os.Getenv(clientEnv); path != "" {
		if err := Wake(context.Background(), path, -1); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUnknownUID: a peer is served whatever its uid, with an account on
// this host or none (one of a directory service, which a gssh built
// without cgo cannot look up): who reaches the socket is the file
// mode's to say.
func TestUnknownUID(t *testing.T) {
	testenv.NeedRoot(t, "the test runs a client as uids other than its own")
	dir, err := os.MkdirTemp("", "gssh-serve-") // traversable by the other uids (a t.TempDir's parent is 0700)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, wake, _ := serverIn(t, dir)
	os.Chmod(path, 0o666)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	known, _ := strconv.Atoi(nobody.Uid)
	unknown := 54321 // the first uid from it that has no account here
	for ; ; unknown++ {
		if _, err := user.LookupId(strconv.Itoa(unknown)); err != nil {
			break
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client") // where the other uids may run it (the build's directory is 0700)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(uid int) (string, error) {
		cmd := exec.Command(bin)
		cmd.Env = []string{clientEnv + "=" + path}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, uid := range []int{unknown, known} {
		if out, err := run(uid); err != nil {
			t.Errorf("uid %d: %v: %s", uid, err, out)
		}
		if len(wake) != 1 {
			t.Errorf("uid %d's wake did not reach the loop", uid)
		}
		<-wake
	}
}

// serverIn is server with the socket in dir.
func serverIn(t *testing.T, dir string) (string, chan struct{}, func() []string) {
	t.Helper()
	return serverAt(t, filepath.Join(dir, "state.db.sock"), 0)
}
