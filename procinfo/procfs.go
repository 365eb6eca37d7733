// Package procinfo reads what /proc says about a process: its name, owner,
// session, start time and gssh's marks in its environment. It has no cgo
// and no dependency beyond the standard library, so the helper (NVML's
// processes) and gssh demo's simulated GPUs share it.
package procinfo

import (
	"bufio"
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Source reads what the host allows about a pid. nvmlsnap.Collect asks it
// about every pid NVML reports; NewFS reads /proc, tests use a fake.
type Source interface {
	// Lookup returns what is known about pid, and false when the pid is
	// not there (exited, a zombie included, or in another pid namespace).
	Lookup(pid int) (Details, bool)
}

// Details is what /proc says about one process. A fact that could not
// be read is nil or "", never a zero.
type Details struct {
	// Name is argv[0] from /proc/PID/cmdline (what nvidia-smi shows as
	// process_name), or the kernel's comm (/proc/PID/status Name:) when
	// the command line is empty or unreadable.
	Name string
	// UID is the real uid (/proc/PID/status Uid:, first field).
	UID *int
	// User is UID's login name (getpwuid through os/user, else
	// /etc/passwd); "" when unknown.
	User string
	// SessionID is the session id (/proc/PID/stat field 6).
	SessionID *int
	// StartTicks is the start time in clock ticks since boot
	// (/proc/PID/stat field 22).
	StartTicks *int64
	// JobID, ClusterID and Attempt are GSSH_JOB_ID, GSSH_CLUSTER_ID and
	// GSSH_ATTEMPT from /proc/PID/environ; "" when unset or unreadable
	// (another user's process).
	JobID, ClusterID, Attempt string
	// EnvRead: /proc/PID/environ could be read, so empty JobID,
	// ClusterID and Attempt mean the process carries none of them.
	EnvRead bool
}

// The environment variables that mark a process as a gssh job's.
const (
	JobIDVar     = "GSSH_JOB_ID"
	ClusterIDVar = "GSSH_CLUSTER_ID"
	AttemptVar   = "GSSH_ATTEMPT"
)

// NewFS returns a Source that reads the proc filesystem mounted at root
// ("/proc" in the helper). User names come from os/user.LookupId, and from
// /etc/passwd when that fails.
func NewFS(root string) Source { return newProcFS(root, "/etc/passwd") }

func newProcFS(root, passwd string) *procFS {
	return &procFS{root: root, passwd: passwd, users: map[int]string{}}
}

type procFS struct {
	root   string
	passwd string

	mu    sync.Mutex
	users map[int]string // uid → name ("" for unknown), asked once each
}

func (p *procFS) Lookup(pid int) (Details, bool) {
	if pid <= 0 {
		return Details{}, false
	}
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	var d Details
	found := false
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		found = true
		d.Name, d.UID = parseStatus(b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
		if zombie(b) {
			return Details{}, false // it has exited: its memory and its environment are gone
		}
		found = true
		d.SessionID, d.StartTicks = parseStat(b)
	}
	if !found {
		return Details{}, false
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		if argv0, _, _ := bytes.Cut(b, []byte{0}); len(argv0) > 0 {
			d.Name = string(argv0)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		d.JobID, d.ClusterID, d.Attempt = envValue(b, JobIDVar), envValue(b, ClusterIDVar), envValue(b, AttemptVar)
		d.EnvRead = true
	}
	if d.UID != nil {
		d.User = p.userName(*d.UID)
	}
	return d, true
}

// parseStatus reads Name: and the real uid from /proc/PID/status.
func parseStatus(b []byte) (name string, uid *int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch key {
		case "Name":
			name = strings.TrimSpace(val)
		case "Uid":
			if f := strings.Fields(val); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					uid = &n
				}
			}
		}
	}
	return name, uid
}

// zombie reports whether /proc/PID/stat says the process has exited and
// waits to be reaped (state Z, or X: dead).
func zombie(b []byte) bool {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// parseStat reads the session id (field 6) and start time (field 22) from
// /proc/PID/stat. comm (field 2) may hold spaces and parentheses, so the
// fields are counted after the last ')'.
func parseStat(b []byte) (sid *int, start *int64) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, nil
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) > 6-3 {
		if n, err := strconv.Atoi(f[6-3]); err == nil {
			sid = &n
		}
	}
	if len(f) > 22-3 {
		if n, err := strconv.ParseInt(f[22-3], 10, 64); err == nil {
			start = &n
		}
	}
	return sid, start
}

// envValue finds key in a NUL-separated environment block.
func envValue(b []byte, key string) string {
	prefix := []byte(key + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v)
		}
	}
	return ""
}

// userName maps uid to a login name, once per uid.
func (p *procFS) userName(uid int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name, ok := p.users[uid]; ok {
		return name
	}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	} else {
		name = passwdName(p.passwd, uid)
	}
	p.users[uid] = name
	return name
}

// passwdName finds uid in a passwd(5) file; "" when it is not there.
func passwdName(path string, uid int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	want := strconv.Itoa(uid)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[2] == want && !strings.HasPrefix(f[0], "#") {
			return f[0]
		}
	}
	return ""
}
