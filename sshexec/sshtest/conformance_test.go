package sshtest_test

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gssh/gssh/sshexec/sshtest"
)

// host is what the conformance tests need from either fake host.
type host struct {
	addr, user, knownLine string
	stop                  func() // the host goes down
}

// hostKinds start a host accepting key, with a per-connection session cap
// (0 = default): the real sshd and the in-process server running /bin/sh.
var hostKinds = []struct {
	name  string
	start func(t *testing.T, key sshtest.Key, maxSessions int) host
}{
	{"sshd", func(t *testing.T, key sshtest.Key, maxSessions int) host {
		s := sshtest.StartSSHD(t, sshtest.SSHDOptions{AuthorizedKeys: []string{key.AuthorizedLine}, MaxSessions: maxSessions})
		return host{s.Addr, s.User, s.KnownHostsLine, s.Stop}
	}},
	{"server", func(t *testing.T, key sshtest.Key, maxSessions int) host {
		ctx, cancel := context.WithCancel(context.Background())
		s := sshtest.NewServer(t, sshtest.ServerOptions{
			AuthorizedKeys: []ssh.PublicKey{key.Signer.PublicKey()},
			Exec:           shellExec(ctx),
			MaxSessions:    maxSessions,
		})
		t.Cleanup(cancel) // runs before the server's Cleanup waits for Exec
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		return host{s.Addr, u.Username, s.KnownHostsLine, s.Close}
	}},
}

// TestConformance runs the same checks on both fake hosts, so that unit
// tests against NewServer hold against OpenSSH too.
func TestConformance(t *testing.T) {
	for _, kind := range hostKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("ExitStatus", func(t *testing.T) {
				key := sshtest.NewKey(t, "", "")
				h := kind.start(t, key, 0)
				c := mustDial(t, h.addr, h.user, key, h.knownLine)
				out, errOut, err := run(c, "echo hi; echo oops >&2; exit 7", "")
				if out != "hi\n" || errOut != "oops\n" || exitStatus(err) != 7 {
					t.Errorf("got stdout %q, stderr %q, err %v; want \"hi\\n\", \"oops\\n\", exit status 7", out, errOut, err)
				}
				out, _, err = run(c, "cat", "from stdin")
				if out != "from stdin" || err != nil {
					t.Errorf("cat: got %q, %v", out, err)
				}
			})
			t.Run("ConcurrentSessions", func(t *testing.T) {
				key := sshtest.NewKey(t, "", "")
				h := kind.start(t, key, 0)
				c := mustDial(t, h.addr, h.user, key, h.knownLine)
				var sessions []*ssh.Session
				for range 3 { // all open at once
					s, err := c.NewSession()
					if err != nil {
						t.Fatalf("NewSession: %v", err)
					}
					sessions = append(sessions, s)
				}
				var wg sync.WaitGroup
				for i, s := range sessions {
					wg.Go(func() {
						defer s.Close()
						out, err := s.Output(fmt.Sprintf("sleep 0.2; echo %d", i))
						if want := fmt.Sprintf("%d\n", i); string(out) != want || err != nil {
							t.Errorf("session %d: got %q, %v; want %q", i, out, err, want)
						}
					})
				}
				wg.Wait()
			})
			t.Run("MaxSessions", func(t *testing.T) {
				key := sshtest.NewKey(t, "", "")
				h := kind.start(t, key, 1)
				c := mustDial(t, h.addr, h.user, key, h.knownLine)
				first, err := c.NewSession()
				if err != nil {
					t.Fatalf("first session: %v", err)
				}
				_, err = c.NewSession()
				var oce *ssh.OpenChannelError
				if !errors.As(err, &oce) || oce.Reason != ssh.ConnectionFailed {
					t.Fatalf("second session: got %v (%T), want *ssh.OpenChannelError with reason ConnectionFailed", err, err)
				}
				first.Close()
				deadline := time.Now().Add(5 * time.Second)
				for { // the slot frees once the server has seen the close
					s, err := c.NewSession()
					if err == nil {
						s.Close()
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("session after closing the first: %v", err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
			t.Run("UnknownClientKey", func(t *testing.T) {
				h := kind.start(t, sshtest.NewKey(t, "", ""), 0)
				if c, err := dial(t, h.addr, h.user, sshtest.NewKey(t, "", ""), h.knownLine); err == nil {
					c.Close()
					t.Fatal("dial with an unauthorized key succeeded")
				}
			})
			t.Run("WrongHostKey", func(t *testing.T) {
				key := sshtest.NewKey(t, "", "")
				h := kind.start(t, key, 0)
				other := sshtest.NewKey(t, "", "").Signer.PublicKey()
				_, err := dial(t, h.addr, h.user, key, knownhosts.Line([]string{knownhosts.Normalize(h.addr)}, other))
				var ke *knownhosts.KeyError
				if !errors.As(err, &ke) || len(ke.Want) == 0 {
					t.Fatalf("got %v, want a *knownhosts.KeyError (mismatch)", err)
				}
			})
			t.Run("Stop", func(t *testing.T) {
				key := sshtest.NewKey(t, "", "")
				h := kind.start(t, key, 0)
				c := mustDial(t, h.addr, h.user, key, h.knownLine)
				s, err := c.NewSession()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Start("sleep 30"); err != nil {
					t.Fatal(err)
				}
				h.stop()
				h.stop() // idempotent
				if err := waitErr(t, 5*time.Second, "session.Wait", s.Wait); err == nil {
					t.Error("command in flight: got nil error after the host went down")
				}
				waitErr(t, 5*time.Second, "client.Wait", c.Wait)
				if c, err := dial(t, h.addr, h.user, key, h.knownLine); err == nil {
					c.Close()
					t.Fatal("dial after stop succeeded")
				}
			})
		})
	}
}
