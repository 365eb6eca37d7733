package service

import (
	"context"
	"errors"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/serve"
	"github.com/gssh/gssh/state"
)

// kinds are the errors a front end tells apart (errors.Is), by the
// Fault kind gssh serve's answer names them with: a RemoteError of that
// kind is that error again. The first that an error wraps is its kind.
var kinds = []struct {
	kind string
	err  error
}{
	{FaultDamaged, state.ErrDamaged},
	{"bad_record", state.ErrBadRecord},
	{"disk_full", state.ErrDiskFull},
	{"no_state", state.ErrNoState},
	{"not_found", state.ErrNotFound},
	{"not_queued", control.ErrNotQueued},
	{"not_held", control.ErrNotHeld},
	{"not_running", control.ErrNotRunning},
	{"ended", control.ErrEnded},
	{"pass_busy", control.ErrPassBusy},
	{"not_pass_user", ErrNotPassUser},
	{"not_yours", ErrNotYours},
	{"not_admin", ErrNotAdmin},
	{"past", ErrPast},
	{"not_drained", ErrNotDrained},
}

// FaultOf is the Fault of err in an answer of gssh serve: its words,
// code (the caller's: gssh's exit status) and kind, which a Remote makes
// an error again (faultError). nil for nil.
func FaultOf(err error, code int) *serve.Fault {
	if err == nil {
		return nil
	}
	f := &serve.Fault{Message: err.Error(), Code: code}
	var pe *PartialError
	switch {
	case errors.As(err, &pe):
		f.Kind, f.Failed, f.Total = FaultPartial, pe.Failed, pe.Total
		return f
	case errors.Is(err, ErrNotServed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		f.Kind = FaultNotServed // or cut short on the server's side (it stops, the request ran too long): the client does it
		return f
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			f.Kind = k.kind
			break
		}
	}
	return f
}

// faultError is the error gssh serve answered with, as its own error
// was: a *PartialError for hosts that could not be probed, else a
// *RemoteError. nil for nil.
func faultError(f *serve.Fault) error {
	switch {
	case f == nil:
		return nil
	case f.Kind == FaultPartial:
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
// exit status it mapped to there (Fault.Code). It is the error of its
// kind (state.ErrNotFound, ErrNotYours, ...: see kinds).
type RemoteError struct{ Fault serve.Fault }

func (e *RemoteError) Error() string { return e.Fault.Message }

// Is reports whether the server's error was target.
func (e *RemoteError) Is(target error) bool {
	for _, k := range kinds {
		if k.kind == e.Fault.Kind {
			return target == k.err
		}
	}
	return false
}

// heldWire is a HoldResult as an answer carries it.
type heldWire struct {
	Job job.Job      `json:"job"`
	Err *serve.Fault `json:"error,omitempty"`
}

func heldToWire(rs []HoldResult, code func(error) int) []heldWire {
	out := make([]heldWire, len(rs))
	for i, r := range rs {
		out[i] = heldWire{Job: r.Job, Err: FaultOf(r.Err, codeOf(code, r.Err))}
	}
	return out
}

func heldFromWire(ws []heldWire) []HoldResult {
	out := make([]HoldResult, len(ws))
	for i, w := range ws {
		out[i] = HoldResult{Job: w.Job, Err: faultError(w.Err)}
	}
	return out
}

// codeOf is code(err), 0 for nil.
func codeOf(code func(error) int, err error) int {
	if err == nil || code == nil {
		return 0
	}
	return code(err)
}

// passWire is a PassResult as an answer carries it: its problems too.
type passWire struct {
	PassResult
	Problems     []*serve.Fault       `json:"problem_faults,omitempty"`
	Housekeeping control.Housekeeping `json:"housekeeping"`
}

func passToWire(p PassResult, code func(error) int) passWire {
	w := passWire{PassResult: p, Housekeeping: p.Housekeeping}
	for _, e := range p.Problems {
		w.Problems = append(w.Problems, FaultOf(e, codeOf(code, e)))
	}
	return w
}

func (w passWire) result() PassResult {
	p := w.PassResult
	p.Problems, p.Housekeeping = nil, w.Housekeeping
	for _, f := range w.Problems {
		p.Problems = append(p.Problems, faultError(f))
	}
	return p
}

// submitWire is a SubmitResult as an answer carries it.
type submitWire struct {
	SubmitResult
	PassError *serve.Fault   `json:"pass_fault,omitempty"`
	Problems  []*serve.Fault `json:"problem_faults,omitempty"`
}

func submitToWire(r SubmitResult, code func(error) int) submitWire {
	w := submitWire{SubmitResult: r, PassError: FaultOf(r.PassError, codeOf(code, r.PassError))}
	w.SubmitResult.PassError, w.SubmitResult.Problems = nil, nil
	for _, e := range r.Problems {
		w.Problems = append(w.Problems, FaultOf(e, codeOf(code, e)))
	}
	return w
}

func (w submitWire) result() SubmitResult {
	r := w.SubmitResult
	r.PassError = faultError(w.PassError)
	for _, f := range w.Problems {
		r.Problems = append(r.Problems, faultError(f))
	}
	return r
}

// cancelWire is a CancelResult as an answer carries it.
type cancelWire struct {
	Job       job.Job      `json:"job"`
	Freed     bool         `json:"freed,omitempty"`
	Recorded  bool         `json:"recorded,omitempty"`
	Pass      *passWire    `json:"pass,omitempty"`
	PassError *serve.Fault `json:"pass_error,omitempty"`
}

func cancelToWire(r CancelResult, code func(error) int) cancelWire {
	w := cancelWire{Job: r.Job, Freed: r.Freed, Recorded: r.Recorded, PassError: FaultOf(r.PassError, codeOf(code, r.PassError))}
	if r.Pass != nil {
		p := passToWire(*r.Pass, code)
		w.Pass = &p
	}
	return w
}

func (w cancelWire) result() CancelResult {
	r := CancelResult{Job: w.Job, Freed: w.Freed, Recorded: w.Recorded, PassError: faultError(w.PassError)}
	if w.Pass != nil {
		p := w.Pass.result()
		r.Pass = &p
	}
	return r
}
