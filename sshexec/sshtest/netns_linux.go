package sshtest

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// listenInNetNS listens on ip:0 inside the network namespace name
// (/run/netns/name): on an OS thread of its own, switched into the
// namespace for the socket() call and back before the thread is freed.
func listenInNetNS(tb testing.TB, name, ip string) (net.Listener, string, int) {
	tb.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// The thread goes back to the Go scheduler only if it is back in
		// its own namespace; otherwise it dies with this goroutine.
		self := filepath.Join("/proc/self/task", strconv.Itoa(unix.Gettid()), "ns/net")
		orig, err := os.Open(self)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer orig.Close()
		ns, err := os.Open(filepath.Join("/run/netns", name))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		tb.Fatalf("sshtest: listen in network namespace %s: %v", name, r.err)
	}
	host, port, _ := net.SplitHostPort(r.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	return r.ln, host, p
}
