package sshexec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshconfig"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/sshexec/sshtest"
)

// target builds resolved settings for a test server at addr.
func target(addr, user, key, knownHosts string) sshconfig.Settings {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return sshconfig.Settings{
		Alias: "h", HostName: host, Port: p, User: user,
		IdentityFiles: []string{key}, IdentitiesExplicit: true, IdentitiesOnly: true,
		UserKnownHostsFiles: []string{knownHosts}, StrictHostKeyChecking: "yes",
		ServerAliveCountMax: 3,
	}
}

func newPool(t *testing.T, hosts map[string]sshconfig.Settings, mod ...func(*sshexec.PoolOptions)) *sshexec.Pool {
	t.Helper()
	opt := sshexec.PoolOptions{
		Resolve: func(h string) (sshconfig.Settings, error) {
			s, ok := hosts[h]
			if !ok {
				return s, fmt.Errorf("%w %q", sshexec.ErrUnknownHost, h)
			}
			return s, nil
		},
		ConnectTimeout: 5 * time.Second,
	}
	for _, m := range mod {
		m(&opt)
	}
	p := sshexec.NewPool(opt)
	t.Cleanup(func() { p.Close() })
	return p
}

// conformance runs the same checks over any server that runs sh commands.
func conformance(t *testing.T, p *sshexec.Pool) {
	ctx := context.Background()
	t.Run("stdout and exit status", func(t *testing.T) {
		res, err := p.Run(ctx, "h", "echo hi; echo oops >&2; exit 7", nil)
		var xe *sshexec.ExitError
		if !errors.As(err, &xe) || xe.Code != 7 || xe.Stderr != "oops\n" || xe.Host != "h" {
			t.Fatalf("err = %#v", err)
		}
		if string(res.Stdout) != "hi\n" {
			t.Errorf("stdout %q", res.Stdout)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		res, err := p.Run(ctx, "h", "cat", strings.NewReader("payload\x00bytes"))
		if err != nil || string(res.Stdout) != "payload\x00bytes" {
			t.Fatalf("cat = %q, %v", res.Stdout, err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := p.Run(ctx, "h", fmt.Sprintf("echo %d", i), nil)
				if err == nil && string(res.Stdout) != fmt.Sprintf("%d\n", i) {
					err = fmt.Errorf("run %d got %q", i, res.Stdout)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("command timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Run(ctx, "h", "sleep 3", nil)
		if !errors.Is(err, sshexec.ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("timeout took %v", d)
		}
	})
	t.Run("unknown host", func(t *testing.T) {
		_, err := p.Run(ctx, "nope", "true", nil)
		if !errors.Is(err, sshexec.ErrUnknownHost) {
			t.Fatalf("err = %v", err)
		}
	})
}

func shExec(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := exec.Command("/bin/sh", "-c", cmd)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as sshd gives a session
	err := c.Run()
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		return xe.ExitCode()
	}
	if err != nil {
		return 255
	}
	return 0
}

func TestPoolInProcess(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "tester", key.Path, kh)})
	conformance(t, p)
	if n := srv.Conns(); n != 1 {
		t.Errorf("the pool opened %d connections, want 1 reused", n)
	}
}

// sshdPool is a pool whose host "h" is a real sshd started with opt
// (its AuthorizedKeys set to a key of the test's).
func sshdPool(t *testing.T, opt sshtest.SSHDOptions) *sshexec.Pool {
	sshtest.RequireSSHD(t)
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	opt.AuthorizedKeys = []string{key.AuthorizedLine}
	srv := sshtest.StartSSHD(t, opt)
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	return newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, srv.User, key.Path, kh)})
}

func TestPoolRealSSHD(t *testing.T) {
	conformance(t, sshdPool(t, sshtest.SSHDOptions{}))
}

// A hardened host allows one session per connection: extra commands queue
// on the pooled connection instead of failing.
func TestPoolMaxSessions(t *testing.T) {
	p := sshdPool(t, sshtest.SSHDOptions{MaxSessions: 1})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Run(context.Background(), "h", "sleep 0.1; echo "+strconv.Itoa(i), nil)
			if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				t.Errorf("run %d: %q %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
}

func TestPoolInProcessMaxSessions(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec, MaxSessions: 2})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "u", key.Path, kh)})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Run(context.Background(), "h", "sleep 0.05", nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if srv.Conns() != 1 {
		t.Errorf("conns = %d, want 1", srv.Conns())
	}
}

// A host key mismatch is not retried (no second dial) until
// RetryFatalAfter has passed or Forget is called; then a fixed known_hosts
// is read afresh and the host is reached.
func TestHostKeyMismatchNotRetriedUntilLater(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	other := sshtest.NewServer(t, sshtest.ServerOptions{Exec: shExec}) // another host key
	line := strings.Replace(other.KnownHostsLine, knownName(other.Addr), knownName(srv.Addr), 1)
	kh := sshtest.KnownHosts(t, dir, "# comment", line)
	now := time.Unix(1e9, 0)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "u", key.Path, kh)}, func(o *sshexec.PoolOptions) {
		o.Now = func() time.Time { return now }
	})
	_, err := p.Run(context.Background(), "h", "true", nil)
	if !errors.Is(err, sshexec.ErrHostKey) {
		t.Fatalf("err = %v, want ErrHostKey", err)
	}
	if !strings.Contains(err.Error(), kh+":2") {
		t.Errorf("error does not name the known_hosts line %s:2: %v", kh, err)
	}
	_, err2 := p.Run(context.Background(), "h", "true", nil)
	if !errors.Is(err2, sshexec.ErrHostKey) || srv.Conns() != 1 {
		t.Errorf("second run: %v, conns %d (a mismatch must not be retried)", err2, srv.Conns())
	}
	if sshexec.Reason(err) != "host key mismatch" {
		t.Errorf("reason %q", sshexec.Reason(err))
	}
	var e *sshexec.Error
	if !errors.As(err, &e) || e.Host != "h" || err.Error() != "h: host key mismatch: "+e.Detail || strings.Contains(e.Detail, "h: ") {
		t.Errorf("error %#v names the host %q more or less than once: %v", e, "h", err)
	}

	// The user fixes known_hosts: still the kept error within the window...
	if err := os.WriteFile(kh, []byte(srv.KnownHostsLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(sshexec.DefaultRetryFatalAfter - time.Second)
	if _, err := p.Run(context.Background(), "h", "true", nil); !errors.Is(err, sshexec.ErrHostKey) || srv.Conns() != 1 {
		t.Errorf("within the window: %v, conns %d", err, srv.Conns())
	}
	// ...and a fresh dial after it.
	now = now.Add(2 * time.Second)
	if _, err := p.Run(context.Background(), "h", "true", nil); err != nil || srv.Conns() != 2 {
		t.Errorf("after the window: %v, conns %d", err, srv.Conns())
	}

	// Forget does the same at once (after a reload).
	p2 := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "u", key.Path, sshtest.KnownHosts(t, t.TempDir(), line))})
	if _, err := p2.Run(context.Background(), "h", "true", nil); !errors.Is(err, sshexec.ErrHostKey) {
		t.Fatalf("p2: %v", err)
	}
	p2.Forget()
	if _, err := p2.Run(context.Background(), "h", "true", nil); !errors.Is(err, sshexec.ErrHostKey) || srv.Conns() != 4 {
		t.Errorf("after Forget: %v, conns %d (want a new dial)", err, srv.Conns())
	}
}

// A Ctrl-C while connecting is not a timeout: the error carries
// context.Canceled and no ErrTimeout.
func TestCancelWhileConnectingIsNotTimeout(t *testing.T) {
	addr := sshtest.Silent(t) // accepts, never speaks SSH
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	p := newPool(t, map[string]sshconfig.Settings{"h": target(addr, "u", key.Path, filepath.Join(dir, "kh"))})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := p.Run(ctx, "h", "true", nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, sshexec.ErrTimeout) || sshexec.Reason(err) == "timeout" {
		t.Errorf("err = %v (reason %q), want context.Canceled and no timeout", err, sshexec.Reason(err))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.Run(ctx, "h", "true", nil); !errors.Is(err, sshexec.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: err = %v, want ErrTimeout", err)
	}
}

func knownName(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "[" + host + "]:" + port
}

func TestUnknownHostKeyPolicies(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	kh := filepath.Join(dir, "ssh", "known_hosts") // does not exist yet
	s := target(srv.Addr, "u", key.Path, kh)

	_, err := newPool(t, map[string]sshconfig.Settings{"h": s}).Run(context.Background(), "h", "true", nil)
	if !errors.Is(err, sshexec.ErrUnknownHostKey) || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Fatalf("strict=yes: %v", err)
	}
	s.StrictHostKeyChecking = "accept-new"
	var warned []string
	_, err = newPool(t, map[string]sshconfig.Settings{"h": s}, func(o *sshexec.PoolOptions) {
		o.Warn = func(m string) { warned = append(warned, m) }
	}).Run(context.Background(), "h", "true", nil)
	if err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	b, _ := os.ReadFile(kh)
	if !strings.Contains(string(b), knownName(srv.Addr)) || len(warned) != 1 {
		t.Errorf("known_hosts %q, warnings %q", b, warned)
	}
	if fi, _ := os.Stat(kh); fi.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v", fi.Mode().Perm())
	}
	// Now the key is known: strict mode connects.
	s.StrictHostKeyChecking = "yes"
	if _, err := newPool(t, map[string]sshconfig.Settings{"h": s}).Run(context.Background(), "h", "true", nil); err != nil {
		t.Fatalf("after accept-new: %v", err)
	}
}

// known_hosts holds only the ed25519 key of a host that also offers ECDSA:
// the algorithms offered are limited to the known type, as OpenSSH does.
func TestHostKeyAlgorithmsLimitedToKnown(t *testing.T) {
	sshtest.RequireSSHD(t)
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	ecdsaKey := filepath.Join(dir, "ecdsa_host")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", ecdsaKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	// The ECDSA key comes first in sshd_config, so sshd would prefer it.
	srv := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}, ExtraConfig: "HostKey " + ecdsaKey + "\n"})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, srv.User, key.Path, kh)})
	if _, err := p.Run(context.Background(), "h", "true", nil); err != nil {
		t.Fatal(err)
	}
}

func TestAuthErrors(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"good", "bad", "enc"} {
		os.Mkdir(filepath.Join(dir, d), 0o700)
	}
	good := sshtest.NewKey(t, filepath.Join(dir, "good"), "")
	bad := sshtest.NewKey(t, filepath.Join(dir, "bad"), "")
	enc := sshtest.NewKey(t, filepath.Join(dir, "enc"), "s3cret")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{good.Signer.PublicKey(), enc.Signer.PublicKey()}, Exec: shExec})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	run := func(s sshconfig.Settings, sock string) error {
		_, err := newPool(t, map[string]sshconfig.Settings{"h": s}, func(o *sshexec.PoolOptions) { o.AgentSock = sock }).
			Run(context.Background(), "h", "true", nil)
		return err
	}
	if err := run(target(srv.Addr, "u", bad.Path, kh), ""); !errors.Is(err, sshexec.ErrAuth) || sshexec.Reason(err) != "auth failed" {
		t.Errorf("wrong key: %v", err)
	}
	err := run(target(srv.Addr, "u", enc.Path, kh), "")
	if !errors.Is(err, sshexec.ErrAuth) || !strings.Contains(err.Error(), "passphrase-protected") || !strings.Contains(err.Error(), "ssh-add") {
		t.Errorf("encrypted key without agent: %v", err)
	}
	if err := run(target(srv.Addr, "u", filepath.Join(dir, "missing"), kh), ""); !errors.Is(err, sshexec.ErrAuth) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing key: %v", err)
	}
	unreadable := filepath.Join(dir, "unreadable")
	os.WriteFile(unreadable, []byte("not a key"), 0o600)
	if err := run(target(srv.Addr, "u", unreadable, kh), ""); !errors.Is(err, sshexec.ErrAuth) || !strings.Contains(err.Error(), unreadable) {
		t.Errorf("garbage key: %v", err)
	}
	// The same encrypted key works through an agent that holds it.
	sock := startAgent(t, enc)
	if err := run(target(srv.Addr, "u", enc.Path, kh), sock); err != nil {
		t.Errorf("encrypted key via agent: %v", err)
	}
	// And an agent key alone works when identities are not restricted.
	s := target(srv.Addr, "u", filepath.Join(dir, "missing-default"), kh)
	s.IdentitiesExplicit, s.IdentitiesOnly = false, false
	if err := run(s, sock); err != nil {
		t.Errorf("agent key: %v", err)
	}
}

func startAgent(t *testing.T, k sshtest.Key) string {
	t.Helper()
	b, err := os.ReadFile(k.Path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKeyWithPassphrase(b, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(kr, c); c.Close() }()
		}
	}()
	return sock
}

func TestConnectFailures(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	kh := sshtest.KnownHosts(t, dir)
	silent := sshtest.Silent(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	s1 := target(silent, "u", key.Path, kh)
	s1.ConnectTimeout = 300 * time.Millisecond
	p := newPool(t, map[string]sshconfig.Settings{"silent": s1, "closed": target(closed, "u", key.Path, kh),
		"nxdomain": target("no-such-host.invalid:22", "u", key.Path, kh)})
	start := time.Now()
	_, err := p.Run(context.Background(), "silent", "true", nil)
	if !errors.Is(err, sshexec.ErrTimeout) || time.Since(start) > 15*time.Second { // well short of the TCP connect timeout
		t.Errorf("silent host: %v after %v", err, time.Since(start))
	}
	if _, err := p.Run(context.Background(), "closed", "true", nil); !errors.Is(err, sshexec.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("closed port: %v", err)
	}
	if _, err := p.Run(context.Background(), "nxdomain", "true", nil); !errors.Is(err, sshexec.ErrUnreachable) || !strings.Contains(err.Error(), "resolve") {
		t.Errorf("unresolvable: %v", err)
	}
	s := target(closed, "u", key.Path, kh)
	s.ProxyCommand = "nc %h %p"
	p2 := newPool(t, map[string]sshconfig.Settings{"pc": s})
	if _, err := p2.Run(context.Background(), "pc", "true", nil); !errors.Is(err, sshexec.ErrConfig) || !strings.Contains(err.Error(), "ProxyJump") {
		t.Errorf("ProxyCommand: %v", err)
	}
}

func TestKeepaliveAndRedial(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	s := target(srv.Addr, "u", key.Path, kh)
	s.ServerAliveInterval = 20 * time.Millisecond
	p := newPool(t, map[string]sshconfig.Settings{"h": s})
	if _, err := p.Run(context.Background(), "h", "true", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for srv.Keepalives() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.Keepalives() < 2 {
		t.Errorf("keepalives sent: %d", srv.Keepalives())
	}
	rtt, err := p.Ping(context.Background(), "h")
	if err != nil || rtt <= 0 {
		t.Errorf("ping = %v, %v", rtt, err)
	}
	// The server drops the connection: the next command redials.
	before := srv.Conns()
	srv.DropConns()
	time.Sleep(50 * time.Millisecond)
	t.Logf("conns before drop %d", before)
	if _, err := p.Run(context.Background(), "h", "echo again", nil); err != nil {
		t.Fatalf("after drop: %v", err)
	}
	if srv.Conns() != 2 {
		t.Errorf("conns = %d, want 2", srv.Conns())
	}
}

func TestNoExitStatusIsUnknownOutcome(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()},
		Exec: func(string, io.Reader, io.Writer, io.Writer) int { return -1 }})
	kh := sshtest.KnownHosts(t, dir, srv.KnownHostsLine)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "u", key.Path, kh)})
	_, err := p.Run(context.Background(), "h", "true", nil)
	var xe *sshexec.ExitError
	if !errors.Is(err, sshexec.ErrNoOutcome) || errors.As(err, &xe) {
		t.Errorf("err = %v, want ErrNoOutcome and no ExitError", err)
	}
}

// ProxyJump through a real sshd to another real sshd.
func TestProxyJump(t *testing.T) {
	sshtest.RequireSSHD(t)
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	jump := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}})
	dest := sshtest.StartSSHD(t, sshtest.SSHDOptions{ListenIP: "127.0.0.3", AuthorizedKeys: []string{key.AuthorizedLine}})
	kh := sshtest.KnownHosts(t, dir, jump.KnownHostsLine, dest.KnownHostsLine)
	s := target(dest.Addr, dest.User, key.Path, kh)
	hop := target(jump.Addr, jump.User, key.Path, kh)
	hop.Alias = "bastion"
	s.ProxyJump = []sshconfig.Settings{hop}
	p := newPool(t, map[string]sshconfig.Settings{"h": s})
	res, err := p.Run(context.Background(), "h", "echo $SSH_CONNECTION", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The destination sees the connection coming from the jump host's side.
	if f := strings.Fields(string(res.Stdout)); len(f) != 4 || f[2] != "127.0.0.3" {
		t.Errorf("SSH_CONNECTION = %q", res.Stdout)
	}
	// A dead jump host is reported as such.
	jump.Stop()
	p2 := newPool(t, map[string]sshconfig.Settings{"h": s})
	if _, err := p2.Run(context.Background(), "h", "true", nil); err == nil || !strings.Contains(err.Error(), "jump host 1 (bastion)") {
		t.Errorf("dead jump: %v", err)
	}
}

func TestLocal(t *testing.T) {
	ctx := context.Background()
	l := sshexec.Local{}
	res, err := l.Run(ctx, "ctl", "read x; echo got $x; echo e >&2; exit 3", bytes.NewBufferString("v\n"))
	var xe *sshexec.ExitError
	if !errors.As(err, &xe) || xe.Code != 3 || xe.Stderr != "e\n" || string(res.Stdout) != "got v\n" {
		t.Fatalf("res %q err %#v", res.Stdout, err)
	}
	_, err = l.Run(ctx, "ctl", "kill -TERM $$", nil)
	if !errors.As(err, &xe) || xe.Signal != "TERM" {
		t.Errorf("signal: %#v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.Run(tctx, "ctl", "sleep 30 & sleep 30; wait", nil)
	if !errors.Is(err, sshexec.ErrTimeout) || time.Since(start) > 20*time.Second { // the sleeps last 30 s
		t.Errorf("timeout: %v after %v", err, time.Since(start))
	}
}

func TestExitErrorMessageTruncated(t *testing.T) {
	e := &sshexec.ExitError{Host: "h", Code: 1, Stderr: strings.Repeat("x", 5000)}
	if len(e.Error()) > 600 || len(e.Stderr) != 5000 {
		t.Errorf("Error() is %d bytes; Stderr %d", len(e.Error()), len(e.Stderr))
	}
}

// Hashed known_hosts entries (HashKnownHosts yes) match, in [host]:port form.
func TestHashedKnownHosts(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	hashed := knownhosts.Line([]string{knownhosts.HashHostname(knownhosts.Normalize(srv.Addr))}, srv.HostKey)
	kh := sshtest.KnownHosts(t, dir, hashed)
	p := newPool(t, map[string]sshconfig.Settings{"h": target(srv.Addr, "u", key.Path, kh)})
	if _, err := p.Run(context.Background(), "h", "true", nil); err != nil {
		t.Fatal(err)
	}
}

// HostKeyAlias replaces the address in known_hosts look-ups.
func TestHostKeyAlias(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	srv := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	kh := sshtest.KnownHosts(t, dir, knownhosts.Line([]string{"gpu-alias"}, srv.HostKey))
	s := target(srv.Addr, "u", key.Path, kh)
	p := newPool(t, map[string]sshconfig.Settings{"h": s})
	if _, err := p.Run(context.Background(), "h", "true", nil); !errors.Is(err, sshexec.ErrUnknownHostKey) {
		t.Fatalf("without alias: %v", err)
	}
	s.HostKeyAlias = "gpu-alias"
	_, port, _ := net.SplitHostPort(srv.Addr)
	// OpenSSH looks the alias up with the port unless it is 22: [alias]:port.
	kh2 := sshtest.KnownHosts(t, dir, knownhosts.Line([]string{knownhosts.Normalize("gpu-alias:" + port)}, srv.HostKey))
	s.UserKnownHostsFiles = []string{kh2}
	p2 := newPool(t, map[string]sshconfig.Settings{"h": s})
	if _, err := p2.Run(context.Background(), "h", "true", nil); err != nil {
		t.Fatalf("with alias: %v", err)
	}
}

// Forget drops a connection whose settings changed (a reload gave the host
// another address or user) and keeps the others.
func TestForgetDropsChangedHosts(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	a := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	b := sshtest.NewServer(t, sshtest.ServerOptions{AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()}, Exec: shExec})
	kh := sshtest.KnownHosts(t, dir, a.KnownHostsLine, b.KnownHostsLine)
	hosts := map[string]sshconfig.Settings{"a": target(a.Addr, "u", key.Path, kh), "b": target(b.Addr, "u", key.Path, kh)}
	p := newPool(t, hosts)
	for _, h := range []string{"a", "b"} {
		if _, err := p.Run(context.Background(), h, "true", nil); err != nil {
			t.Fatal(err)
		}
	}
	s := hosts["b"]
	s.User = "v"
	hosts["b"] = s
	p.Forget()
	for _, h := range []string{"a", "b"} {
		if _, err := p.Run(context.Background(), h, "true", nil); err != nil {
			t.Fatal(err)
		}
	}
	if a.Conns() != 1 || b.Conns() != 2 {
		t.Errorf("conns a=%d (want 1, kept) b=%d (want 2, redialled)", a.Conns(), b.Conns())
	}
}

// A connect that timed out (a host that accepts TCP and never answers)
// is given again, without dialling, for RetryTimeoutAfter: a pass's poll
// and then its probe of a hung host cost one ConnectTimeout, not two.
func TestTimeoutNotRedialledAtOnce(t *testing.T) {
	addr := sshtest.Silent(t)
	dir := t.TempDir()
	key := sshtest.NewKey(t, dir, "")
	s := target(addr, "u", key.Path, filepath.Join(dir, "kh"))
	s.ConnectTimeout = 200 * time.Millisecond
	now := time.Unix(1e9, 0)
	p := newPool(t, map[string]sshconfig.Settings{"h": s}, func(o *sshexec.PoolOptions) { o.Now = func() time.Time { return now } })
	_, err := p.Run(context.Background(), "h", "true", nil)
	if !errors.Is(err, sshexec.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	now = now.Add(sshexec.DefaultRetryTimeoutAfter - time.Second)
	if _, err2 := p.Run(context.Background(), "h", "true", nil); err2 != err {
		t.Errorf("within the window: %v, want the kept error %v (no new dial)", err2, err)
	}
	now = now.Add(2 * time.Second)
	if _, err3 := p.Run(context.Background(), "h", "true", nil); err3 == err || !errors.Is(err3, sshexec.ErrTimeout) {
		t.Errorf("after the window: %v, want a new dial timing out", err3)
	}
}
