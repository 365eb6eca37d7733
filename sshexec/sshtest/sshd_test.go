package sshtest_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gssh/gssh/sshexec/sshtest"
)

func TestStartSSHDEnvironment(t *testing.T) {
	key := sshtest.NewKey(t, "", "")
	bin := t.TempDir()
	tool := "#!/bin/sh\necho fake-smi \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	tricky := `a "b" \c $HOME %h 'd' #e`
	s := sshtest.StartSSHD(t, sshtest.SSHDOptions{
		AuthorizedKeys: []string{key.AuthorizedLine},
		SetEnv:         map[string]string{"PATH": bin + ":/usr/bin:/bin", "TRICKY": tricky},
	})
	c := mustDial(t, s.Addr, s.User, key, s.KnownHostsLine)
	for cmd, want := range map[string]string{
		"nvidia-smi -L":        "fake-smi -L\n",
		`printf %s "$HOME"`:    s.Home,
		`printf %s "$TRICKY"`:  tricky,
		"id -un":               s.User + "\n",
		"touch ~/x && ls ~":    "x\n",
		`printf %s "$SSH_TTY"`: "",
		"echo $SSHTEST_SSHD":   s.Dir + "\n",
	} {
		out, errOut, err := run(c, cmd, "")
		if out != want || err != nil {
			t.Errorf("%s: got %q, %v (stderr %q); want %q", cmd, out, err, errOut, want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Home, "x")); err != nil {
		t.Errorf("HOME is not s.Home: %v", err)
	}
}

func TestStartSSHDHostKeyTypes(t *testing.T) {
	for kind, want := range map[string]string{"": ssh.KeyAlgoED25519, "ecdsa": ssh.KeyAlgoECDSA256, "rsa": ssh.KeyAlgoRSA} {
		t.Run(want, func(t *testing.T) {
			key := sshtest.NewKey(t, "", "")
			s := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}, HostKeyType: kind})
			if s.HostKey.Type() != want {
				t.Errorf("HostKey type %s, want %s", s.HostKey.Type(), want)
			}
			if out, _, err := run(mustDial(t, s.Addr, s.User, key, s.KnownHostsLine), "echo ok", ""); out != "ok\n" || err != nil {
				t.Errorf("got %q, %v", out, err)
			}
		})
	}
}

func TestStartSSHDExtraConfig(t *testing.T) {
	key := sshtest.NewKey(t, "", "")
	s := sshtest.StartSSHD(t, sshtest.SSHDOptions{
		AuthorizedKeys: []string{key.AuthorizedLine},
		ExtraConfig:    "ForceCommand echo forced",
	})
	if out, _, err := run(mustDial(t, s.Addr, s.User, key, s.KnownHostsLine), "echo asked", ""); out != "forced\n" || err != nil {
		t.Errorf("got %q, %v; want \"forced\\n\"", out, err)
	}
}

// TestStartSSHDStopKillsSessions checks that Stop leaves no process behind:
// neither one detached from its session with setsid, nor one whose exec
// request has just been accepted (sshd may not have exec'd it yet).
func TestStartSSHDStopKillsSessions(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc here (CI, on linux, has one)")
	}
	key := sshtest.NewKey(t, "", "")
	for i := range 10 {
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}})
		c := mustDial(t, s.Addr, s.User, key, s.KnownHostsLine)
		detached, inFlight := uniqueSleep(), uniqueSleep()
		if i == 0 {
			if _, errOut, err := run(c, "setsid -f sleep "+detached+" </dev/null >/dev/null 2>&1", ""); err != nil {
				t.Fatalf("start detached sleep: %v (%s)", err, errOut)
			}
			// setsid -f returns as it forks: the sleep may take a moment
			// to appear on a busy machine.
			for deadline := time.Now().Add(5 * time.Second); len(procsWith(detached)) == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("detached sleep not found before Stop: the check cannot work")
				}
			}
		}
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Start("sleep " + inFlight); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		deadline := time.Now().Add(2 * time.Second)
		for len(procsWith(detached))+len(procsWith(inFlight)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: processes left after Stop: %v %v", i, procsWith(detached), procsWith(inFlight))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// uniqueSleep is a sleep duration that no other process uses.
func uniqueSleep() string {
	return fmt.Sprintf("%d.%09d", 100+os.Getpid()%800, time.Now().UnixNano()%1e9)
}

// procsWith lists the live processes (not zombies) with arg on their
// command line.
func procsWith(arg string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []string
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte("\x00"+arg)) {
			found = append(found, filepath.Base(d))
		}
	}
	return found
}

// TestStartSSHDMany starts 32 servers, on as many loopback addresses, and
// runs a command on each (only 4 with -short).
func TestStartSSHDMany(t *testing.T) {
	const n = 32
	key := sshtest.NewKey(t, "", "")
	start := time.Now()
	var servers []*sshtest.SSHD
	for i := range n {
		ip := fmt.Sprintf("127.0.1.%d", i+1)
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: ip, AuthorizedKeys: []string{key.AuthorizedLine}})
		if s.Host != ip || !strings.HasPrefix(s.Addr, ip+":") {
			t.Fatalf("server %d: Host %q Addr %q, want IP %s", i, s.Host, s.Addr, ip)
		}
		servers = append(servers, s)
	}
	t.Logf("started %d sshd in %v", n, time.Since(start))
	if testing.Short() {
		servers = servers[:4]
	}
	start = time.Now()
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			c, err := dial(t, s.Addr, s.User, key, s.KnownHostsLine)
			if err != nil {
				t.Errorf("dial %s: %v", s.Addr, err)
				return
			}
			defer c.Close()
			if out, _, err := run(c, fmt.Sprintf("echo %d", i), ""); out != fmt.Sprintf("%d\n", i) || err != nil {
				t.Errorf("%s: got %q, %v", s.Addr, out, err)
			}
		})
	}
	wg.Wait()
	t.Logf("dialed %d and ran a command in %v", len(servers), time.Since(start))
}

func TestNewKeyPassphrase(t *testing.T) {
	dir := t.TempDir()
	plain, secret := sshtest.NewKey(t, dir, ""), sshtest.NewKey(t, dir, "s3cret")
	if plain.Path == secret.Path {
		t.Fatal("two keys in one dir share a path")
	}
	for _, k := range []sshtest.Key{plain, secret} {
		st, err := os.Stat(k.Path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", k.Path, st.Mode(), err)
		}
		pub, err := os.ReadFile(k.PubPath)
		if err != nil || !strings.HasPrefix(string(pub), k.AuthorizedLine+" ") {
			t.Errorf("%s: %q, %v; want it to start with %q", k.PubPath, pub, err, k.AuthorizedLine)
		}
	}
	pem, err := os.ReadFile(secret.Path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssh.ParsePrivateKey(pem); err == nil {
		t.Error("encrypted key parsed without a passphrase")
	}
	signer, err := ssh.ParsePrivateKeyWithPassphrase(pem, []byte("s3cret"))
	if err != nil || !bytes.Equal(signer.PublicKey().Marshal(), secret.Signer.PublicKey().Marshal()) {
		t.Errorf("parse with passphrase: %v, or the key differs from Signer", err)
	}
	// OpenSSH itself reads both files.
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen (openssh-client) is needed in CI: %v", err)
		}
		t.Skip("no ssh-keygen (with CI=true this fails instead)")
	}
	for _, k := range []struct {
		key  sshtest.Key
		pass string
	}{{plain, ""}, {secret, "s3cret"}} {
		out, err := exec.Command("ssh-keygen", "-y", "-P", k.pass, "-f", k.key.Path).CombinedOutput()
		if got := strings.Fields(string(out)); err != nil || len(got) < 2 || strings.Join(got[:2], " ") != k.key.AuthorizedLine {
			t.Errorf("ssh-keygen -y %s: %q, %v; want %q", k.key.Path, out, err, k.key.AuthorizedLine)
		}
	}
}

func TestRequireSSHD(t *testing.T) {
	if p := sshtest.RequireSSHD(t); !filepath.IsAbs(p) {
		t.Errorf("RequireSSHD = %q, want an absolute path", p)
	}
}

func BenchmarkStartSSHD(b *testing.B) {
	for b.Loop() {
		sshtest.StartSSHD(b, sshtest.SSHDOptions{})
	}
}
