package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/state"
)

// OpGPUs is the op of gssh serve that a Remote's GPUs asks for.
const OpGPUs = "gpus"

// Remote is a Service whose GPUs the state's running gssh serve answers,
// over the SSH connections it keeps open, with the same document and
// errors as Local's. Every other call is Local's (Hosts too: it measures
// fresh connections), and so is GPUs when no gssh serve runs for the
// state (or it does not answer) or when it reads the hosts otherwise
// than this process would (another inventory, ssh_config, HOME or
// timeouts, in personal mode).
type Remote struct{ *Local }

// View is how a process reaches the hosts, as a Remote's request says
// it: gssh serve answers only a request whose view is its own. In a
// shared lab every member's view is the lab's, whatever their own
// ssh_config: only Inventory is compared.
type View struct {
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

// HostsArgs are the arguments of OpGPUs.
type HostsArgs struct {
	Query HostQuery `json:"query"`
	View  View      `json:"view"`
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
		return View{Inventory: l.lab.file, InventorySum: sum}, err
	}
	v := View{Home: l.opt.Fleet.Home, SSHConfig: l.opt.Fleet.SSHConfig, ConnectTimeout: l.opt.Fleet.ConnectTimeout, ProbeTimeout: l.opt.ProbeTimeout}
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

// GPUs implements Service: gssh serve's answer, else Local's.
func (r Remote) GPUs(ctx context.Context, q HostQuery) (GPUsDoc, error) {
	var doc GPUsDoc
	if served, err := r.call(ctx, OpGPUs, q, &doc); served {
		return doc, err
	}
	return r.Local.GPUs(ctx, q)
}

// call asks the state's gssh serve for op over q, its answer read into
// result, and its error; served false when the call is Local's to make
// (see Remote).
func (r Remote) call(ctx context.Context, op string, q HostQuery, result any) (served bool, err error) {
	view, verr := r.View()
	if verr != nil {
		return false, nil
	}
	err = serve.Call(ctx, r.SocketPath(), r.serverUID(), op, HostsArgs{Query: q, View: view}, result)
	var f *serve.Fault
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return true, interrupted(ctx)
	case !errors.As(err, &f) || f.Kind == FaultNotServed || f.Kind == serve.KindUnknownOp || f.Kind == serve.KindRefused:
		return false, nil // none serves, or not this call: it is made here
	}
	return true, faultError(f)
}

// faultError is the error gssh serve answered with, as its own error
// was: a *PartialError for hosts that could not be probed, else a
// *RemoteError.
func faultError(f *serve.Fault) error {
	if f.Kind == FaultPartial {
		return &PartialError{Failed: f.Failed, Total: f.Total}
	}
	return &RemoteError{Fault: *f}
}

// Fault kinds of the errors a Remote makes again (see FaultOf).
const (
	FaultPartial = "partial" // a *PartialError
	FaultDamaged = "damaged" // an error wrapping state.ErrDamaged
)

// RemoteError is an error gssh serve answered with: its words, and the
// exit status it mapped to there (Fault.Code). It is state.ErrDamaged
// when that was.
type RemoteError struct{ Fault serve.Fault }

func (e *RemoteError) Error() string { return e.Fault.Message }

// Is reports whether the server's error was target (state.ErrDamaged).
func (e *RemoteError) Is(target error) bool {
	return target == state.ErrDamaged && e.Fault.Kind == FaultDamaged
}

// FaultOf is the Fault of err in an answer of gssh serve: its words,
// code (the caller's: gssh's exit status) and kind, which a Remote makes
// an error again (faultError).
func FaultOf(err error, code int) *serve.Fault {
	f := &serve.Fault{Message: err.Error(), Code: code}
	var pe *PartialError
	switch {
	case errors.As(err, &pe):
		f.Kind, f.Failed, f.Total = FaultPartial, pe.Failed, pe.Total
	case errors.Is(err, state.ErrDamaged):
		f.Kind = FaultDamaged
	case errors.Is(err, ErrNotServed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		f.Kind = FaultNotServed // or cut short on the server's side (it stops, the request ran too long): the client does it
	}
	return f
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
		own, v = View{Inventory: own.Inventory, InventorySum: own.InventorySum}, View{Inventory: v.Inventory, InventorySum: v.InventorySum}
	}
	if own != v {
		return fmt.Errorf("%w: it reads the hosts as %+v, the request as %+v", ErrNotServed, own, v)
	}
	return nil
}
