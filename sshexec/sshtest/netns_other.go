//go:build !linux

package sshtest

import (
	"net"
	"testing"
)

// listenInNetNS: network namespaces are Linux's; elsewhere a test that
// asks for one fails.
func listenInNetNS(tb testing.TB, name, _ string) (net.Listener, string, int) {
	tb.Helper()
	tb.Fatalf("sshtest: network namespace %s: only Linux has them", name)
	return nil, "", 0
}
