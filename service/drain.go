package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// DrainRequest asks to drain hosts (gssh drain).
type DrainRequest struct {
	Hosts  []string // inventory host names: at least one
	Reason string   // why (--reason); "" for none
	// From is when the hosts stop taking new jobs (--at): before then they
	// take only jobs whose walltime ends by then. Zero: now. A time
	// before now is an error wrapping ErrPast.
	From time.Time
	// Keep leaves the drain of a host that gssh drain drained already as
	// it is (who, when, why, from when): gssh drain --wait given neither
	// --reason nor --at waits for such a host without replacing its drain.
	Keep bool
}

// HostDrain is one host a Drain or Resume acted on.
type HostDrain struct {
	Host string `json:"host"`
	// Drain is the drain recorded (Drain) or lifted (Resume).
	Drain sched.Drain `json:"drain"`
	// Replaced is the drain a Drain replaced (the host was drained
	// already); nil when there was none.
	Replaced *sched.Drain `json:"replaced,omitempty"`
	// Kept says the host was drained already and DrainRequest.Keep left
	// its drain (Drain) as it was.
	Kept bool `json:"kept,omitempty"`
	// Inventory is where the inventory drains the host as well
	// ("FILE:LINE" of its `drain: true`); "" when it does not. Only an
	// edit of the inventory lifts that drain.
	Inventory string `json:"inventory,omitempty"`
	// Jobs are the gssh jobs on the host now that hold GPUs (launching,
	// running, preempting, unknown): a drain lets them run to their end.
	Jobs []job.Job `json:"jobs"`
}

// DrainResult is what Drain or Resume did, host by host in the order
// given.
type DrainResult struct {
	Hosts []HostDrain `json:"hosts"`
}

// Errors of Drain and Resume (each wrapped with what to do).
var (
	// ErrPast: DrainRequest.From is before now.
	ErrPast = errors.New("is in the past")
	// ErrNotDrained: Resume of a host gssh drain did not drain.
	ErrNotDrained = errors.New("is not drained")
	// ErrNotAdmin: a member of a shared lab who is not its admin (nor its
	// pass user) asked to drain or resume hosts.
	ErrNotAdmin = errors.New("only the lab's admins and its pass user may drain and resume hosts")
)

// Drain implements Service: it records a drain of every host of r (one
// transaction: all of them, or none when one is unknown), by this
// service's user, now. It stops no job: the jobs running there go on, and
// each host's Jobs lists them. A host drained already gets the new drain
// (Replaced is the old one).
func (l *Local) Drain(_ context.Context, r DrainRequest) (DrainResult, error) {
	if len(r.Hosts) == 0 {
		return DrainResult{}, errors.New("give the hosts to drain (gssh hosts lists them)")
	}
	if err := checkReason(r.Reason); err != nil {
		return DrainResult{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return DrainResult{}, err
	}
	if err := l.mayDrain(f, "drain"); err != nil {
		return DrainResult{}, err
	}
	if _, err := f.Select(r.Hosts, nil); err != nil {
		return DrainResult{}, fmt.Errorf("%w; no host was drained", err)
	}
	now := l.opt.Now()
	from := r.From
	if from.IsZero() {
		from = now
	}
	if from.Before(now) {
		return DrainResult{}, fmt.Errorf("--at %s %w (it is %s now): give a time to come, or leave --at out to drain at once; no host was drained",
			from.Local().Format("2006-01-02 15:04:05"), ErrPast, now.Local().Format("2006-01-02 15:04:05"))
	}
	st, err := l.store(!l.opt.StateExplicit) // a --state naming no file is a typo: no new, empty queue
	if err != nil {
		return DrainResult{}, err
	}
	d := sched.Drain{By: l.opt.User, At: now, From: from, Reason: r.Reason}
	out := DrainResult{Hosts: []HostDrain{}}
	err = changeDrains(st, func(ds map[string]sched.Drain) error {
		out.Hosts = out.Hosts[:0]
		for _, h := range uniq(r.Hosts) {
			hd := HostDrain{Host: h, Drain: d}
			if old, ok := ds[h]; ok && r.Keep {
				hd.Drain, hd.Kept = old, true
				out.Hosts = append(out.Hosts, hd)
				continue
			} else if ok {
				hd.Replaced = &old
			}
			ds[h] = d
			out.Hosts = append(out.Hosts, hd)
		}
		return nil
	})
	if err != nil {
		return DrainResult{}, err
	}
	for _, h := range out.Hosts {
		if h.Kept {
			continue // nothing changed
		}
		at := time.Time{} // drained at once: the event's time says when
		if from.After(now) {
			at = from
		}
		l.logEvent(eventlog.Drain(now, h.Host, d.By, d.Reason, at))
	}
	return out, l.withJobs(st, f.Inventory(), &out)
}

// Resume implements Service: it lifts the drains gssh drain recorded on
// hosts (one transaction). A host it did not drain is an error and
// nothing changes for any host: one unknown to the inventory (and never
// drained), one drained only by the inventory's `drain: true` (the error
// names the file and line to edit), one not drained at all (as scontrol
// refuses to resume a node that is not drained). A host the inventory
// drains as well is resumed here and stays drained by the inventory
// (HostDrain.Inventory says where). Queued jobs start there at the next
// pass.
func (l *Local) Resume(_ context.Context, hosts []string) (DrainResult, error) {
	if len(hosts) == 0 {
		return DrainResult{}, errors.New("give the hosts to resume (gssh hosts shows the drained ones)")
	}
	f, err := l.hosts()
	if err != nil {
		return DrainResult{}, err
	}
	if err := l.mayDrain(f, "resume"); err != nil {
		return DrainResult{}, err
	}
	st, err := l.store(false)
	switch {
	case errors.Is(err, state.ErrNoState) && !l.opt.StateExplicit:
		st = nil // nothing was ever drained (nor submitted)
	case err != nil:
		return DrainResult{}, err
	}
	inv := f.Inventory()
	out := DrainResult{Hosts: []HostDrain{}}
	resume := func(ds map[string]sched.Drain) error {
		out.Hosts = out.Hosts[:0]
		refused := &resumeError{}
		for _, h := range uniq(hosts) {
			ih, known := inv.Lookup(h)
			d, drained := ds[h]
			switch {
			case !drained && !known:
				_, err := f.Select([]string{h}, nil)
				refused.errs = append(refused.errs, err)
				continue
			case !drained && ih.Drain:
				refused.errs = append(refused.errs, fmt.Errorf("host %s is drained in the inventory (%s: drain: true), not by gssh drain: set drain: false there to resume it", h, inventoryDrain(inv, ih)))
				continue
			case !drained:
				refused.errs = append(refused.errs, fmt.Errorf("host %s %w (gssh drain did not drain it): nothing to resume", h, ErrNotDrained))
				continue
			}
			delete(ds, h)
			out.Hosts = append(out.Hosts, HostDrain{Host: h, Drain: d, Inventory: inventoryDrain(inv, ih)})
		}
		if len(refused.errs) > 0 {
			return refused
		}
		return nil
	}
	if st == nil {
		return DrainResult{}, resume(map[string]sched.Drain{})
	}
	if err := changeDrains(st, resume); err != nil {
		return DrainResult{}, err
	}
	now := l.opt.Now()
	for _, h := range out.Hosts {
		l.logEvent(eventlog.Resume(now, h.Host, l.opt.User))
	}
	return out, l.withJobs(st, inv, &out)
}

// MaxReason is the longest drain reason, in bytes: it is shown in every
// pending reason of the jobs that wait for the host, and in gssh hosts.
const MaxReason = 200

// checkReason refuses a drain reason that every submitter's terminal
// would get raw (control characters: newlines, escapes), one that is not
// UTF-8, and one longer than MaxReason.
func checkReason(r string) error {
	switch {
	case !utf8.ValidString(r):
		return errors.New("--reason: not valid UTF-8 text; give plain words, such as \"driver upgrade\"; no host was drained")
	case strings.IndexFunc(r, unicode.IsControl) >= 0:
		return fmt.Errorf("--reason %q: has control characters (a newline, a tab, an escape); give one line of plain words; no host was drained", r)
	case len(r) > MaxReason:
		return fmt.Errorf("--reason: %d bytes, more than %d: it is shown in every waiting job's reason; give a short one, such as \"driver upgrade, back at 10:00\"; no host was drained", len(r), MaxReason)
	}
	return nil
}

// resumeError is a resume refused: why, host by host. Nothing changed.
type resumeError struct{ errs []error }

func (e *resumeError) Error() string {
	var parts []string
	for _, err := range e.errs {
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "; ") + "; no host was resumed"
}

func (e *resumeError) Unwrap() []error { return e.errs }

// changeDrains is the one place where drains change: fn, given every
// host's drain, adds, replaces or deletes them, and they are stored in
// one transaction (all or none). gssh drain and gssh resume both come
// through here; each writes its host_drain or host_resume events once the
// change is stored.
func changeDrains(st *state.Bolt, fn func(map[string]sched.Drain) error) error {
	_, err := st.UpdateDrains(fn)
	return err
}

// DrainJobs implements Service: the gssh jobs on hosts that hold GPUs
// (launching, running, preempting, unknown), in id order, as the state
// file records them (it never creates it).
func (l *Local) DrainJobs(_ context.Context, hosts []string) ([]job.Job, error) {
	st, none, err := l.readStore()
	if err != nil || none {
		return []job.Job{}, err
	}
	active, err := st.Active()
	return onHosts(active, hosts), err // with ErrBadRecord: the ones that could be read
}

// withJobs fills each host of out with the gssh jobs holding GPUs there
// and where the inventory drains it too.
func (l *Local) withJobs(st *state.Bolt, inv *inventory.Inventory, out *DrainResult) error {
	active, err := st.Active()
	for i := range out.Hosts {
		h := &out.Hosts[i]
		h.Jobs = onHosts(active, []string{h.Host})
		if ih, ok := inv.Lookup(h.Host); ok {
			h.Inventory = inventoryDrain(inv, ih)
		}
	}
	if errors.Is(err, state.ErrBadRecord) {
		return nil // the drain is done; gssh ps names the unreadable records
	}
	return err
}

// onHosts are the jobs of active placed on one of hosts that hold GPUs.
func onHosts(active []job.Job, hosts []string) []job.Job {
	out := []job.Job{}
	for _, j := range active {
		if j.State.Active() && slices.Contains(hosts, j.Placement.Host) {
			out = append(out, j)
		}
	}
	return out
}

// inventoryDrain is where the inventory drains h ("FILE:LINE", or the
// file alone when the line is not known); "" when it does not.
func inventoryDrain(inv *inventory.Inventory, h inventory.Host) string {
	if !h.Drain {
		return ""
	}
	file := inv.File
	if file == "" {
		file = "the inventory"
	}
	if h.DrainLine > 0 {
		return fmt.Sprintf("%s:%d", file, h.DrainLine)
	}
	return file
}

// mayDrain refuses a lab member's drain or resume (what) unless the
// member is one of the lab's admins (policy users: admin: true): hosts
// are the lab's. The pass user and personal mode may.
func (l *Local) mayDrain(f *fleet.Fleet, what string) error {
	if !l.restricted() || f.Inventory().Policy.Plan.Users[l.opt.User].Admin {
		return nil
	}
	if l.guest() {
		return fmt.Errorf("%w: you are %s; in %s's queue an admin is a `policy: users:` entry with admin: true; ask %s to %s the hosts", ErrNotAdmin, l.opt.User, l.opt.Owner, l.opt.Owner, what)
	}
	return fmt.Errorf("%w: you are %s; in the lab's queue (%s) an admin is a `policy: users:` entry with admin: true; ask one to %s the hosts", ErrNotAdmin, l.opt.User, l.lab.file, what)
}

// uniq is names without repeats, in their order.
func uniq(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
