package fakelab

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
)

// Options configures Start.
type Options struct {
	// Dir is the lab's directory, created (mode 0700) and removed by
	// Close: the hosts' homes, the client key, known_hosts, the inventory.
	Dir   string
	Hosts []HostSpec // DefaultLab() when empty
	// Shim is an executable that runs Shim first thing (gssh does): it
	// answers as each host's nvidia-smi, and gssh pushes it as the helper
	// when GSSH_HELPER names it.
	Shim string
	// Labels are the inventory labels of each host, by name (the GPU
	// model's by default: a100, rtx4090, h100 and mig).
	Labels map[string][]string
	// Policy is the inventory's policy block, as YAML (optional).
	Policy map[string]any
}

// Lab is a simulated GPU lab: one SSH server per host on loopback (each
// with its own host key, pinned in the lab's known_hosts), whose sessions
// run real local processes as the current user, in the host's own home,
// with the host's GPUs answering through the shim. gssh reaches it
// through the inventory it writes, as it reaches real hosts.
type Lab struct {
	Dir        string
	Inventory  string // hosts.yaml
	KnownHosts string
	Key        string // the client's private key (ed25519, 0600)
	Hosts      []*Host
	foreign    []*exec.Cmd
}

// Host is one simulated host.
type Host struct {
	Spec   HostSpec
	Home   string // its login's home (job directories, the helper cache)
	Server *Server
}

// Start builds and starts a lab. On error, what was started is stopped
// and Dir removed.
func Start(opt Options) (l *Lab, err error) {
	if len(opt.Hosts) == 0 {
		opt.Hosts = DefaultLab()
	}
	if opt.Shim == "" {
		return nil, errors.New("fakelab: no shim executable")
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("fakelab: %w", err)
	}
	dir, err := filepath.Abs(opt.Dir)
	if err != nil {
		return nil, err
	}
	l = &Lab{Dir: dir, Inventory: filepath.Join(dir, "hosts.yaml"), KnownHosts: filepath.Join(dir, "known_hosts"), Key: filepath.Join(dir, "id_ed25519")}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	hosts := slices.Clone(opt.Hosts)
	for i := range hosts {
		hosts[i].Seed = dir
	}
	opt.Hosts = hosts
	b, err := json.MarshalIndent(labDoc{Hosts: opt.Hosts}, "", "  ")
	if err != nil {
		return l, err
	}
	if err := os.WriteFile(filepath.Join(dir, labFile), b, 0o600); err != nil {
		return l, fmt.Errorf("fakelab: %w", err)
	}
	pub, err := writeKey(l.Key)
	if err != nil {
		return l, err
	}
	login, err := user.Current()
	if err != nil {
		return l, fmt.Errorf("fakelab: who am I: %w", err)
	}
	var known []string
	for _, spec := range opt.Hosts {
		h, err := l.startHost(spec, pub, login, opt.Shim)
		if err != nil {
			return l, fmt.Errorf("fakelab: host %s: %w", spec.Name, err)
		}
		l.Hosts = append(l.Hosts, h)
		known = append(known, h.Server.KnownHostsLine)
		for _, f := range spec.Foreign {
			if err := l.startForeign(h, f); err != nil {
				return l, fmt.Errorf("fakelab: host %s: %w", spec.Name, err)
			}
		}
	}
	if err := os.WriteFile(l.KnownHosts, []byte(strings.Join(known, "\n")+"\n"), 0o600); err != nil {
		return l, fmt.Errorf("fakelab: %w", err)
	}
	return l, l.writeInventory(login.Username, opt)
}

// startHost makes host's home and bin directories and starts its server.
func (l *Lab) startHost(spec HostSpec, pub ssh.PublicKey, login *user.User, shim string) (*Host, error) {
	root := filepath.Join(l.Dir, "hosts", spec.Name)
	home, bin := filepath.Join(root, "home"), filepath.Join(root, "bin")
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(shim, filepath.Join(bin, "nvidia-smi")); err != nil {
		return nil, err
	}
	env := []string{
		"HOME=" + home, "USER=" + login.Username, "LOGNAME=" + login.Username, "SHELL=/bin/sh",
		"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8", LabVar + "=" + l.Dir, HostVar + "=" + spec.Name,
	}
	s, err := NewServer(ServerOptions{AuthorizedKeys: []ssh.PublicKey{pub}, Exec: processExec(home, env)})
	if err != nil {
		return nil, err
	}
	return &Host{Spec: spec, Home: home, Server: s}, nil
}

// startForeign starts a process run by hand on h: a sleep named f.Name
// that holds f.Mem of GPU f.GPU for the model.
func (l *Lab) startForeign(h *Host, f Foreign) error {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: sleep, Args: []string{f.Name, "2147483647"}, Dir: h.Home,
		Env: []string{"HOME=" + h.Home, LabVar + "=" + l.Dir, HostVar + "=" + h.Spec.Name,
			HoldVar + "=" + strconv.Itoa(f.GPU) + ":" + strconv.FormatUint(f.Mem>>20, 10)},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}}
	if err := cmd.Start(); err != nil {
		return err
	}
	l.foreign = append(l.foreign, cmd)
	return nil
}

// writeInventory writes hosts.yaml: every host at its loopback address
// and port, with the lab's key and known_hosts.
func (l *Lab) writeInventory(login string, opt Options) error {
	type hostEntry struct {
		Name         string   `yaml:"name"`
		Address      string   `yaml:"address"`
		Port         int      `yaml:"port"`
		User         string   `yaml:"user"`
		IdentityFile string   `yaml:"identity_file"`
		KnownHosts   string   `yaml:"known_hosts"`
		Labels       []string `yaml:"labels,omitempty"`
	}
	doc := struct {
		Hosts  []hostEntry    `yaml:"hosts"`
		Policy map[string]any `yaml:"policy,omitempty"`
	}{Policy: opt.Policy}
	for _, h := range l.Hosts {
		labels, ok := opt.Labels[h.Spec.Name]
		if !ok {
			labels = modelLabels(h.Spec)
		}
		doc.Hosts = append(doc.Hosts, hostEntry{Name: h.Spec.Name, Address: h.Server.Host, Port: h.Server.Port, User: login,
			IdentityFile: l.Key, KnownHosts: l.KnownHosts, Labels: labels})
	}
	var b bytes.Buffer
	b.WriteString("# A simulated lab (gssh demo): every host is an SSH server on this machine.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(l.Inventory, b.Bytes(), 0o600)
}

// modelLabels are a host's labels from its GPUs' models.
func modelLabels(h HostSpec) []string {
	var out []string
	add := func(l string) {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	for _, g := range h.GPUs {
		n := strings.ToLower(g.Name)
		switch {
		case strings.Contains(n, "a100"):
			add("a100")
		case strings.Contains(n, "h100"):
			add("h100")
		case strings.Contains(n, "4090"):
			add("rtx4090")
		}
		if len(g.MIG) > 0 {
			add("mig")
		}
	}
	return out
}

// writeKey writes a fresh ed25519 client key to path (0600) and returns
// its public half.
func writeKey(path string) (ssh.PublicKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "gssh demo")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("fakelab: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return signer.PublicKey(), nil
}

// Close stops every host and every process started there (sessions, the
// jobs they started, the foreign processes: all that carries the lab's
// mark), then removes the lab's directory.
func (l *Lab) Close() error {
	for _, h := range l.Hosts {
		h.Server.Close()
	}
	for i := 0; i < 50; i++ {
		pids := l.processes()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range l.foreign {
		c.Wait()
	}
	for _, h := range l.Hosts {
		h.Server.Wait(5 * time.Second)
	}
	return os.RemoveAll(l.Dir)
}

// processes lists the pids whose environment carries the lab's mark.
func (l *Lab) processes() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if env := readEnv(filepath.Join("/proc", e.Name(), "environ")); env[LabVar] == l.Dir {
			out = append(out, pid)
		}
	}
	return out
}
