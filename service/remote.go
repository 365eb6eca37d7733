package service

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gssh/gssh/inventory"
)

// OpGPUs is the op of gssh serve that a Remote's GPUs asks for.
const OpGPUs = "gpus"

// Remote is a Service whose calls the state's running gssh serve makes,
// as the user this process runs as (the kernel says who: SO_PEERCRED),
// over the SSH connections it keeps open, with the same documents and
// errors as Local's. A call is Local's when no gssh serve runs for the
// state, or it does not answer it (an older gssh serve; one that reads
// the hosts otherwise than this process would: another inventory,
// ssh_config, HOME or timeouts, in personal mode), and so are the state
// file's own calls (backup, check, restore), and Hosts in personal mode
// (it measures fresh connections). In a lab whose queue gssh serve alone
// keeps (`serve: true`) nothing is Local's but those: with gssh serve
// down a call is an error wrapping ErrServeDown. Run goes through gssh
// serve's duplex op (OpRun).
type Remote struct{ *Local }

// View is how a process reaches the hosts, as a Remote's request says
// it: gssh serve answers only a request whose view is its own. In a
// shared lab every member's view is the lab's, whatever their own
// ssh_config: only Inventory is compared.
type View struct {
	State     string `json:"state"`     // the state file's absolute path
	Inventory string `json:"inventory"` // the file's absolute path; "" for none (this host alone)
	// InventorySum is the SHA-256 of the inventory's content (hex) when
	// it was read: a gssh serve that read it before an edit (and no
	// SIGHUP since) answers no request made after it.
	InventorySum   string        `json:"inventory_sha256,omitempty"`
	Home           string        `json:"home,omitempty"`
	SSHConfig      string        `json:"ssh_config,omitempty"`
	ConnectTimeout time.Duration `json:"connect_timeout,omitempty"`
	ProbeTimeout   time.Duration `json:"probe_timeout,omitempty"`
}

// FaultNotServed is the Fault kind of gssh serve's answer to a request
// it does not answer (a View not its own, arguments it cannot read): the
// client makes the call itself.
const FaultNotServed = "not_served"

// ErrNotServed wraps the reason why gssh serve does not answer a
// request (FaultNotServed).
var ErrNotServed = errors.New("not answered by this gssh serve")

// View is how l reaches the hosts; an error when its inventory cannot be
// found (a Remote then leaves the call to Local, which says so).
func (l *Local) View() (View, error) {
	if l.lab != nil {
		sum, err := fileSum(l.lab.file)
		return View{State: l.opt.StatePath, Inventory: l.lab.file, InventorySum: sum}, err
	}
	state, err := filepath.Abs(l.opt.StatePath)
	if err != nil {
		return View{}, err
	}
	v := View{State: state, Home: l.opt.Fleet.Home, SSHConfig: l.opt.Fleet.SSHConfig, ConnectTimeout: l.opt.Fleet.ConnectTimeout, ProbeTimeout: l.opt.ProbeTimeout}
	if l.opt.Fleet.Inventory != nil {
		return View{}, errors.New("an inventory given in memory is no file another process reads")
	}
	p, err := inventory.Locate(l.opt.Fleet.InventoryPath, l.opt.Fleet.InventoryEnv, l.opt.Fleet.Home, l.opt.Fleet.SystemInventory)
	if err != nil {
		return View{}, err
	}
	if p != "" {
		if p, err = filepath.Abs(p); err != nil {
			return View{}, err
		}
	}
	v.Inventory = p
	if p != "" {
		if v.InventorySum, err = fileSum(p); err != nil {
			return View{}, err
		}
	}
	return v, nil
}

// fileSum is the SHA-256 of the file's content, in hex.
func fileSum(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Answers returns nil when l, a gssh serve's service, answers a request
// made with view v: the view is l's own (in a shared lab, the lab's
// inventory). Else an error wrapping ErrNotServed says how they differ.
func (l *Local) Answers(v View) error {
	own, err := l.checked.view, l.checked.err
	if !l.checked.done {
		own, err = l.View()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotServed, err)
	}
	if l.lab != nil {
		own, v = View{State: own.State, Inventory: own.Inventory, InventorySum: own.InventorySum}, View{State: v.State, Inventory: v.Inventory, InventorySum: v.InventorySum}
	}
	if own != v {
		return fmt.Errorf("%w: %s", ErrNotServed, own.differ(v))
	}
	return nil
}

// differ says how v, a request's view, differs from w, gssh serve's.
func (w View) differ(v View) string {
	var diffs []string
	say := func(what string, own, req any) {
		if own != req {
			diffs = append(diffs, fmt.Sprintf("%s: gssh serve's %v, this command's %v", what, orNone(own), orNone(req)))
		}
	}
	say("state", w.State, v.State)
	say("inventory", w.Inventory, v.Inventory)
	if w.Inventory == v.Inventory && w.InventorySum != v.InventorySum {
		diffs = append(diffs, "the inventory was changed since gssh serve read it (reload it: SIGHUP)")
	}
	say("HOME", w.Home, v.Home)
	say("--ssh-config", w.SSHConfig, v.SSHConfig)
	say("--connect-timeout", w.ConnectTimeout, v.ConnectTimeout)
	say("--probe-timeout", w.ProbeTimeout, v.ProbeTimeout)
	return "it reads the hosts otherwise: " + strings.Join(diffs, "; ")
}

// orNone is v, or "none" for an empty string.
func orNone(v any) any {
	if v == "" {
		return "none"
	}
	return v
}
