package sshconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func testEnv() Env {
	return Env{Home: "/home/me", LocalUser: "me", LocalHost: "box.example.org"}
}

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse(testEnv(), "cfg", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func defaultIdentities(home string) []string {
	var out []string
	for _, n := range []string{"id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"} {
		out = append(out, home+"/.ssh/"+n)
	}
	return out
}

// resolveCase resolves alias in config and compares one field of the result.
type resolveCase struct {
	name   string
	config string
	alias  string
	ov     Overrides
	get    func(Settings) any
	want   any
}

func runResolveCases(t *testing.T, cases []resolveCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := mustParse(t, tc.config).Resolve(tc.alias, tc.ov)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.get(s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

var (
	hostName   = func(s Settings) any { return s.HostName }
	port       = func(s Settings) any { return s.Port }
	userOf     = func(s Settings) any { return s.User }
	identities = func(s Settings) any { return s.IdentityFiles }
	explicit   = func(s Settings) any { return s.IdentitiesExplicit }
	proxyCmd   = func(s Settings) any { return s.ProxyCommand }
	knownHosts = func(s Settings) any { return s.UserKnownHostsFiles }
	strict     = func(s Settings) any { return s.StrictHostKeyChecking }
	jumps      = func(s Settings) any {
		var out []string
		for _, j := range s.ProxyJump {
			out = append(out, j.User+"@"+j.HostName+":"+strconv.Itoa(j.Port))
		}
		return out
	}
)

func TestDefaults(t *testing.T) {
	s, err := mustParse(t, "").Resolve("Gpu1", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Alias: "Gpu1", HostName: "gpu1", Port: 22, User: "me",
		IdentityFiles:         defaultIdentities("/home/me"),
		UserKnownHostsFiles:   []string{"/home/me/.ssh/known_hosts", "/home/me/.ssh/known_hosts2"},
		GlobalKnownHostsFiles: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
		StrictHostKeyChecking: "ask", ServerAliveCountMax: 3,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
}

func TestFirstValueWins(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{"specific block first", "Host 198.51.100.1\n Port 1234\nHost 198.51.100.*\n Port 5678\n", "198.51.100.1", Overrides{}, port, 1234},
		{"only the wildcard block", "Host 198.51.100.1\n Port 1234\nHost 198.51.100.*\n Port 5678\n", "198.51.100.2", Overrides{}, port, 5678},
		{"Host * first wins over later specific", "Host *\n User star\nHost a\n User a\n", "a", Overrides{}, userOf, "star"},
		{"top of file applies to all", "User top\nHost a\n User a\n", "a", Overrides{}, userOf, "top"},
		{"same key twice in a block", "Host a\n Port 1\n Port 2\n", "a", Overrides{}, port, 1},
		{"override wins", "Host a\n Port 1\n User u\n HostName h\n", "a", Overrides{Port: 9, User: "o", HostName: "o.example"}, func(s Settings) any { return []any{s.Port, s.User, s.HostName} }, []any{9, "o", "o.example"}},
		{"ConnectTimeout none leaves it unset", "Host a\n ConnectTimeout none\nHost *\n ConnectTimeout 1m30s\n", "a", Overrides{}, func(s Settings) any { return s.ConnectTimeout }, 90 * time.Second},
		{"ServerAliveInterval", "Host a\n ServerAliveInterval 1h\n ServerAliveCountMax 0\n", "a", Overrides{}, func(s Settings) any { return []any{s.ServerAliveInterval, s.ServerAliveCountMax} }, []any{time.Hour, 0}},
	})
}

func TestIdentityFiles(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{"all blocks in file order (033)", "Host *\n IdentityFile ~/.ssh/id_rsa\n\nHost foo\n IdentityFile ~/.ssh/bar\n", "foo", Overrides{}, identities, []string{"/home/me/.ssh/id_rsa", "/home/me/.ssh/bar"}},
		{"explicit", "Host foo\n IdentityFile ~/.ssh/bar\n", "foo", Overrides{}, explicit, true},
		{"duplicates dropped", "Host foo\n IdentityFile ~/.ssh/a\nHost *\n IdentityFile ~/.ssh/b\n IdentityFile ~/.ssh/a\n", "foo", Overrides{}, identities, []string{"/home/me/.ssh/a", "/home/me/.ssh/b"}},
		{"defaults when none", "Host foo\n User x\n", "bar", Overrides{}, identities, defaultIdentities("/home/me")},
		{"defaults are not explicit", "", "bar", Overrides{}, explicit, false},
		{"override first and kept twice", "Host foo\n IdentityFile ~/k\n", "foo", Overrides{IdentityFile: "~/k"}, identities, []string{"/home/me/k", "/home/me/k"}},
		{"override alone is explicit, no defaults", "", "foo", Overrides{IdentityFile: "/keys/k"}, func(s Settings) any { return []any{s.IdentityFiles, s.IdentitiesExplicit} }, []any{[]string{"/keys/k"}, true}},
		{"quoted path with spaces", "IdentityFile \"~/.ssh/my key\"\n", "x", Overrides{}, identities, []string{"/home/me/.ssh/my key"}},
		{"IdentitiesOnly", "Host x\n IdentitiesOnly Yes\n", "x", Overrides{}, func(s Settings) any { return s.IdentitiesOnly }, true},
		{"IdentityAgent expanded", "IdentityAgent ~/agent-%r.sock\n", "x", Overrides{}, func(s Settings) any { return s.IdentityAgent }, "/home/me/agent-me.sock"},
		{"IdentityAgent none kept", "IdentityAgent none\n", "x", Overrides{}, func(s Settings) any { return s.IdentityAgent }, "none"},
		{"IdentityAgent SSH_AUTH_SOCK is the default", "IdentityAgent SSH_AUTH_SOCK\n", "x", Overrides{}, func(s Settings) any { return s.IdentityAgent }, ""},
	})
}

func TestHostPatterns(t *testing.T) {
	cfg := "Host web* !web*.*\n Hostname %h.domain\n" +
		"Host gpu?? \n Port 2022\n" +
		"Host !only-negated\n User never\n" +
		"Host Mixed\n User mixed\n" +
		"Host a,b\n User comma\n" +
		"Host !proxy *\n ProxyCommand ssh -W %h:%p proxy\n"
	runResolveCases(t, []resolveCase{
		{"%h is the alias (038)", cfg, "web01", Overrides{}, hostName, "web01.domain"},
		{"negated pattern excludes (038)", cfg, "web01.domain", Overrides{}, hostName, "web01.domain"},
		{"? is one character", cfg, "gpu01", Overrides{}, port, 2022},
		{"? is not zero characters", cfg, "gpu1", Overrides{}, port, 22},
		{"only negated never matches", cfg, "anything", Overrides{}, userOf, "me"},
		{"Host is case-sensitive", cfg, "mixed", Overrides{}, userOf, "me"},
		{"Host matches the alias as written", cfg, "Mixed", Overrides{}, userOf, "mixed"},
		{"host name is lower-cased", cfg, "Mixed", Overrides{}, hostName, "mixed"},
		{"a comma is part of the pattern", cfg, "a", Overrides{}, userOf, "me"},
		{"negation first (039)", cfg, "proxy", Overrides{}, proxyCmd, ""},
		{"negation first, other host (039)", cfg, "gpu-node.example", Overrides{}, proxyCmd, "ssh -W gpu-node.example:22 proxy"},
	})
}

func TestMatch(t *testing.T) {
	cfg := `Host db1
  HostName db1.Internal
Match host *.internal
  User bob
  IdentityFile ~/.ssh/internal_key
Match originalhost APP
  Port 2200
Match user alice,!bob
  Port 2300
Match localuser me
  ServerAliveInterval 10
Match !localuser me
  ServerAliveInterval 99
Match host x.example exec "true"
  Port 9999
Match all
  StrictHostKeyChecking accept-new
`
	runResolveCases(t, []resolveCase{
		{"Match host sees HostName so far", cfg, "db1", Overrides{}, userOf, "bob"},
		{"Match host on the alias", cfg, "x.internal", Overrides{}, identities, []string{"/home/me/.ssh/internal_key"}},
		{"Match host does not bleed (037)", cfg, "other", Overrides{}, userOf, "me"},
		{"Match originalhost is case-insensitive", cfg, "app", Overrides{}, port, 2200},
		{"Match user sees the override", cfg, "x", Overrides{User: "alice"}, port, 2300},
		{"Match user negated", cfg, "db1", Overrides{}, port, 22},
		{"Match localuser", cfg, "x", Overrides{}, func(s Settings) any { return s.ServerAliveInterval }, 10 * time.Second},
		{"Match exec never applies", cfg, "x.example", Overrides{}, port, 22},
		{"Match all", cfg, "x", Overrides{}, strict, "accept-new"},
	})

	final := `Host web*
  HostName %h.Example.com
Match final host web01.example.com
  User finaluser
  IdentityFile ~/.ssh/final
Host web01.example.com
  Port 2201
Match canonical
  IdentityFile ~/.ssh/canon
Host *
  IdentityFile ~/.ssh/star
`
	runResolveCases(t, []resolveCase{
		{"final pass applies Match final", final, "web01", Overrides{}, userOf, "finaluser"},
		{"final pass: Host sees the host name", final, "web01", Overrides{}, port, 2201},
		{"final pass order", final, "web01", Overrides{}, identities, []string{"/home/me/.ssh/star", "/home/me/.ssh/final", "/home/me/.ssh/canon"}},
		{"final pass, Host web* matches the lower-cased name", final, "WEB01", Overrides{}, hostName, "web01"},
		{"Fedora: Match final all", "Match final all\n  User fedora\n", "x", Overrides{}, userOf, "fedora"},
	})
}

func TestProxy(t *testing.T) {
	cfg := `Host target
  HostName 192.0.2.50
  ProxyJump hop1,admin@hop2:2202
Host hop1
  HostName hop1.example
  User jumper
  ProxyJump edge
Host hop2
  HostName hop2.example
  Port 2200
  ProxyJump unused
  ProxyCommand unused
Host edge
  HostName edge.example
  Port 2022
Host uri
  ProxyJump ssh://u3@hop3:23,[2001:db8::1]:99
Host none
  ProxyJump none
  ProxyJump hop1
Host cmd-first
  ProxyCommand ssh -W %h:%p %r@gate # comment kept
  ProxyJump hop1
Host jump-first
  ProxyJump=hop2
  ProxyCommand nc %h %p
Host none-then-cmd
  ProxyJump none
  ProxyCommand nc %n %p %k %%
Host cmd-none
  ProxyCommand none
`
	runResolveCases(t, []resolveCase{
		{"chain in crossing order, first hop's own chain first", cfg, "target", Overrides{}, jumps, []string{"me@edge.example:2022", "jumper@hop1.example:22", "admin@hop2.example:2202"}},
		{"hop aliases", cfg, "target", Overrides{}, func(s Settings) any {
			var a []string
			for _, j := range s.ProxyJump {
				a = append(a, j.Alias)
			}
			return a
		}, []string{"edge", "hop1", "hop2"}},
		{"later hop's ProxyCommand is not used", cfg, "target", Overrides{}, func(s Settings) any { return s.ProxyJump[2].ProxyCommand }, ""},
		{"hop resolved alone keeps its own ProxyJump", cfg, "hop2", Overrides{}, jumps, []string{"me@unused:22"}},
		{"hop resolved alone keeps its chain", cfg, "hop1", Overrides{}, jumps, []string{"me@edge.example:2022"}},
		{"ssh:// and IPv6 hops", cfg, "uri", Overrides{}, jumps, []string{"u3@hop3:23", "me@2001:db8::1:99"}},
		{"ProxyJump none blocks a later ProxyJump", cfg, "none", Overrides{}, jumps, []string(nil)},
		{"ProxyCommand first wins, tokens expanded", cfg, "cmd-first", Overrides{}, func(s Settings) any { return []any{s.ProxyCommand, len(s.ProxyJump)} }, []any{"ssh -W cmd-first:22 me@gate # comment kept", 0}},
		{"ProxyJump first wins", cfg, "jump-first", Overrides{}, func(s Settings) any { return []any{s.ProxyCommand, len(s.ProxyJump)} }, []any{"", 2}},
		{"ProxyJump none then ProxyCommand (OpenSSH 9.2)", cfg, "none-then-cmd", Overrides{}, proxyCmd, "nc none-then-cmd 22 none-then-cmd %"},
		{"ProxyCommand none", cfg, "cmd-none", Overrides{}, proxyCmd, ""},
		{"target overrides do not reach hops", cfg, "target", Overrides{User: "cli", Port: 1}, jumps, []string{"me@edge.example:2022", "jumper@hop1.example:22", "admin@hop2.example:2202"}},
	})
}

func TestProxyJumpErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, alias, want string }{
		{"self through Host *", "Host *\n ProxyJump bastion\n", "web", "proxyjump loop: bastion -> bastion -> web"},
		{"mutual", "Host a\n ProxyJump b\nHost b\n ProxyJump a\n", "a", "proxyjump loop: a -> b -> a"},
		{"repeated hop", "Host t\n ProxyJump x,x\n", "t", "proxyjump loop: x -> x -> t"},
		{"bad hop config", "Host t\n ProxyJump j\nHost j\n Port abc\n", "t", `resolve t: jump host j: cfg:4: Port: bad port "abc": use a number from 1 to 65535`},
		{"bad ProxyJump value", "Host t\n ProxyJump a,:22\n", "t", `cfg:2: ProxyJump: "a,:22": empty host name; use [user@]host[:port] hops separated by commas, or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mustParse(t, tc.config).Resolve(tc.alias, Overrides{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("too deep", func(t *testing.T) {
		var b strings.Builder
		for i := 0; i < 20; i++ {
			b.WriteString("Host h" + strconv.Itoa(i) + "\n ProxyJump h" + strconv.Itoa(i+1) + "\n")
		}
		_, err := mustParse(t, b.String()).Resolve("h0", Overrides{})
		if err == nil || !strings.Contains(err.Error(), "proxyjump chain longer than 16 hosts: h16 -> h15") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("sixteen is fine", func(t *testing.T) {
		var b strings.Builder
		for i := 0; i < 15; i++ {
			b.WriteString("Host h" + strconv.Itoa(i) + "\n ProxyJump h" + strconv.Itoa(i+1) + "\n")
		}
		s, err := mustParse(t, b.String()).Resolve("h0", Overrides{})
		if err != nil || len(s.ProxyJump) != 15 || s.ProxyJump[0].Alias != "h15" {
			t.Fatalf("got %d hops, %v", len(s.ProxyJump), err)
		}
	})
}

func TestTokens(t *testing.T) {
	cfg := `Host tok
  HostName %h.Corp.example
  User tokuser
  Port 2200
  IdentityFile ~/.ssh/%h/%r@%p-%n-%u-%d-%%-%l-%L
  UserKnownHostsFile ~/.ssh/kh_%h %d/kh_%C /etc/%k
  GlobalKnownHostsFile ~/g_%h
  HostKeyAlias Key-Alias
Host pct
  HostName 100%%
Host badtoken
  IdentityFile ~/%x
Host lone
  HostName lone%
Host hostport
  HostName %p
Host uid
  IdentityFile ~/%i
Host tilde-user
  IdentityFile ~other/key
Host tilde-me
  IdentityFile ~me/key
`
	hash := connHash("box.example.org", "tok.corp.example", 2200, "tokuser")
	runResolveCases(t, []resolveCase{
		{"HostName %h, lower case", cfg, "tok", Overrides{}, hostName, "tok.corp.example"},
		{"HostName %%", cfg, "pct", Overrides{}, hostName, "100%"},
		{"override HostName %h", cfg, "x", Overrides{HostName: "%h.Other"}, hostName, "x.other"},
		{"IdentityFile tokens", cfg, "tok", Overrides{}, identities, []string{"/home/me/.ssh/tok.corp.example/tokuser@2200-tok-me-/home/me-%-box.example.org-box"}},
		{"UserKnownHostsFile list and tokens", cfg, "tok", Overrides{}, knownHosts, []string{"/home/me/.ssh/kh_tok.corp.example", "/home/me/kh_" + hash, "/etc/key-alias"}},
		{"GlobalKnownHostsFile: ~ only", cfg, "tok", Overrides{}, func(s Settings) any { return s.GlobalKnownHostsFiles }, []string{"/home/me/g_%h"}},
		{"HostKeyAlias lower case", cfg, "tok", Overrides{}, func(s Settings) any { return s.HostKeyAlias }, "key-alias"},
		{"~LOCALUSER", cfg, "tilde-me", Overrides{}, identities, []string{"/home/me/key"}},
	})
	for alias, want := range map[string]string{
		"badtoken":   `resolve badtoken: cfg:12: IdentityFile: "/home/me/%x": %x is not a token gssh can expand here`,
		"lone":       `resolve lone: cfg:14: HostName: "lone%" ends with a lone %; write %% for a percent sign`,
		"hostport":   `resolve hostport: cfg:16: HostName: "%p": %p is not a token gssh can expand here`,
		"uid":        `resolve uid: cfg:18: IdentityFile: "/home/me/%i": %i is not a token gssh can expand here`,
		"tilde-user": `resolve tilde-user: cfg:20: IdentityFile: "~other/key": ~user paths are not supported; write the full path`,
	} {
		_, err := mustParse(t, cfg).Resolve(alias, Overrides{})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", alias, err, want)
		}
	}
	t.Run("no local host name", func(t *testing.T) {
		env := testEnv()
		env.LocalHost = ""
		c, _ := Parse(env, "cfg", strings.NewReader("IdentityFile ~/%l\n"))
		_, err := c.Resolve("x", Overrides{})
		if err == nil || !strings.Contains(err.Error(), "%l needs the local host name") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no home", func(t *testing.T) {
		c, _ := Parse(Env{LocalUser: "me"}, "cfg", strings.NewReader(""))
		_, err := c.Resolve("x", Overrides{})
		if err == nil || !strings.Contains(err.Error(), "home directory is unknown") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestValues(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{"trailing comment (041)", "Host github\n    HostName github.com        # This is the host for code review\n", "github", Overrides{}, hostName, "github.com"},
		{"# inside a word is not a comment", "Host a\n hostname a#b\n", "a", Overrides{}, hostName, "a#b"},
		{"quoted value with spaces", "Host a\n User \"a b\"\n", "a", Overrides{}, userOf, "a b"},
		{"single quotes and escapes", "Host a\n User 'x y'\\\"z\n", "a", Overrides{}, userOf, "x y\"z"},
		{"Key=Value", "Host=a\n Port=2345\n", "a", Overrides{}, port, 2345},
		{"Key = Value with tabs", "Host a\n\tPort\t=\t2346\n", "a", Overrides{}, port, 2346},
		{"keywords are case-insensitive", "HOST a\n pOrT 2347\n", "a", Overrides{}, port, 2347},
		{"CRLF lines", "Host a\r\n Port 2348\r\n", "a", Overrides{}, port, 2348},
		{"quoted Host pattern", "Host \"a\"\n Port 2349\n", "a", Overrides{}, port, 2349},
		{"StrictHostKeyChecking off is no", "StrictHostKeyChecking off\n", "a", Overrides{}, strict, "no"},
		{"StrictHostKeyChecking true is yes", "StrictHostKeyChecking TRUE\n", "a", Overrides{}, strict, "yes"},
		{"StrictHostKeyChecking accept-new", "StrictHostKeyChecking accept-new\n", "a", Overrides{}, strict, "accept-new"},
		{"UserKnownHostsFile none", "UserKnownHostsFile none\n", "a", Overrides{}, knownHosts, []string(nil)},
		{"UserKnownHostsFile: first line wins, whole list", "Host a\n UserKnownHostsFile /x /y\nUserKnownHostsFile /z\n", "a", Overrides{}, knownHosts, []string{"/x", "/y"}},
		{"ConnectTimeout 0", "ConnectTimeout 0\n", "a", Overrides{}, func(s Settings) any { return s.ConnectTimeout }, time.Duration(0)},
	})
}

func TestBadValues(t *testing.T) {
	cfg := "Host a\n  Port abc\nHost b\n  StrictHostKeyChecking maybe\nHost c\n  HostName one two\nHost d\n  User \"open\nHost e\n  ConnectTimeout 5x\nHost f\n  HostName\nHost ok\n  Port 2200\n"
	c := mustParse(t, cfg)
	for alias, want := range map[string]string{
		"a": `resolve a: cfg:2: Port: bad port "abc": use a number from 1 to 65535`,
		"b": `resolve b: cfg:4: StrictHostKeyChecking: "maybe": use yes, no, accept-new or ask`,
		"c": `resolve c: cfg:6: HostName: takes one value, not 2; quote a value that holds spaces`,
		"d": `resolve d: cfg:8: User: unbalanced quotes`,
		"e": `resolve e: cfg:10: ConnectTimeout: "5x": use seconds, a time such as 1m30s, or none`,
		"f": `resolve f: cfg:12: HostName: missing value`,
	} {
		_, err := c.Resolve(alias, Overrides{})
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", alias, err, want)
		}
		var le *lineError
		if !errors.As(err, &le) {
			t.Errorf("%s: not a lineError", alias)
		}
	}
	// A bad line for another host is only a warning.
	if s, err := c.Resolve("ok", Overrides{}); err != nil || s.Port != 2200 {
		t.Errorf("ok: %v, %v", s.Port, err)
	}
	if got := len(c.Warnings()); got != 6 {
		t.Errorf("%d warnings, want 6: %v", got, c.Warnings())
	}
	if _, err := c.Resolve("ok", Overrides{Port: 70000}); err == nil || !strings.Contains(err.Error(), "overrides: Port: bad port 70000") {
		t.Errorf("override port: %v", err)
	}
}

// TestUnsupportedMatch: what kevinburke/ssh_config v1.6.0 fails the whole
// file on keeps the rest of the file, with one warning per line.
func TestUnsupportedMatch(t *testing.T) {
	cfg := `Match exec "test -f /x" host a
  User exec-user
Host a
  User a-user
Match localnetwork 192.0.2.0/24
  Port 1
Match bogus
  Port 2
Match all host a
  Port 3
Match
  Port 4
Host b
  Port 5
Match host a exec "x"
  Port 6
`
	c := mustParse(t, cfg)
	want := []Warning{
		{"cfg", 1, "Match exec: gssh does not run commands, so this block never applies"},
		{"cfg", 5, "Match localnetwork: not supported by gssh, so this block never applies"},
		{"cfg", 7, `Match: "bogus" needs an argument; this block is ignored`},
		{"cfg", 9, `Match: "all" cannot be combined with other criteria; this block is ignored`},
		{"cfg", 11, "Match: missing value; this block is ignored"},
		{"cfg", 15, "Match exec: gssh does not run commands, so this block never applies"},
	}
	if got := c.Warnings(); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n got  %v\n want %v", got, want)
	}
	for alias, wantPort := range map[string]int{"a": 22, "b": 5} {
		s, err := c.Resolve(alias, Overrides{})
		if err != nil || s.Port != wantPort {
			t.Errorf("%s: port %d, %v; want %d", alias, s.Port, err, wantPort)
		}
	}
	if s, _ := c.Resolve("a", Overrides{}); s.User != "a-user" {
		t.Errorf("a: user %q", s.User)
	}
}

func TestInclude(t *testing.T) {
	home := t.TempDir()
	write := func(rel, text string) string {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(".ssh/config.d/10-gpu.conf", "Host gpu*\n  User gpuuser\n")
	write(".ssh/config.d/20-all.conf", "Port 2020\n")
	write(".ssh/top.conf", "User top\nHost other\n  Port 1111\n")
	write("fig/ssh", "IdentityFile ~/fig_key\n")
	write(".ssh/loop.conf", "Include loop.conf\nUser looped\n")
	for i := 0; i < 20; i++ {
		write(".ssh/deep"+strconv.Itoa(i), "Include deep"+strconv.Itoa(i+1)+"\nServerAliveCountMax "+strconv.Itoa(i+100)+"\n")
	}
	cfg := `Host gpu1
  Include config.d/*.conf
Host inc
  Include top.conf
  HostName after.example
Host never
  Include top.conf
Match all
  Include ~/fig/ssh ~/missing/*.conf
Host loop
  Include loop.conf
Host deep
  Include deep0
`
	env := Env{Home: home, LocalUser: "me"}
	c, err := Parse(env, "cfg", strings.NewReader(cfg))
	if err != nil {
		t.Fatal(err)
	}
	get := func(alias string) Settings {
		s, err := c.Resolve(alias, Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := get("gpu1"); s.User != "gpuuser" || s.Port != 2020 {
		t.Errorf("relative glob include: %s %d", s.User, s.Port)
	}
	if s := get("inc"); s.User != "top" || s.Port != 22 || s.HostName != "after.example" {
		t.Errorf("include in block: %s %d %s", s.User, s.Port, s.HostName)
	}
	if s := get("other"); s.User != "me" || s.Port != 22 {
		t.Errorf("blocks of includes that do not apply: %s %d", s.User, s.Port)
	}
	if s := get("x"); !reflect.DeepEqual(s.IdentityFiles, []string{home + "/fig_key"}) {
		t.Errorf("Match all + ~ include (044): %v", s.IdentityFiles)
	}
	if s := get("loop"); s.User != "looped" {
		t.Errorf("loop: %s", s.User)
	}
	if s := get("deep"); s.ServerAliveCountMax != 115 {
		t.Errorf("deep: %d", s.ServerAliveCountMax)
	}
	var msgs []string
	for _, w := range c.Warnings() {
		msgs = append(msgs, w.String())
	}
	want := []string{
		filepath.Join(home, ".ssh/loop.conf") + ":1: Include " + filepath.Join(home, ".ssh/loop.conf") + ": the file includes itself: not read again",
		filepath.Join(home, ".ssh/deep15") + ":1: Include " + filepath.Join(home, ".ssh/deep16") + ": more than 16 nested includes: not read",
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("warnings:\n got  %q\n want %q", msgs, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config")
	system := filepath.Join(dir, "etc", "ssh_config")
	if err := os.MkdirAll(filepath.Join(dir, "etc", "ssh_config.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		user: "Host a\n  Port 1\n",
		system: "Include ssh_config.d/*.conf\nHost *\n  Port 2\n  User sys\n  IdentityFile ~/.ssh/sys\n" +
			"Include ~/x.conf\n",
		filepath.Join(dir, "etc", "ssh_config.d", "a.conf"): "ServerAliveInterval 5\n",
	}
	for p, text := range files {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(testEnv(), user, system)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Resolve("a", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 1 || s.User != "sys" || s.ServerAliveInterval != 5*time.Second {
		t.Errorf("user file first, system file after: %+v", s)
	}
	if w := c.Warnings(); len(w) != 1 || w[0].Line != 6 || !strings.Contains(w[0].Msg, "~ is not allowed in the system file") {
		t.Errorf("warnings: %v", w)
	}

	if _, err := Load(testEnv(), filepath.Join(dir, "missing"), filepath.Join(dir, "missing2")); err != nil {
		t.Errorf("missing files: %v", err)
	}
	_, err = Load(testEnv(), dir, "")
	if err == nil || !strings.HasPrefix(err.Error(), "load ssh config: read "+dir+":") {
		t.Errorf("unreadable file: %v", err)
	}
}

func TestConcurrentResolve(t *testing.T) {
	c := mustParse(t, "Host j\n  ProxyJump none\n  IdentityFile ~/k\nHost *\n  ProxyJump j\n")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				if s, err := c.Resolve("h", Overrides{}); err != nil || len(s.ProxyJump) != 1 {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A keyword OpenSSH does not know is ignored with a warning naming file and
// line, unless IgnoreUnknown lists it; keywords OpenSSH knows but gssh does
// not use are silent.
func TestUnknownKeywords(t *testing.T) {
	c := mustParse(t, `IgnoreUnknown UseKeychain,Foo*
Host a
  Prot 2222
  UseKeychain yes
  FooBar 1
  ForwardAgent yes
  Port 2200
`)
	w := c.Warnings()
	if len(w) != 1 || w[0].Line != 3 || !strings.Contains(w[0].Msg, `unknown keyword "Prot"`) {
		t.Fatalf("warnings %v", w)
	}
	if s, err := c.Resolve("a", Overrides{}); err != nil || s.Port != 2200 {
		t.Errorf("resolve: %+v %v", s.Port, err)
	}
}
