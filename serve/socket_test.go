package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// server serves a fresh socket in a temporary directory until the test
// ends; it returns the socket's path, the wake channel and the refusals
// logged so far.
func server(t *testing.T, timeout time.Duration) (string, chan struct{}, func() []string) {
	t.Helper()
	return serverAt(t, filepath.Join(t.TempDir(), "state.db.sock"), timeout)
}

// serverAt is server with the socket at path.
func serverAt(t *testing.T, path string, timeout time.Duration) (string, chan struct{}, func() []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("left by someone"), 0o600); err != nil { // replaced whole
		t.Fatal(err)
	}
	l, err := Listen(path, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	wake := NewWake()
	var mu sync.Mutex
	var logged []string
	s := &Server{Wake: wake, Timeout: timeout, Log: func(line string) { mu.Lock(); logged = append(logged, line); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		l.Close()
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket file is left after Close: %v", err)
		}
	})
	return path, wake, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), logged...) }
}

// raw sends what to the server at path and returns its answer.
func raw(t *testing.T, path, what string) Answer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go c.Write([]byte(what)) // a server that refuses a long request stops reading it: the rest fails to go
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer to %.40q: %v", what, err)
	}
	var a Answer
	if err := json.Unmarshal(line, &a); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	return a
}

func TestWake(t *testing.T) {
	path, wake, _ := server(t, 0)
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket file: %v, %v; want a socket of mode 0660", fi.Mode(), err)
	}
	for range 3 {
		if err := Wake(context.Background(), path, os.Getuid()); err != nil {
			t.Fatal(err)
		}
	}
	if len(wake) != 1 {
		t.Errorf("%d wakes waiting after three, want 1 (coalesced)", len(wake))
	}
	p, err := Holder(context.Background(), path)
	if err != nil || p.PID != os.Getpid() || p.UID != os.Getuid() {
		t.Errorf("Holder = %+v, %v; want this process (pid %d, uid %d)", p, err, os.Getpid(), os.Getuid())
	}
	err = Wake(context.Background(), path, os.Getuid()+1)
	if err == nil || !strings.Contains(err.Error(), "not used") {
		t.Errorf("a server of another uid than the one expected: %v, want refused", err)
	}
}

// TestBadClients: garbage, an unknown op, an oversized request, a client
// that goes away mid-request and one that sends nothing: each is refused
// or dropped, and the server answers the next client at once.
func TestBadClients(t *testing.T) {
	path, wake, logged := server(t, 300*time.Millisecond)
	for _, c := range []struct{ send, want string }{
		{"hello\n", "not a JSON line"},
		{`{"op": "wake"} junk` + "\n", "more after the request"},
		{`{"op": "wake", "user": "root"}` + "\n", "not a JSON line"}, // no claims: unknown fields are refused
		{`{"op": "submit"}` + "\n", `unknown op "submit"`},
		{strings.Repeat("x", 3*MaxRequest), fmt.Sprintf("longer than %d bytes", MaxRequest)},
	} {
		a := raw(t, path, c.send)
		if a.OK || a.Error == nil || !strings.Contains(a.Error.Message, c.want) {
			t.Errorf("%.40q: answer %+v, want an error saying %q", c.send, a, c.want)
		}
	}
	// Dialled after the others (whose refusals come first, however slow
	// the machine): it says nothing, for longer than the timeout.
	hung, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	half, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	half.Write([]byte(`{"op":`))
	half.Close()
	start := time.Now()
	if err := Wake(context.Background(), path, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("a wake beside a hung client took %v", d)
	}
	if len(wake) != 1 {
		t.Error("the wake after the bad clients did not reach the loop")
	}
	hung.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(hung).ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), "no request within 300ms: dropped") {
		t.Errorf("the silent client got %q, %v; want a refusal once the timeout passed", line, err)
	}
	// Seven refusals within a second: the first is logged, the others
	// counted, and said with the next one logged.
	if got := logged(); len(got) != 1 || !strings.Contains(got[0], "not a JSON line") {
		t.Errorf("refusals logged: %q; want the first alone (one a second)", got)
	}
	time.Sleep(time.Second)
	raw(t, path, "again\n")
	if got := logged(); len(got) != 2 || !strings.Contains(got[1], "(and 6 more refused since the last said)") {
		t.Errorf("refusals logged: %q; want the second to count those not said", got)
	}
}

// TestPeerLimit: one uid's connections beyond MaxPeerConns are refused
// at once as busy, and a client tries again until it gets through.
func TestPeerLimit(t *testing.T) {
	path, wake, _ := server(t, 0)
	var idle []net.Conn
	for range MaxPeerConns {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	time.Sleep(50 * time.Millisecond) // accepted and counted
	a := raw(t, path, `{"op": "wake"}`+"\n")
	if a.Error == nil || a.Error.Kind != KindBusy || !strings.Contains(a.Error.Message, fmt.Sprintf("has %d connections open that sent no request yet", MaxPeerConns)) {
		t.Errorf("a wake beside %d idle connections of its uid: %+v; want refused at once, busy", MaxPeerConns, a)
	}
	woke := make(chan error, 1)
	go func() { woke <- Wake(context.Background(), path, os.Getuid()) }()
	time.Sleep(100 * time.Millisecond)
	for _, c := range idle {
		c.Close()
	}
	if err := <-woke; err != nil || len(wake) != 1 {
		t.Errorf("a wake tried again until they closed: %v", err)
	}
}

// TestListenReplaces: what is at the socket's path is replaced (a
// directory moved aside, with what is in it), and Listen says what.
func TestListenReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	aside, _ := filepath.Glob(path + ".untrusted-*")
	if !strings.HasPrefix(l.Replaced, "a directory (moved aside to "+path+".untrusted-") || len(aside) != 1 {
		t.Errorf("Replaced %q, %v aside; want the directory moved aside", l.Replaced, aside)
	}
	if _, err := os.Stat(filepath.Join(aside[0], "x")); err != nil {
		t.Errorf("what the directory held: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o600)
	l2, err := Listen(filepath.Join(dir, "f"), 0o600)
	if err != nil || l2.Replaced != "a regular file" {
		t.Fatalf("over a file: %v, %q", err, l2.Replaced)
	}
	l2.Close()
}

func TestNotServing(t *testing.T) {
	dir := t.TempDir()
	if err := Wake(context.Background(), filepath.Join(dir, "none.sock"), -1); !errors.Is(err, ErrNotServing) {
		t.Errorf("no socket: %v, want ErrNotServing", err)
	}
	// A socket left by a server that died: bound, nobody listening.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if err := Wake(context.Background(), stale, -1); !errors.Is(err, ErrNotServing) {
		t.Errorf("stale socket: %v, want ErrNotServing", err)
	}
	nl, err := Listen(stale, 0o600) // replaces it
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	go (&Server{Wake: NewWake()}).Serve(context.Background(), nl)
	if err := Wake(context.Background(), stale, os.Getuid()); err != nil {
		t.Errorf("after Listen over the stale socket: %v", err)
	}
}

// TestHandlers: an op's result and its error come back together, the
// error as the server's FaultOf made it; the peer is the kernel's; a
// client that gives up ends the handler's work.
func TestHandlers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ended := make(chan error, 1)
	s := &Server{Wake: NewWake(),
		Handlers: map[string]Handler{
			"echo": func(_ context.Context, p Peer, args json.RawMessage, _ func(any) error) (any, error) {
				var in struct{ N int }
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, err
				}
				out := map[string]int{"n": in.N * 2, "uid": p.UID}
				if in.N < 0 {
					return out, errors.New("negative")
				}
				return out, nil
			},
			"panic": func(context.Context, Peer, json.RawMessage, func(any) error) (any, error) { panic("bad index") },
			"slow": func(ctx context.Context, _ Peer, _ json.RawMessage, _ func(any) error) (any, error) {
				<-ctx.Done()
				ended <- ctx.Err()
				return nil, ctx.Err()
			},
		},
		FaultOf: func(err error) *Fault { return &Fault{Message: err.Error(), Code: 7, Kind: "test"} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, l)
	var got map[string]int
	if err := Call(ctx, path, os.Getuid(), "echo", map[string]int{"N": 21}, &got); err != nil || got["n"] != 42 || got["uid"] != os.Getuid() {
		t.Errorf("echo 21: %v, %v", got, err)
	}
	got = nil
	err = Call(ctx, path, os.Getuid(), "echo", map[string]int{"N": -1}, &got)
	var f *Fault
	if !errors.As(err, &f) || f.Code != 7 || f.Kind != "test" || f.Message != "negative" || got["n"] != -2 {
		t.Errorf("echo -1: %v, %+v; want the result and the fault together", got, err)
	}
	if err := Call(ctx, path, os.Getuid(), "panic", nil, nil); err == nil || !strings.Contains(err.Error(), "gssh serve failed answering panic: bad index") {
		t.Errorf("a handler's panic: %v", err)
	}
	err = Call(ctx, path, os.Getuid(), "nope", nil, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown op "nope": this gssh serve knows "echo", "panic", "pass", "slow", "wake"`) {
		t.Errorf("unknown op: %v", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer ccancel()
	if err := Call(cctx, path, os.Getuid(), "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a client that gave up: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the handler's work went on after its client went away")
	}
}

// TestDuplex: what the client of a duplex op sends after its request
// reaches the handler in order, a line too long ends it, the handler's
// sends reach the client meanwhile, and a client that goes away ends
// recv without cancelling the handler's context (the handler says what
// that means).
func TestDuplex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	gone := make(chan error, 1)
	s := &Server{Wake: NewWake(),
		Duplex: map[string]DuplexHandler{
			"echo": func(ctx context.Context, _ Peer, args json.RawMessage, send func(any) error, recv <-chan json.RawMessage) (any, error) {
				n := 0
				for line := range recv {
					var v struct{ S string }
					if err := json.Unmarshal(line, &v); err != nil {
						return nil, err
					}
					if v.S == "end" {
						return n, nil
					}
					n++
					if err := send(strings.ToUpper(v.S)); err != nil {
						return nil, err
					}
				}
				gone <- ctx.Err()
				return nil, errors.New("the client went away")
			},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, l)

	in := make(chan any)
	var got []string
	var n int
	errc := make(chan error, 1)
	go func() {
		errc <- Duplex(ctx, path, os.Getuid(), "echo", nil, &n, func(b json.RawMessage) error {
			var s string
			json.Unmarshal(b, &s)
			got = append(got, s)
			if len(got) < 3 {
				in <- map[string]string{"S": fmt.Sprint("x", len(got))}
			} else {
				in <- map[string]string{"S": "end"}
			}
			return nil
		}, in)
	}()
	in <- map[string]string{"S": "a"}
	if err := <-errc; err != nil || n != 3 || strings.Join(got, " ") != "A X1 X2" {
		t.Errorf("echo: %d %q, %v", n, got, err)
	}
	if err := Call(ctx, path, os.Getuid(), "nope", nil, nil); err == nil || !strings.Contains(err.Error(), `knows "echo", "pass", "wake"`) {
		t.Errorf("unknown op: %v", err)
	}

	// A client that goes away: recv ends, ctx stands.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(`{"op":"echo"}` + "\n" + `{"S":"b"}` + "\n"))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil || !strings.Contains(string(line), `"more":"B"`) {
		t.Errorf("the first answer: %q, %v", line, err)
	}
	c.Close()
	select {
	case err := <-gone:
		if err != nil {
			t.Errorf("the handler's context ended with its client: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("recv did not end with its client")
	}

	// A line after the request longer than MaxRequest ends recv too.
	c, err = net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(`{"op":"echo"}` + "\n" + strings.Repeat("x", 2*MaxRequest)))
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("recv did not end at a line too long")
	}
}
