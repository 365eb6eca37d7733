package sshtest

import (
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// markerVar is set in every session of an SSHD to the server's Dir, so that
// Stop can find and kill what the sessions started, detached ones included.
const markerVar = "SSHTEST_SSHD"

// SSHD is a real OpenSSH sshd serving on a loopback TCP address. The test
// owns the listener; each accepted connection gets its own `sshd -i`.
type SSHD struct {
	Addr string // "127.0.0.1:PORT" (or the requested loopback IP)
	Host string
	Port int
	User string // the user running the test, the only one who can log in
	Dir  string // temp dir holding sshd_config, keys, home and log
	// Home is HOME in sessions: a fresh dir, unless SetEnv sets HOME. The
	// working directory stays the user's home from passwd.
	Home           string
	HostKey        ssh.PublicKey
	KnownHostsLine string // known_hosts line pinning HostKey for Addr
	LogPath        string // sshd's stderr (-e), logged by t.Log when the test failed

	sshd, config string
	ln           net.Listener
	log          *os.File
	wg           sync.WaitGroup // accept loop and one waiter per sshd

	mu       sync.Mutex
	stopped  bool
	accepted bool                     // some connection got an sshd
	procs    map[*os.Process]struct{} // live sshd -i processes, each leading a process group
}

// SSHDOptions configures StartSSHD.
type SSHDOptions struct {
	ListenIP       string   // default "127.0.0.1"; any 127.x.y.z works on Linux
	AuthorizedKeys []string // authorized_keys lines
	// SetEnv sets session variables through sshd_config's SetEnv
	// (OpenSSH >= 8.7), e.g. PATH with fake tools first. HOME defaults to
	// the server's Home. SSHTEST_SSHD is always set (to Dir): Stop uses it
	// to find the sessions' processes.
	SetEnv      map[string]string
	MaxSessions int    // sessions per connection; 0 = sshd's default (10)
	HostKeyType string // "ed25519" (default), "ecdsa" or "rsa"
	// NetNS is the name of a network namespace (`ip netns add NAME`:
	// /run/netns/NAME) to listen in, at ListenIP (an address of that
	// namespace); "" listens in the test's own. Only the listening socket
	// (and so every connection) is in it: the sshd and its sessions run
	// in the test's namespace, so cutting the namespace's link cuts the
	// host off while its jobs run on.
	NetNS string
	// ExtraConfig is appended to sshd_config. sshd keeps the first value
	// of most keywords, so it cannot override what the helper sets; use
	// it for other keywords and Match blocks.
	ExtraConfig string
}

// RequireSSHD returns the absolute path of sshd. It skips the test when
// sshd is missing, except when CI=true, where it fails the test instead.
func RequireSSHD(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("sshd")
	if err != nil {
		path = "/usr/sbin/sshd"
		if _, err = os.Stat(path); err != nil {
			path = ""
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("sshtest: sshd not found (CI=true, so no skip): apt-get install -y openssh-server")
		}
		tb.Skip("sshtest: sshd not found; apt-get install -y openssh-server to run this test")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatalf("sshtest: sshd path: %v", err)
	}
	return abs
}

// StartSSHD starts a real sshd on ListenIP:0 for the test's user. It skips
// the test if sshd is missing (see RequireSSHD) and stops the server at
// Cleanup, killing every process its sessions started.
func StartSSHD(tb testing.TB, opt SSHDOptions) *SSHD {
	tb.Helper()
	sshd := RequireSSHD(tb)
	if os.Geteuid() == 0 {
		// sshd as root needs its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			tb.Fatalf("sshtest: %v", err)
		}
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatalf("sshtest: current user: %v", err)
	}
	dir := tb.TempDir()
	s := &SSHD{
		User:    u.Username,
		Dir:     dir,
		Home:    filepath.Join(dir, "home"),
		LogPath: filepath.Join(dir, "sshd.log"),
		sshd:    sshd,
		config:  filepath.Join(dir, "sshd_config"),
		procs:   map[*os.Process]struct{}{},
	}
	if err := os.Mkdir(s.Home, 0o700); err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	if h, ok := opt.SetEnv["HOME"]; ok {
		s.Home = h
	}
	if _, ok := opt.SetEnv["GSSH_CLAIMS_DIR"]; !ok {
		// gssh's GPU claims of this server's sessions: the test's own,
		// never the machine's registry (launch.ClaimsDirEnv).
		opt.SetEnv = maps.Clone(opt.SetEnv)
		if opt.SetEnv == nil {
			opt.SetEnv = map[string]string{}
		}
		opt.SetEnv["GSSH_CLAIMS_DIR"] = filepath.Join(dir, "claims")
	}

	key, err := newHostKey(opt.HostKeyType)
	if err != nil {
		tb.Fatalf("sshtest: host key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(key, "sshtest host")
	if err != nil {
		tb.Fatalf("sshtest: marshal host key: %v", err)
	}
	if s.HostKey, err = ssh.NewPublicKey(key.Public()); err != nil {
		tb.Fatalf("sshtest: host key: %v", err)
	}
	writeFile(tb, filepath.Join(dir, "host_key"), string(pem.EncodeToMemory(block)), 0o600)
	writeFile(tb, filepath.Join(dir, "authorized_keys"), strings.Join(opt.AuthorizedKeys, "\n")+"\n", 0o600)
	cfg, err := sshdConfig(dir, s.Home, opt)
	if err != nil {
		tb.Fatalf("sshtest: sshd_config: %v", err)
	}
	writeFile(tb, s.config, cfg, 0o600)
	if s.log, err = os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	tb.Cleanup(func() { s.log.Close() }) // after the cleanup below: LIFO

	if opt.NetNS != "" {
		s.ln, s.Host, s.Port = listenInNetNS(tb, opt.NetNS, opt.ListenIP)
	} else {
		s.ln, s.Host, s.Port = listen(tb, opt.ListenIP)
	}
	s.Addr = s.ln.Addr().String()
	s.KnownHostsLine = knownHostsLine(s.Addr, s.HostKey)
	tb.Cleanup(func() {
		s.Stop()
		s.wg.Wait()
		if !tb.Failed() {
			return
		}
		if b, _ := os.ReadFile(s.LogPath); len(b) > 0 {
			tb.Logf("sshtest: sshd %s log:\n%s", s.Addr, b)
		}
	})
	s.wg.Add(1)
	go s.accept(tb)
	return s
}

// sshdConfig renders sshd_config for a server whose files lie in dir.
func sshdConfig(dir, home string, opt SSHDOptions) (string, error) {
	env := map[string]string{"HOME": home}
	maps.Copy(env, opt.SetEnv)
	env[markerVar] = dir
	var setenv []string
	for _, name := range slices.Sorted(maps.Keys(env)) {
		v := env[name]
		if name == "" || strings.ContainsAny(name, "=\r\n") || strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("SetEnv %q: invalid name or value", name)
		}
		setenv = append(setenv, quoteConfig(name+"="+v))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HostKey %s\n", quoteConfig(filepath.Join(dir, "host_key")))
	fmt.Fprintf(&b, "AuthorizedKeysFile %s\n", quoteConfig(filepath.Join(dir, "authorized_keys")))
	b.WriteString(`PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PrintMotd no
PrintLastLog no
LogLevel ERROR
Subsystem sftp internal-sftp
`)
	if opt.MaxSessions > 0 {
		fmt.Fprintf(&b, "MaxSessions %d\n", opt.MaxSessions)
	}
	// One line: sshd ignores SetEnv lines after the first.
	fmt.Fprintf(&b, "SetEnv %s\n", strings.Join(setenv, " "))
	if opt.ExtraConfig != "" {
		b.WriteString(opt.ExtraConfig + "\n")
	}
	return b.String(), nil
}

// quoteConfig quotes s as one sshd_config argument (OpenSSH's argv_split:
// double quotes, with backslash escaping '\' and '"').
func quoteConfig(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// accept hands each connection to a new sshd until the listener closes.
func (s *SSHD) accept(tb testing.TB) {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				tb.Errorf("sshtest: sshd %s: accept: %v", s.Addr, err)
			}
			return
		}
		if err := s.spawn(c); err != nil {
			tb.Errorf("sshtest: sshd %s: %v", s.Addr, err)
		}
	}
}

// spawn starts `sshd -i` on c, in its own process group.
func (s *SSHD) spawn(c net.Conn) error {
	f, err := c.(*net.TCPConn).File()
	c.Close()
	if err != nil {
		return fmt.Errorf("socket file: %w", err)
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(s.sshd, "-i", "-e", "-f", s.config)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, s.log
	setProcessGroup(cmd)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	s.accepted = true
	s.procs[cmd.Process] = struct{}{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		cmd.Wait() // killed or the client left; its log is in LogPath
		s.mu.Lock()
		delete(s.procs, cmd.Process)
		s.mu.Unlock()
	}()
	return nil
}

// Stop makes the host go down: it closes the listener, so new dials are
// refused, and kills the sshd of every live connection and every process
// the sessions started. It is idempotent; Cleanup calls it too.
func (s *SSHD) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true // no new sshd from here
	s.ln.Close()
	var leaders []int
	for p := range s.procs {
		leaders = append(leaders, p.Pid)
	}
	accepted := s.accepted
	s.mu.Unlock()
	if accepted {
		killAll(leaders, markerVar+"="+s.Dir)
	}
}
