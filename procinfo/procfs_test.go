package procinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakePid writes files (name → content) as root/PID/name; a nil content
// makes that entry a directory, so reading it fails as an unreadable file
// does (root may read any 0000 file).
func fakePid(t *testing.T, root string, pid int, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if b == nil {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stat is a /proc/PID/stat line for comm with session sid and start time.
func stat(pid int, comm string, sid int, start int64) []byte {
	// fields 3..52; 6 = session, 22 = starttime
	f := []string{"S", "1", strconv.Itoa(pid), strconv.Itoa(sid), "34816", "-1", "4194560", "2371", "0", "0", "0",
		"97", "12", "0", "0", "20", "0", "12", "0", strconv.FormatInt(start, 10), "13361037312", "121745"}
	for len(f) < 50 {
		f = append(f, "0")
	}
	return []byte(strconv.Itoa(pid) + " (" + comm + ") " + strings.Join(f, " ") + "\n")
}

func status(name string, uid int) []byte {
	return []byte("Name:\t" + name + "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t100\nPid:\t100\nPPid:\t1\n" +
		"Uid:\t" + strconv.Itoa(uid) + "\t" + strconv.Itoa(uid+1) + "\t" + strconv.Itoa(uid+2) + "\t" + strconv.Itoa(uid) + "\n" +
		"Gid:\t100\t100\t100\t100\n")
}

func TestProcFS(t *testing.T) {
	root := t.TempDir()
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\n#4243 is a comment\ngssh-test-alice:x:424242:100::/home/alice:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakePid(t, root, 100, map[string][]byte{
		"status":  status("my) (weird", 424242),
		"stat":    stat(100, "my) (weird) S 1", 4711, 987654321),
		"cmdline": []byte("/opt/conda/bin/python\x00train.py\x00--lr=0.1\x00"),
		"environ": []byte("HOME=/home/alice\x00XGSSH_JOB_ID=no\x00GSSH_JOB_ID=job-7f3a\x00PATH=/usr/bin\x00"),
	})
	fakePid(t, root, 200, map[string][]byte{ // another user's process: environ unreadable
		"status":  status("Xorg", 0),
		"stat":    stat(200, "Xorg", 200, 4242),
		"cmdline": nil,
		"environ": nil,
	})
	fakePid(t, root, 300, map[string][]byte{ // a kernel thread: empty cmdline; uid nobody knows
		"status":  status("kworker/0:1", 4244),
		"stat":    []byte("300 (kworker/0:1) I 2 0 0"),
		"cmdline": {},
	})
	p := newProcFS(root, passwd)

	d, ok := p.Lookup(100)
	want := Details{Name: "/opt/conda/bin/python", UID: ptr(424242), User: "gssh-test-alice",
		SessionID: ptr(4711), StartTicks: ptr(int64(987654321)), JobID: "job-7f3a", EnvRead: true}
	if !ok {
		t.Fatal("pid 100 not found")
	}
	sameJSON(t, "pid 100", d, want)

	d, ok = p.Lookup(200)
	sameJSON(t, "pid 200", d, Details{Name: "Xorg", UID: ptr(0), User: "root", SessionID: ptr(200), StartTicks: ptr(int64(4242))})
	if !ok {
		t.Error("pid 200 not found")
	}

	d, ok = p.Lookup(300)
	sameJSON(t, "pid 300", d, Details{Name: "kworker/0:1", UID: ptr(4244), SessionID: ptr(0)})
	if !ok {
		t.Error("pid 300 not found")
	}

	fakePid(t, root, 500, map[string][]byte{ // exited, not reaped yet
		"status":  status("python3", 424242),
		"stat":    []byte("500 (python3) Z 1 500 500 0 -1 4228108 152 0 0 0 0 0 0 0 20 0 1 0 777 0 0"),
		"environ": {},
	})
	for _, pid := range []int{400, 500, 0, -1} {
		if d, ok := p.Lookup(pid); ok || d != (Details{}) {
			t.Errorf("Lookup(%d) = %+v, %v; want nothing", pid, d, ok)
		}
	}
}

func TestProcFSUnreadableEnviron(t *testing.T) {
	root := t.TempDir()
	fakePid(t, root, 100, map[string][]byte{"status": status("python3", 1000), "stat": stat(100, "python3", 100, 5), "environ": []byte("GSSH_JOB_ID=x\x00")})
	if err := os.Chmod(filepath.Join(root, "100", "environ"), 0); err != nil {
		t.Fatal(err)
	}
	d, ok := newProcFS(root, "/nonexistent").Lookup(100)
	if !ok || d.SessionID == nil || d.Name != "python3" {
		t.Fatalf("got %+v, %v", d, ok)
	}
	if os.Geteuid() != 0 && (d.JobID != "" || d.EnvRead) {
		t.Errorf("job id %q (read: %v) from an unreadable environ", d.JobID, d.EnvRead)
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in         string
		sid        *int
		start      *int64
		wantAbsent bool
	}{
		{"1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", ptr(1), ptr(int64(5)), false},
		{"7 (a b) c)) S 0 7 99 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0", ptr(99), ptr(int64(12345)), false},
		{"7 (short) S 0 7 99", ptr(99), nil, false},
		{"garbage", nil, nil, true},
		{"", nil, nil, true},
	} {
		sid, start := parseStat([]byte(tc.in))
		sameJSON(t, tc.in, []any{sid, start}, []any{tc.sid, tc.start})
	}
}

// TestProcFSReal looks up a real child in the real /proc: its session, its
// start time and the GSSH_JOB_ID it was started with.
func TestProcFSReal(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here (CI, on linux, has one)")
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "GSSH_JOB_ID=real-job-1", "GSSH_CLUSTER_ID=c0ffee", "GSSH_ATTEMPT=3")
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var d Details
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var ok bool
		if d, ok = NewFS("/proc").Lookup(cmd.Process.Pid); !ok {
			t.Fatal("child not found")
		}
		if d.Name == "sleep" { // exec has replaced the forked image
			break
		}
	}
	if d.Name != "sleep" || d.UID == nil || *d.UID != os.Getuid() || d.SessionID == nil || d.StartTicks == nil || d.JobID != "real-job-1" || d.ClusterID != "c0ffee" || d.Attempt != "3" || !d.EnvRead {
		t.Errorf("got %+v", d)
	}
	if *d.UID == 0 && d.User != "root" {
		t.Errorf("uid 0 is %q", d.User)
	}
}

func ptr[T any](v T) *T { return &v }

// sameJSON fails when got and want render differently.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}
