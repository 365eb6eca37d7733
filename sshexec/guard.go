package sshexec

import "io"

// EndWithSession is cmd made to end on the host when its session ends,
// for a command that may hang there (nvidia-smi or NVML on a stuck GPU)
// and reads no stdin. Closing an SSH session does not stop its command
// (OpenSSH sends no SIGHUP without a terminal, refuses a signal request
// in some setups, and keeps the session, one of MaxSessions, while the
// command lives), so a command cut at its deadline would stay on the
// host, holding a session of the pooled connection each time. Here a
// watcher started first reads the session's stdin and, when it ends,
// kills the command's process group (`kill -9 0`: the group sshd or
// Local made for the session; a runner of its own must give the command
// a process group of its own too). The watcher holds none of the session's
// output (sshd closes a session once its output ends, and only then does
// the client learn the exit status). The command itself reads /dev/null.
//
// Run it with the stdin of HeldStdin, released once Run or Stream has
// returned: the stdin then ends when the caller gives up (the session
// closes) or after the command ended (nothing is left to kill).
func EndWithSession(cmd string) string {
	return "exec 3<&0; { cat <&3; kill -9 0; } >/dev/null 2>&1 & exec 3<&- </dev/null; " + cmd
}

// HeldStdin is a stdin that gives nothing and does not end until release
// is called (release may be called more than once).
func HeldStdin() (stdin io.Reader, release func()) {
	r, w := io.Pipe()
	return r, func() { w.Close() }
}
