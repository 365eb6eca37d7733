package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLab(t *testing.T) {
	in := "hosts:\n  - name: a\nlab:\n  state: /var/lib/gssh/state.db\n  pass_user: gssh\n"
	inv, err := Parse("h.yaml", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Lab{State: "/var/lib/gssh/state.db", PassUser: "gssh", Group: DefaultLabGroup, Line: 3, StateLine: 4, PassUserLine: 5}
	if inv.Lab == nil || *inv.Lab != want {
		t.Fatalf("lab = %+v, want %+v", inv.Lab, want)
	}
	inv, err = Parse("h.yaml", strings.NewReader(in+"  group: ml\n"))
	if err != nil || inv.Lab.Group != "ml" || inv.Lab.GroupLine != 6 {
		t.Fatalf("group: %+v, %v", inv.Lab, err)
	}
	if inv, err := Parse("h.yaml", strings.NewReader("hosts:\n  - name: a\n")); err != nil || inv.Lab != nil {
		t.Fatalf("no lab block: %+v, %v", inv, err)
	}
}

func TestParseLabErrors(t *testing.T) {
	const hosts = "hosts:\n  - name: a\n"
	cases := []struct{ name, in, want string }{
		{"not mapping", "lab: yes\n", "h.yaml:3: `lab` must be a mapping"},
		{"no state", "lab:\n  pass_user: gssh\n", "h.yaml:3: `lab` has no `state:`"},
		{"no pass user", "lab:\n  state: /s.db\n", "h.yaml:3: `lab` has no `pass_user:`"},
		{"relative state", "lab:\n  state: s.db\n  pass_user: gssh\n", "h.yaml:4: lab state \"s.db\": give the absolute path"},
		{"empty pass user", "lab:\n  state: /s.db\n  pass_user: \"\"\n", "h.yaml:5: `lab pass_user` must be a non-empty string"},
		{"hostile pass user", "lab:\n  state: /s.db\n  pass_user: \"a;b\"\n", "h.yaml:5: lab pass_user \"a;b\""},
		{"unknown key", "lab:\n  state: /s.db\n  pass_user: g\n  users: x\n", "h.yaml:6: unknown key \"users\" in `lab`; it takes state, pass_user, group"},
		{"twice", "lab:\n  state: /s.db\n  state: /t.db\n", "h.yaml:5: \"state\" is given twice in `lab`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("h.yaml", strings.NewReader(hosts+c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestLabLine(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		in   string
		line int
		ok   bool
	}{
		"lab.yaml":    {"hosts:\n  - name: a\nlab:\n  state: /x\n", 3, true},
		"plain.yaml":  {"hosts:\n  - name: a\n", 0, false},
		"broken.yaml": {"hosts: [\n", 0, false},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.in), 0o600); err != nil {
			t.Fatal(err)
		}
		if line, ok := LabLine(p); line != c.line || ok != c.ok {
			t.Errorf("%s: LabLine = %d, %v; want %d, %v", name, line, ok, c.line, c.ok)
		}
	}
	if _, ok := LabLine(filepath.Join(dir, "missing.yaml")); ok {
		t.Error("a missing file has a lab block")
	}
}
