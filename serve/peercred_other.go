//go:build !linux

package serve

import (
	"errors"
	"net"
)

// PeerOf is the process at c's other end: known on Linux only
// (SO_PEERCRED).
func PeerOf(c *net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("a unix socket peer's credentials are read on Linux only")
}
