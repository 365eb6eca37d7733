package main

import (
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// termModes are the modes of the terminal fd (before it is made raw), as
// SSH terminal modes (RFC 4254 8; IUTF8 from RFC 8160), so the job's
// remote terminal erases, interrupts and reads UTF-8 as this one does, as
// ssh -t passes them. Nil when fd is not a terminal.
func termModes(fd int) ssh.TerminalModes {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	m := ssh.TerminalModes{}
	for op, cc := range map[uint8]int{
		ssh.VINTR: unix.VINTR, ssh.VQUIT: unix.VQUIT, ssh.VERASE: unix.VERASE, ssh.VKILL: unix.VKILL,
		ssh.VEOF: unix.VEOF, ssh.VSTART: unix.VSTART, ssh.VSTOP: unix.VSTOP, ssh.VSUSP: unix.VSUSP,
		ssh.VWERASE: unix.VWERASE, ssh.VLNEXT: unix.VLNEXT, ssh.VREPRINT: unix.VREPRINT,
	} {
		m[op] = uint32(t.Cc[cc])
	}
	flag := func(op uint8, set uint32, bit uint32) {
		if set&bit != 0 {
			m[op] = 1
		} else {
			m[op] = 0
		}
	}
	flag(ssh.IUTF8, t.Iflag, unix.IUTF8)
	flag(ssh.ICRNL, t.Iflag, unix.ICRNL)
	flag(ssh.IXON, t.Iflag, unix.IXON)
	flag(ssh.IXANY, t.Iflag, unix.IXANY)
	flag(ssh.IMAXBEL, t.Iflag, unix.IMAXBEL)
	flag(ssh.OPOST, t.Oflag, unix.OPOST)
	flag(ssh.ONLCR, t.Oflag, unix.ONLCR)
	flag(ssh.ISIG, t.Lflag, unix.ISIG)
	flag(ssh.ICANON, t.Lflag, unix.ICANON)
	flag(ssh.IEXTEN, t.Lflag, unix.IEXTEN)
	flag(ssh.ECHO, t.Lflag, unix.ECHO)
	flag(ssh.ECHOE, t.Lflag, unix.ECHOE)
	flag(ssh.ECHOK, t.Lflag, unix.ECHOK)
	flag(ssh.ECHOCTL, t.Lflag, unix.ECHOCTL)
	flag(ssh.ECHOKE, t.Lflag, unix.ECHOKE)
	return m
}

// escapeReader passes a terminal's input through, watching for ssh's
// escape: "~." at the start of a line (after Enter, or first) calls
// detach and ends the input, "~~" sends one "~", "~?" calls help; a "~"
// before anything else is sent as it is. In raw mode Ctrl-C is only a
// byte for the job, so this is the way out of a job that does not
// answer.
type escapeReader struct {
	r      io.Reader
	detach func()
	help   func()

	mu      sync.Mutex
	started bool // a line has begun: not at its start
	tilde   bool // a "~" at the start of a line, waiting for the next byte
	done    bool
	buf     []byte
}

func (e *escapeReader) Read(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.done {
			return 0, io.EOF
		}
		if len(e.buf) == 0 {
			in := make([]byte, len(p))
			e.mu.Unlock()
			n, err := e.r.Read(in)
			e.mu.Lock()
			if n == 0 && err != nil {
				return 0, err
			}
			e.buf = e.filter(in[:n])
			if len(e.buf) == 0 {
				continue
			}
		}
		n := copy(p, e.buf)
		e.buf = e.buf[n:]
		return n, nil
	}
}

// filter applies the escapes to in and returns what goes to the job.
func (e *escapeReader) filter(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for _, b := range in {
		if e.done {
			break
		}
		switch {
		case e.tilde:
			e.tilde = false
			switch b {
			case '.':
				e.done = true
				e.detach()
				continue
			case '?':
				e.help()
				continue
			case '~':
				out = append(out, '~')
			default:
				out = append(out, '~', b)
			}
		case !e.started && b == '~':
			e.tilde = true
			continue
		default:
			out = append(out, b)
		}
		e.started = b != '\r' && b != '\n'
	}
	return out
}
