package sshtest_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// canned answers "nvidia-smi" with a line, "drop" by losing the
// connection mid-command, and anything else with status 127.
func canned(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch cmd {
	case "nvidia-smi":
		fmt.Fprintln(stdout, "0, NVIDIA H200")
		return 0
	case "drop":
		fmt.Fprintln(stdout, "partial")
		return -1
	}
	fmt.Fprintf(stderr, "%s: not found\n", cmd)
	return 127
}

func newServer(t *testing.T, opt sshtest.ServerOptions) (*sshtest.Server, sshtest.Key) {
	key := sshtest.NewKey(t, "", "")
	opt.AuthorizedKeys = []ssh.PublicKey{key.Signer.PublicKey()}
	if opt.Exec == nil {
		opt.Exec = canned
	}
	return sshtest.NewServer(t, opt), key
}

func TestServer(t *testing.T) {
	s, key := newServer(t, sshtest.ServerOptions{ListenIP: "127.0.0.2"})
	if s.Host != "127.0.0.2" || s.Addr != fmt.Sprintf("127.0.0.2:%d", s.Port) {
		t.Errorf("Host %q, Port %d, Addr %q", s.Host, s.Port, s.Addr)
	}
	c := mustDial(t, s.Addr, "anyone", key, s.KnownHostsLine)
	if out, _, err := run(c, "nvidia-smi", ""); out != "0, NVIDIA H200\n" || err != nil {
		t.Errorf("nvidia-smi: got %q, %v", out, err)
	}
	if _, errOut, err := run(c, "rocm-smi", ""); exitStatus(err) != 127 || errOut != "rocm-smi: not found\n" {
		t.Errorf("rocm-smi: got stderr %q, %v; want exit status 127", errOut, err)
	}

	out, _, err := run(c, "drop", "")
	var missing *ssh.ExitMissingError
	if !errors.As(err, &missing) || out != "partial\n" {
		t.Errorf("drop: got %q, %v (%T); want \"partial\\n\" and *ssh.ExitMissingError", out, err, err)
	}
	if _, _, err := run(c, "nvidia-smi", ""); err != nil {
		t.Errorf("the connection should outlive a lost command: %v", err)
	}

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Setenv("LANG", "C"); err == nil {
		t.Error("env request accepted; sshd without AcceptEnv refuses it")
	}
	sess.Close()

	for i := range 2 {
		ok, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		if !ok || err != nil {
			t.Errorf("keepalive: %v, %v", ok, err)
		}
		if s.Keepalives() != i+1 {
			t.Errorf("Keepalives() = %d, want %d", s.Keepalives(), i+1)
		}
	}
	if ok, _, _ := c.SendRequest("other@example.com", true, nil); ok {
		t.Error("unknown global request answered with success")
	}
	if s.Conns() != 1 || s.Sessions() != 5 {
		t.Errorf("Conns() = %d, Sessions() = %d; want 1, 5", s.Conns(), s.Sessions())
	}
}

func TestServerDefaultExec(t *testing.T) {
	key := sshtest.NewKey(t, "", "")
	s := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}})
	if _, _, err := run(mustDial(t, s.Addr, "u", key, s.KnownHostsLine), "true", ""); exitStatus(err) != 127 {
		t.Errorf("got %v, want exit status 127", err)
	}
}

// TestServerHungCommand checks that an Exec blocked on stdin ends when the
// client gives up, so that Cleanup does not wait.
func TestServerHungCommand(t *testing.T) {
	ended := make(chan struct{})
	s, key := newServer(t, sshtest.ServerOptions{Exec: func(_ string, stdin io.Reader, _, _ io.Writer) int {
		defer close(ended)
		io.Copy(io.Discard, stdin)
		return 0
	}})
	c := mustDial(t, s.Addr, "u", key, s.KnownHostsLine)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.StdinPipe(); err != nil { // stdin stays open
		t.Fatal(err)
	}
	if err := sess.Start("hang"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
		t.Fatal("Exec ended while stdin was open")
	case <-time.After(100 * time.Millisecond):
	}
	c.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Exec still blocked 5s after the client closed")
	}
}

func TestServerDropConns(t *testing.T) {
	s, key := newServer(t, sshtest.ServerOptions{})
	c := mustDial(t, s.Addr, "u", key, s.KnownHostsLine)
	s.DropConns()
	waitErr(t, 5*time.Second, "client.Wait", c.Wait)
	c2 := mustDial(t, s.Addr, "u", key, s.KnownHostsLine)
	if out, _, err := run(c2, "nvidia-smi", ""); out == "" || err != nil {
		t.Errorf("after reconnect: %q, %v", out, err)
	}
	if s.Conns() != 2 {
		t.Errorf("Conns() = %d, want 2", s.Conns())
	}
}

func TestServerHandshakeDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	s, key := newServer(t, sshtest.ServerOptions{HandshakeDelay: delay})
	if err := handshake(t, s.Addr, 50*time.Millisecond); !isTimeout(err) {
		t.Errorf("handshake with a 50ms deadline: got %v, want a timeout", err)
	}
	start := time.Now()
	mustDial(t, s.Addr, "u", key, s.KnownHostsLine)
	if d := time.Since(start); d < delay {
		t.Errorf("dial took %v, want at least the %v delay", d, delay)
	}
}

func TestSilent(t *testing.T) {
	addr := sshtest.Silent(t)
	if err := handshake(t, addr, 100*time.Millisecond); !isTimeout(err) {
		t.Errorf("got %v, want a timeout", err)
	}
}

// handshake dials addr and runs the SSH handshake with a deadline.
func handshake(t *testing.T, addr string, deadline time.Duration) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(deadline))
	_, _, _, err = ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User:            "u",
		HostKeyCallback: ssh.FixedHostKey(sshtest.NewKey(t, "", "").Signer.PublicKey()),
	})
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestKnownHosts(t *testing.T) {
	dir := t.TempDir()
	s, key := newServer(t, sshtest.ServerOptions{})
	s2, _ := newServer(t, sshtest.ServerOptions{})
	if !strings.HasPrefix(s.KnownHostsLine, fmt.Sprintf("[127.0.0.1]:%d ", s.Port)) {
		t.Errorf("KnownHostsLine %q, want it to start with [127.0.0.1]:%d", s.KnownHostsLine, s.Port)
	}
	path := sshtest.KnownHosts(t, dir, s2.KnownHostsLine, s.KnownHostsLine)
	if other := sshtest.KnownHosts(t, dir); other == path || filepath.Dir(path) != dir {
		t.Errorf("paths %q and %q: want two files in %s", path, other, dir)
	}
	b, err := os.ReadFile(path)
	if want := s2.KnownHostsLine + "\n" + s.KnownHostsLine + "\n"; string(b) != want || err != nil {
		t.Errorf("file holds %q, %v; want %q", b, err, want)
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(key.Signer)}, HostKeyCallback: cb})
	if err != nil {
		t.Fatalf("dial with both servers' lines: %v", err)
	}
	c.Close()
}
