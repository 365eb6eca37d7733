package sshconfig

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// view is what the conformance test compares: the keys of `ssh -G` that
// Settings holds, as strings.
type view struct {
	HostName, Port, User, HostKeyAlias, Strict, IdentitiesOnly string
	ConnectTimeout, AliveInterval, AliveCountMax, ProxyCommand string
	IdentityFiles, UserKnownHosts                              []string
	Jumps                                                      []view
}

func viewOf(s Settings) view {
	v := view{
		HostName: s.HostName, Port: strconv.Itoa(s.Port), User: s.User,
		HostKeyAlias: s.HostKeyAlias, Strict: s.StrictHostKeyChecking,
		IdentitiesOnly: map[bool]string{true: "yes", false: "no"}[s.IdentitiesOnly],
		ConnectTimeout: strconv.Itoa(int(s.ConnectTimeout / time.Second)),
		AliveInterval:  strconv.Itoa(int(s.ServerAliveInterval / time.Second)),
		AliveCountMax:  strconv.Itoa(s.ServerAliveCountMax),
		ProxyCommand:   s.ProxyCommand,
		IdentityFiles:  s.IdentityFiles, UserKnownHosts: s.UserKnownHostsFiles,
	}
	if v.UserKnownHosts == nil {
		v.UserKnownHosts = []string{"none"}
	}
	for _, j := range s.ProxyJump {
		v.Jumps = append(v.Jumps, viewOf(j))
	}
	return v
}

// openSSH runs `ssh -G -F file` and turns its output into a view.
type openSSH struct {
	t    *testing.T
	file string
	env  Env
	home string // $HOME for ssh: a scratch directory
}

func (o openSSH) dump(args ...string) map[string][]string {
	o.t.Helper()
	cmd := exec.Command("/usr/bin/ssh", append([]string{"-G", "-F", o.file}, args...)...)
	cmd.Env = []string{"HOME=" + o.home, "PATH=/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		o.t.Fatalf("ssh -G %v: %v: %s", args, err, stderr.String())
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			m[k] = append(m[k], v)
		}
	}
	return m
}

// view resolves host with ssh, following ProxyJump the way ssh itself does:
// the hops in the ProxyJump value become `ssh -J <earlier hops> LAST`, so
// the first hop alone is resolved with its own ProxyJump.
func (o openSSH) view(host string, args ...string) view {
	o.t.Helper()
	// ssh follows the ProxyJump of a host it is given without -J; the test
	// follows it only where the options are just -l and -p.
	follow := true
	for _, a := range args {
		if a == "-J" || a == "-i" || a == "-o" {
			follow = false
		}
	}
	m := o.dump(append(args, host)...)
	get := func(k string) string {
		if len(m[k]) == 0 {
			return ""
		}
		return m[k][0]
	}
	v := view{
		HostName: get("hostname"), Port: get("port"), User: get("user"),
		HostKeyAlias: get("hostkeyalias"), IdentitiesOnly: get("identitiesonly"),
		ConnectTimeout: strings.Replace(get("connecttimeout"), "none", "0", 1),
		AliveInterval:  get("serveraliveinterval"), AliveCountMax: get("serveralivecountmax"),
		UserKnownHosts: strings.Fields(get("userknownhostsfile")),
	}
	v.Strict = map[string]string{"true": "yes", "false": "no"}[get("stricthostkeychecking")]
	if v.Strict == "" {
		v.Strict = get("stricthostkeychecking")
	}
	// ssh -G prints IdentityFile and ProxyCommand before ~ and % expansion.
	alias := host
	short, _, _ := strings.Cut(o.env.LocalHost, ".")
	keyAlias := v.HostKeyAlias
	if keyAlias == "" {
		keyAlias = alias
	}
	tokens := strings.NewReplacer("%%", "%", "%h", v.HostName, "%p", v.Port, "%r", v.User,
		"%n", alias, "%u", o.env.LocalUser, "%d", o.env.Home, "%l", o.env.LocalHost, "%L", short, "%k", keyAlias)
	for _, f := range m["identityfile"] {
		if strings.HasPrefix(f, "~/") {
			f = o.env.Home + f[1:]
		}
		v.IdentityFiles = append(v.IdentityFiles, tokens.Replace(f))
	}
	if pc := get("proxycommand"); pc != "" {
		v.ProxyCommand = tokens.Replace(pc)
	}
	if pj := get("proxyjump"); pj != "" && follow {
		hops := strings.Split(pj, ",")
		for i, h := range hops {
			h, hargs := hopArgs(h)
			var hv view
			if i == 0 {
				hv = o.view(h, hargs...)
				v.Jumps, hv.Jumps = append(v.Jumps, hv.Jumps...), nil
			} else {
				hv = o.view(h, append(hargs, "-J", strings.Join(hops[:i], ","))...)
				hv.ProxyCommand = ""
			}
			v.Jumps = append(v.Jumps, hv)
		}
	}
	return v
}

// hopArgs turns a ProxyJump hop into a host and the -l and -p options of the
// command ssh runs for it.
func hopArgs(h string) (host string, args []string) {
	h = strings.TrimPrefix(h, "ssh://")
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		args = append(args, "-l", h[:i])
		h = h[i+1:]
	}
	port := ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		host, port = h[1:end], strings.TrimPrefix(h[end+1:], ":")
	} else {
		host, port, _ = strings.Cut(h, ":")
	}
	if port != "" {
		args = append(args, "-p", port)
	}
	return host, args
}

// conformanceCases: config file (under testdata, @DIR@ standing for the
// copy's directory) and the hosts to resolve in it.
var conformanceCases = []struct {
	file  string
	hosts []string
}{
	{"033-sshcfg-host-star-before-specific-identityfile.txt", []string{"foo", "bar"}},
	{"034-sshcfg-first-matching-block-wins-port.txt", []string{"198.51.100.1", "198.51.100.2", "198.51.101.1"}},
	{"036-sshcfg-match-host-exec-before-host.txt", []string{"my-server", "other"}},
	{"037-sshcfg-match-block-must-not-bleed.txt", []string{"my-server", "db.internal", "other-server"}},
	{"038-sshcfg-negated-pattern-and-percent-h-hostname.txt", []string{"web01", "web01.domain", "db01"}},
	{"039-sshcfg-negation-first-proxycommand-windows-path.txt", []string{"proxy", "gpu-node.example", "Other"}},
	{"041-sshcfg-eol-comment-after-value.txt", []string{"github", "gitlab"}},
	{"043-sshcfg-orbstack-match-exec-quoted-path.txt", []string{"orb", "other"}},
	{"044-sshcfg-include-inside-match-all.txt", []string{"any-host"}},
	{"conformance/include.conf", []string{"inc-a", "inc-b", "inc-glob", "other", "never-matches", "plain"}},
	{"conformance/proxyjump.conf", []string{"target", "hop1", "hop2", "uri", "jump-none", "cmd-first", "jump-first", "none-then-cmd"}},
	{"conformance/tokens.conf", []string{"tok-a", "tok-B", "MixedCase", "mixedcase", "MIXEDCASE"}},
	{"conformance/match.conf", []string{"db1", "app1", "APP1", "admin@db2.internal", "other"}},
	{"conformance/negation.conf", []string{"web.example.com", "bastion.example.com", "x.lab.example.com", "gpu01", "gpu02", "gpu123", "only-negated"}},
	{"conformance/final.conf", []string{"web01", "WEB01", "web02", "other"}},
	{"conformance/knownhosts.conf", []string{"kh1", "kh2", "kh3", "kh4", "other"}},
	{"conformance/syntax.conf", []string{"syn1", "syn2", "syn3", "quoted-host", "other"}},
}

// TestConformance compares Resolve with OpenSSH's `ssh -G -F FILE HOST`.
// ssh takes ~ from the password database, not from $HOME (which is pointed
// at a scratch directory), so Env.Home is the current user's home; the
// configurations include only absolute paths or missing files.
func TestConformance(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ssh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenSSH client is needed in CI: %v", err)
		}
		t.Skipf("no OpenSSH client (CI=true would fail): %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Home: u.HomeDir, LocalUser: u.Username, LocalHost: local}
	dir := copyTestdata(t)
	for _, tc := range conformanceCases {
		file := filepath.Join(dir, tc.file)
		cfg, err := Load(env, file, "")
		if err != nil {
			t.Fatal(err)
		}
		ssh := openSSH{t: t, file: file, env: env, home: t.TempDir()}
		for _, host := range tc.hosts {
			t.Run(tc.file+"/"+host, func(t *testing.T) {
				ssh.t = t
				var ov Overrides
				alias := host
				if u, h, ok := strings.Cut(host, "@"); ok {
					ov.User, alias = u, h
				}
				got, err := cfg.Resolve(alias, ov)
				if err != nil {
					t.Fatal(err)
				}
				if want := ssh.view(host); !reflect.DeepEqual(viewOf(got), want) {
					t.Errorf("differs from ssh -G:\n got  %+v\n want %+v", viewOf(got), want)
				}
			})
		}
	}
}

// TestConformanceOverrides checks Overrides against ssh's -l, -p, -i and
// -o HostName=.
func TestConformanceOverrides(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ssh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenSSH client is needed in CI: %v", err)
		}
		t.Skipf("no OpenSSH client (CI=true would fail): %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Home: u.HomeDir, LocalUser: u.Username, LocalHost: "box.example"}
	dir := copyTestdata(t)
	key := filepath.Join(dir, "key") // ssh -G drops an -i file that does not exist
	if err := os.WriteFile(key, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, host string
		ov         Overrides
	}{
		{"conformance/proxyjump.conf", "target", Overrides{User: "cli", Port: 2222, IdentityFile: key}},
		{"conformance/match.conf", "db1", Overrides{User: "admin"}},
		{"conformance/match.conf", "x", Overrides{HostName: "over.%h.Internal", User: "admin"}},
		{"038-sshcfg-negated-pattern-and-percent-h-hostname.txt", "web01", Overrides{HostName: "%h.other", IdentityFile: key}},
	} {
		t.Run(tc.file+"/"+tc.host, func(t *testing.T) {
			file := filepath.Join(dir, tc.file)
			cfg, err := Load(env, file, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := cfg.Resolve(tc.host, tc.ov)
			if err != nil {
				t.Fatal(err)
			}
			var args []string
			if tc.ov.User != "" {
				args = append(args, "-l", tc.ov.User)
			}
			if tc.ov.Port != 0 {
				args = append(args, "-p", strconv.Itoa(tc.ov.Port))
			}
			if tc.ov.IdentityFile != "" {
				args = append(args, "-i", tc.ov.IdentityFile)
			}
			if tc.ov.HostName != "" {
				args = append(args, "-o", "HostName="+tc.ov.HostName)
			}
			ssh := openSSH{t: t, file: file, env: env, home: t.TempDir()}
			want := ssh.view(tc.host, args...)
			gv := viewOf(got)
			gv.Jumps = nil // ssh.view follows ProxyJump only without extra arguments
			if !reflect.DeepEqual(gv, want) {
				t.Errorf("differs from ssh -G %v:\n got  %+v\n want %+v", args, gv, want)
			}
		})
	}
}

// copyTestdata copies testdata into a scratch directory, replacing @DIR@
// with that directory in every file.
func copyTestdata(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.Walk("testdata", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata", path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data = []byte(strings.ReplaceAll(string(data), "@DIR@", dir))
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// connHash is %C as OpenSSH 9.2 computes it, for explicit expectations.
func connHash(local, host string, port int, user string) string {
	sum := sha1.Sum([]byte(fmt.Sprint(local, host, port, user)))
	return hex.EncodeToString(sum[:])
}
