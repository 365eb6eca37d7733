// Package inventory loads gssh's host list (hosts.yaml): which hosts form the
// fleet, how to reach each one (merged later with ~/.ssh/config), and the
// scheduling facts that belong to a host (labels, memory reserve, drain).
//
// The file format:
//
//	defaults:            # optional; every key may also be set per host
//	  user: ml
//	  reserve: 10%
//	hosts:
//	  - name: gpu01      # also the alias looked up in ~/.ssh/config
//	  - name: gpu02
//	    address: 10.0.0.12
//	    port: 2222
//	    user: alice
//	    identity_file: ~/.ssh/lab_ed25519
//	    known_hosts: ~/.ssh/lab_known_hosts # instead of ssh_config's UserKnownHostsFile
//	    labels: [a100, nvlink]
//	    reserve: 20%
//	    drain: false
//	    reap_foreign: kill # kill GPU processes no gssh job's (default: report)
//	    run_as: sudo     # jobs run as their owner, through sudo -n -u (default: login)
//	  - name: ctl
//	    local: true      # the controller itself: no SSH
//	policy:              # optional; how the queue is scheduled and kept (Policy)
//	  order: fairshare   # fifo | priority | fairshare
//	  placement: bestfit # firstfit | bestfit
//	  backfill: easy     # none | skip | easy
//	  fairshare:
//	    half_life: 24h   # or window: 7-00:00:00 (not both)
//	  users:
//	    alice: {weight: 2, admin: true} # admin: may use --priority 0-3
//	    bob: {max_gpus: 4, max_jobs: 2} # caps on his running jobs
//	  default_user: {max_gpus: 8}       # caps of users not listed, and of a cap a user leaves out
//	  backfill_estimate: 24h # assumed walltime of a job without --timeout
//	  default_timeout: 72h   # walltime enforced on a job without --timeout
//	  rebalance: true        # preempt --preemptible jobs for jobs ranked ahead (default false)
//	  preempt_after: 10m     # a job waits this long before others are preempted for it
//	  min_runtime: 10m       # a job runs this long (since its latest start) before it may be preempted
//	  down_after: 60s        # a host is down after 3 failed contacts in a row spanning this
//	  lost_after: 5m         # the jobs of a host down this long are lost (or requeued: --requeue)
//	  keep_events: 30d       # the event log's rotated files are removed after this (at least a day)
//	  keep_jobs: 90d         # ended jobs' records move to the history this long after they ended
//	  keep_job_dirs: 14d     # ended jobs' directories (and logs) on the workers are removed this long after
//	  log_limit: 1G          # the log cap of a job submitted without --log-limit (default: none)
//	lab:                 # optional; the shared-lab queue (see Lab)
//	  state: /var/lib/gssh/state.db
//	  pass_user: gssh
//	  group: gssh        # the state directory's group (default gssh)
//	  serve: true        # the queue is gssh serve's alone: members go through its socket
//
// Every error names the file and line and says what to change.
package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gssh/gssh/notify"
	"github.com/gssh/gssh/sshconfig"
)

// DefaultReservePct is the share of each GPU's memory kept back when neither
// the host nor the defaults block sets `reserve`.
const DefaultReservePct = 10

// Host is one entry of the inventory, with the defaults block applied.
type Host struct {
	Name         string // unique; the ssh_config alias
	Address      string // HostName override; "" = ssh_config's, else Name
	Port         int    // 0 = ssh_config's, else 22
	User         string // "" = ssh_config's, else the local user
	IdentityFile string // offered first when set
	// KnownHostsFile replaces ssh_config's UserKnownHostsFile when set
	// (`known_hosts:`, as `ssh -o UserKnownHostsFile=FILE`): the host's
	// key is looked up there, and in the global files.
	KnownHostsFile string
	Labels         []string // free-form tags used by --label
	ReservePct     float64  // GPU memory kept back, percent of total, in [0, 100)
	Drain          bool     // no new jobs are placed on a drained host
	DrainLine      int      // line of the `drain:` key that set Drain (in `defaults` or the host's entry); 0 when none did
	Local          bool     // the controller itself: probed and run without SSH
	// ReapForeign is `reap_foreign: kill`: GPU processes there that are
	// no gssh job's (someone ran them by hand) are killed by the passes
	// and gssh reap; false (`report`, the default): only reported.
	ReapForeign bool
	// RunAsSudo is `run_as: sudo`: the controller's login starts, polls,
	// stops and reads each job there as the job's owner (sudo -n -H -u
	// USER), so the job runs under its submitter's uid in its home; false
	// (`login`, the default): every job runs as the SSH login.
	RunAsSudo bool
	Line      int // line of the entry in File (0 for the implicit local host)
}

// HasLabel reports whether h carries label l.
func (h Host) HasLabel(l string) bool { return slices.Contains(h.Labels, l) }

// Overrides returns the values of h that win over ~/.ssh/config, as options
// on the ssh command line do.
func (h Host) Overrides() sshconfig.Overrides {
	return sshconfig.Overrides{HostName: h.Address, Port: h.Port, User: h.User, IdentityFile: h.IdentityFile, KnownHostsFile: h.KnownHostsFile}
}

// Inventory is a loaded hosts file.
type Inventory struct {
	File  string // where it was read from; "" for the implicit local-only inventory
	Hosts []Host // in file order
	// Policy is the `policy:` block, in the parts their readers own
	// (the planner's, host health's, housekeeping's, the event log's,
	// the launch's log cap). Settings the file leaves out are zero, which
	// each reads as its default.
	Policy Policy
	// Notify is the `notify:` block (webhooks, mail), with the users'
	// addresses of the `policy: users:` block: what gssh serve sends.
	Notify notify.Config
	// Lab is the `lab:` block (nil without one): the file describes a
	// lab's one shared queue. gssh honours it only in the lab inventory
	// (/etc/gssh/hosts.yaml or $GSSH_INVENTORY; see service.Options).
	Lab *Lab
}

// DefaultLabGroup is the group of a lab's state directory when the `lab:`
// block names none.
const DefaultLabGroup = "gssh"

// Lab is the `lab:` block: where the shared queue lives and who runs its
// passes. The lines are those of its keys, for errors found later (an
// account that does not exist on this host).
type Lab struct {
	State    string // absolute path of the one state file
	PassUser string // the only account that runs passes
	Group    string // the group owning the state directory
	// Serve: the queue is gssh serve's alone (`serve: true`): its
	// directory only the pass account writes, its files 0600, and
	// members' commands go through gssh serve's socket.
	Serve bool

	Line, StateLine, PassUserLine, GroupLine, ServeLine int
}

// Lookup returns the host named name.
func (inv *Inventory) Lookup(name string) (Host, bool) {
	for _, h := range inv.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// Names lists the host names in file order.
func (inv *Inventory) Names() []string {
	out := make([]string, len(inv.Hosts))
	for i, h := range inv.Hosts {
		out[i] = h.Name
	}
	return out
}

// LocalOnly is the inventory gssh uses when no hosts file exists: the
// controller alone, named name (the short host name).
func LocalOnly(name string) *Inventory {
	return &Inventory{Hosts: []Host{{Name: name, Local: true, ReservePct: DefaultReservePct}}}
}

// ErrNotFound is returned by Locate when no inventory file exists anywhere.
var ErrNotFound = errors.New("no inventory file")

// SystemPath is the machine-wide inventory: the hosts file every user's
// gssh falls back to, and where a lab's shared queue is set up (a `lab:`
// block in it). gssh passes it to Locate and to the lab's detection;
// tests pass a private path or none.
const SystemPath = "/etc/gssh/hosts.yaml"

// Locate picks the hosts file: flag (--inventory), then env
// ($GSSH_INVENTORY), then home/.config/gssh/hosts.yaml, then system (gssh
// gives SystemPath; "": no machine-wide file). A path given by flag or
// env must exist. It returns ErrNotFound when none of the default places
// holds a file.
func Locate(flag, env, home, system string) (string, error) {
	for _, given := range []struct{ path, from string }{{flag, "--inventory"}, {env, "$GSSH_INVENTORY"}} {
		if given.path == "" {
			continue
		}
		if _, err := os.Stat(given.path); err != nil {
			return "", fmt.Errorf("inventory %s (from %s): %w", given.path, given.from, err)
		}
		return given.path, nil
	}
	var candidates []string
	if system != "" {
		candidates = append(candidates, system)
	}
	if home != "" {
		candidates = append([]string{filepath.Join(home, ".config", "gssh", "hosts.yaml")}, candidates...)
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNotFound
}

// LabLine reports whether the file at path has a top-level `lab:` key,
// and its line, without checking the rest: it tells a lab inventory from
// a personal one. A file that cannot be read or is not YAML has none
// (Load reports what is wrong with it).
func LabLine(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 0, false
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "lab" {
			return root.Content[i].Line, true
		}
	}
	return 0, false
}

// Load reads and validates the hosts file at path.
func Load(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return Parse(path, bytes.NewReader(b))
}

// Parse reads a hosts file from r; name is used in error messages. Errors
// carry "name:line:" and say what is expected. Unknown keys, duplicate host
// names, invalid names, ports and reserves are errors.
func Parse(name string, r io.Reader) (*Inventory, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty; it needs a `hosts:` list (see hosts.example.yaml)", name)
		}
		return nil, fmt.Errorf("%s%s", name, yamlErr(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document (after ---); put every host in one `hosts:` list", name, extra.Line)
	}
	p := parser{file: name}
	inv, err := p.document(&doc)
	if err != nil {
		return nil, err
	}
	if err := inv.Policy.Check(); err != nil { // every knob was checked where written: a guard
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	inv.File = name
	return inv, nil
}

// yamlErr turns "yaml: line 3: did not find expected key" into
// ":3: did not find expected key (invalid YAML)", to follow a file name.
func yamlErr(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		return ":" + rest + " (invalid YAML; check indentation and that tabs are not used)"
	}
	return ": " + msg + " (invalid YAML)"
}

type parser struct{ file string }

func (p parser) errf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, n.Line, fmt.Sprintf(format, args...))
}

var hostKeys = []string{"name", "address", "port", "user", "identity_file", "known_hosts", "labels", "reserve", "drain", "local", "reap_foreign", "run_as"}

func (p parser) document(doc *yaml.Node) (*Inventory, error) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty; it needs a `hosts:` list", p.file)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "expected a mapping with `defaults:` and `hosts:`, found %s", kindName(root))
	}
	if err := p.unique(root, "the top level"); err != nil {
		return nil, err
	}
	defaults := Host{ReservePct: DefaultReservePct}
	var pol Policy
	var nc notify.Config
	var hostsNode *yaml.Node
	var lab *Lab
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "defaults":
			if v.Kind != yaml.MappingNode {
				return nil, p.errf(v, "`defaults` must be a mapping, found %s", kindName(v))
			}
			if err := p.fields(v, &defaults, true); err != nil {
				return nil, err
			}
		case "hosts":
			hostsNode = v
		case "policy":
			if err := p.policy(v, &pol); err != nil {
				return nil, err
			}
		case "lab":
			var err error
			if lab, err = p.lab(k, v); err != nil {
				return nil, err
			}
		case "notify":
			if err := p.notifyBlock(v, &nc); err != nil {
				return nil, err
			}
		default:
			return nil, p.errf(k, "unknown key %q at top level; expected `defaults`, `hosts`, `policy`, `notify` or `lab`", k.Value)
		}
	}
	if hostsNode == nil {
		return nil, fmt.Errorf("%s: no `hosts:` list; add one (see hosts.example.yaml)", p.file)
	}
	if hostsNode.Kind != yaml.SequenceNode {
		return nil, p.errf(hostsNode, "`hosts` must be a list of hosts (`- name: gpu01`), found %s", kindName(hostsNode))
	}
	if len(hostsNode.Content) == 0 {
		return nil, p.errf(hostsNode, "`hosts` is empty; list at least one host (`- name: gpu01`)")
	}
	nc.Users = pol.NotifyUsers
	inv := &Inventory{Policy: pol, Lab: lab, Notify: nc}
	seen := map[string]int{}
	local := ""
	for _, hn := range hostsNode.Content {
		if hn.Kind != yaml.MappingNode {
			return nil, p.errf(hn, "each host must be a mapping with at least `name:`, found %s", kindName(hn))
		}
		h := defaults
		h.Labels = append([]string(nil), defaults.Labels...)
		h.Line = hn.Line
		h.Name = ""
		if err := p.fields(hn, &h, false); err != nil {
			return nil, err
		}
		if h.Name == "" {
			return nil, p.errf(hn, "host without `name:`")
		}
		if prev, dup := seen[h.Name]; dup {
			return nil, p.errf(hn, "duplicate host name %q (first defined at line %d); names must be unique", h.Name, prev)
		}
		seen[h.Name] = hn.Line
		if h.Local {
			if local != "" {
				return nil, p.errf(hn, "host %q is `local: true` but %q already is; the controller can be listed once", h.Name, local)
			}
			local = h.Name
			for i := 0; i+1 < len(hn.Content); i += 2 {
				switch k := hn.Content[i]; k.Value {
				case "address", "port", "user", "identity_file", "known_hosts":
					return nil, p.errf(k, "host %q is `local: true`: `%s` has no meaning there (it is probed and run without SSH); remove it, or drop `local: true` to reach the host over SSH", h.Name, k.Value)
				}
			}
		}
		inv.Hosts = append(inv.Hosts, h)
	}
	return inv, nil
}

// validName accepts what OpenSSH accepts as a Host alias and what is safe to
// print and to use in file names: letters, digits, '.', '-', '_'.
var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

func (p parser) fields(m *yaml.Node, h *Host, isDefaults bool) error {
	where := "`defaults`"
	if !isDefaults {
		where = "a host"
	}
	if err := p.unique(m, where); err != nil {
		return err
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if isDefaults && (k.Value == "name" || k.Value == "address" || k.Value == "local") {
			return p.errf(k, "`%s` cannot be a default; set it per host", k.Value)
		}
		switch k.Value {
		case "name":
			s, err := p.str(v, k.Value)
			if err != nil {
				return err
			}
			if !validName.MatchString(s) {
				return p.errf(v, "host name %q: use letters, digits, '.', '-' and '_' only", s)
			}
			h.Name = s
		case "address":
			s, err := p.str(v, k.Value)
			if err != nil {
				return err
			}
			if strings.ContainsAny(s, " \t\n/@[]") {
				return p.errf(v, "address %q: give a host name or IP (IPv6 without brackets), without user@ or spaces (user and port have their own keys)", s)
			}
			h.Address = s
		case "user":
			s, err := p.str(v, k.Value)
			if err != nil {
				return err
			}
			h.User = s
		case "identity_file":
			s, err := p.str(v, k.Value)
			if err != nil {
				return err
			}
			h.IdentityFile = s
		case "known_hosts":
			s, err := p.str(v, k.Value)
			if err != nil {
				return err
			}
			h.KnownHostsFile = s
		case "port":
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || n < 1 || n > 65535 {
				return p.errf(v, "port %q: expected a number from 1 to 65535", v.Value)
			}
			h.Port = n
		case "labels":
			if v.Kind != yaml.SequenceNode {
				return p.errf(v, "`labels` must be a list, e.g. [a100, nvlink]")
			}
			h.Labels = h.Labels[:0:0]
			for _, l := range v.Content {
				s, err := p.str(l, "label")
				if err != nil {
					return err
				}
				h.Labels = append(h.Labels, s)
			}
		case "reserve":
			pct, err := ParsePercent(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return p.errf(v, "reserve %q: expected a percentage from 0%% to 99%%, e.g. 10%%", v.Value)
			}
			h.ReservePct = pct
		case "reap_foreign":
			s, err := oneOf(p, v, "reap_foreign", "report", "kill")
			if err != nil {
				return err
			}
			h.ReapForeign = s == "kill"
		case "run_as":
			s, err := oneOf(p, v, "run_as", "login", "sudo")
			if err != nil {
				return err
			}
			h.RunAsSudo = s == "sudo"
		case "drain", "local":
			b, err := p.boolean(v, k.Value)
			if err != nil {
				return err
			}
			if k.Value == "drain" {
				h.Drain, h.DrainLine = b, k.Line
			} else {
				h.Local = b
			}
		default:
			return p.errf(k, "unknown key %q; a host takes %s", k.Value, strings.Join(hostKeys, ", "))
		}
	}
	return nil
}

var labKeys = []string{"state", "pass_user", "group", "serve"}

// lab reads the `lab:` block: state (an absolute path) and pass_user are
// required, group is gssh unless given.
func (p parser) lab(k, m *yaml.Node) (*Lab, error) {
	if m.Kind != yaml.MappingNode {
		return nil, p.errf(m, "`lab` must be a mapping with `state:` and `pass_user:`, found %s", kindName(m))
	}
	if err := p.unique(m, "`lab`"); err != nil {
		return nil, err
	}
	lab := &Lab{Group: DefaultLabGroup, Line: k.Line}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value == "serve" {
			b, err := p.boolean(v, "lab serve")
			if err != nil {
				return nil, err
			}
			lab.Serve, lab.ServeLine = b, v.Line
			continue
		}
		s, err := p.str(v, "lab "+k.Value)
		if err != nil && slices.Contains(labKeys, k.Value) {
			return nil, err
		}
		switch k.Value {
		case "state":
			if !filepath.IsAbs(s) || filepath.Clean(s) != s || strings.HasSuffix(s, "/") {
				return nil, p.errf(v, "lab state %q: give the absolute path of the shared state file, such as /var/lib/gssh/state.db", s)
			}
			lab.State, lab.StateLine = s, v.Line
		case "pass_user", "group":
			if !validUser.MatchString(s) {
				return nil, p.errf(v, "lab %s %q: give an account name (letters, digits, '.', '_', '-')", k.Value, s)
			}
			if k.Value == "group" {
				lab.Group, lab.GroupLine = s, v.Line
			} else {
				lab.PassUser, lab.PassUserLine = s, v.Line
			}
		default:
			return nil, p.errf(k, "unknown key %q in `lab`; it takes %s", k.Value, strings.Join(labKeys, ", "))
		}
	}
	switch {
	case lab.State == "":
		return nil, p.errf(k, "`lab` has no `state:`; give the shared state file, such as `state: /var/lib/gssh/state.db`")
	case lab.PassUser == "":
		return nil, p.errf(k, "`lab` has no `pass_user:`; name the account that runs the passes, such as `pass_user: gssh`")
	}
	return lab, nil
}
