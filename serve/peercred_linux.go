package serve

import (
	"net"

	"golang.org/x/sys/unix"
)

// PeerOf is the process at c's other end, from the kernel (SO_PEERCRED):
// its credentials when it connected (or, for a client, when the server
// listened).
func PeerOf(c *net.UnixConn) (Peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	return Peer{UID: int(cred.Uid), PID: int(cred.Pid)}, nil
}
