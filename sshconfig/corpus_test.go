package sshconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCorpus holds the right values of shared corpus cases 033-044 (OpenSSH
// 9.2 `ssh -G`, as the corpus README gives them), copied into testdata.
func TestCorpus(t *testing.T) {
	home := "/home/me"
	type want struct {
		alias               string
		hostName, user, cmd string
		port                int
		identities          []string
		explicit            bool
	}
	defaults := defaultIdentities(home)
	for _, tc := range []struct {
		file     string
		warnings []Warning
		hosts    []want
	}{
		{"033-sshcfg-host-star-before-specific-identityfile.txt", nil, []want{
			{alias: "foo", hostName: "foo", user: "me", port: 22, identities: []string{home + "/.ssh/id_rsa", home + "/.ssh/bar"}, explicit: true},
		}},
		{"034-sshcfg-first-matching-block-wins-port.txt", nil, []want{
			{alias: "198.51.100.1", hostName: "198.51.100.1", user: "me", port: 1234, identities: defaults},
			{alias: "198.51.100.2", hostName: "198.51.100.2", user: "me", port: 5678, identities: defaults},
		}},
		{"036-sshcfg-match-host-exec-before-host.txt", []Warning{{"036", 1, "Match exec: gssh does not run commands, so this block never applies"}}, []want{
			{alias: "my-server", hostName: "192.0.2.10", user: "admin", port: 22, identities: defaults},
		}},
		{"037-sshcfg-match-block-must-not-bleed.txt", nil, []want{
			{alias: "my-server", hostName: "192.0.2.10", user: "alice", port: 22, identities: defaults},
			{alias: "db.internal", hostName: "db.internal", user: "bob", port: 22, identities: []string{home + "/.ssh/internal_key"}, explicit: true},
			{alias: "other-server", hostName: "192.0.2.20", user: "me", port: 22, identities: defaults},
		}},
		{"038-sshcfg-negated-pattern-and-percent-h-hostname.txt", nil, []want{
			{alias: "web01", hostName: "web01.domain", user: "me", port: 22, identities: defaults},
			{alias: "web01.domain", hostName: "web01.domain", user: "me", port: 22, identities: defaults},
		}},
		{"039-sshcfg-negation-first-proxycommand-windows-path.txt", nil, []want{
			{alias: "proxy", hostName: "proxy", user: "me", port: 22, identities: defaults},
			{alias: "gpu-node.example", hostName: "gpu-node.example", user: "me", port: 22, identities: defaults,
				cmd: `C:\Windows\System32\OpenSSH\ssh.exe -W gpu-node.example:22 proxy`},
		}},
		{"041-sshcfg-eol-comment-after-value.txt", nil, []want{
			{alias: "github", hostName: "github.com", user: "me", port: 22, identities: defaults},
		}},
		{"043-sshcfg-orbstack-match-exec-quoted-path.txt", []Warning{{"043", 4, "Match exec: gssh does not run commands, so this block never applies"}}, []want{
			{alias: "orb", hostName: "127.0.0.1", user: "me", port: 32222, identities: defaults},
		}},
		{"044-sshcfg-include-inside-match-all.txt", nil, []want{
			{alias: "any", hostName: "any", user: "me", port: 22, identities: defaults},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c, err := Parse(Env{Home: home, LocalUser: "me"}, tc.file[:3], f)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Warnings(); !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("warnings: got %v, want %v", got, tc.warnings)
			}
			for _, w := range tc.hosts {
				s, err := c.Resolve(w.alias, Overrides{})
				if err != nil {
					t.Fatal(err)
				}
				got := want{alias: w.alias, hostName: s.HostName, user: s.User, cmd: s.ProxyCommand, port: s.Port,
					identities: s.IdentityFiles, explicit: s.IdentitiesExplicit}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s:\n got  %+v\n want %+v", w.alias, got, w)
				}
			}
		})
	}
}
