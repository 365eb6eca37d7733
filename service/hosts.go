package service

import (
	"context"
	"errors"

	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// GPUs implements Service, with the gssh jobs holding each GPU as the
// state file records them. The error is a *PartialError when some host
// could not be probed (the document still lists it, with its state); a
// state file that cannot be read leaves the jobs out and says so in
// GPUsDoc.JobsError; a damaged one (state.ErrDamaged) is the error too,
// with the document whole.
func (l *Local) GPUs(ctx context.Context, q HostQuery) (GPUsDoc, error) {
	reports, err := l.probe(ctx, q, false)
	if err != nil {
		return GPUsDoc{}, err
	}
	taken := l.opt.Now() // the oldest snapshot's time: a stream's frame may be older than now
	for _, r := range reports {
		if !r.At.IsZero() && r.At.Before(taken) {
			taken = r.At
		}
	}
	var active []job.Job
	st, none, serr := l.readStore()
	if serr == nil && !none {
		active, serr = st.Active()
	}
	if serr != nil && !errors.Is(serr, state.ErrBadRecord) || none {
		st = nil // a record that cannot be decoded leaves the others: they are shown
	}
	f, _ := l.hosts() // probed already: it is open
	found, cerr := l.classify(ctx, f, st, reports, true)
	doc := gpusDoc(taken, reports, active, found)
	if err := errors.Join(serr, cerr); err != nil {
		doc.JobsError = err.Error()
	}
	if st != nil && !none {
		if recs, _ := st.Hosts(); len(recs) > 0 {
			for i, h := range doc.Hosts {
				doc.Hosts[i].Recovering = recs[h.Host].GPUs
			}
		}
	}
	ds := l.drains()
	for i, r := range reports {
		doc.Hosts[i].DrainDoc = drainDoc(f.Inventory(), r.Host, ds[r.Host.Name], l.opt.Now())
	}
	if errors.Is(serr, state.ErrDamaged) {
		return doc, serr // the GPUs are shown, and the damage is the command's error (exit 3)
	}
	return doc, partial(reports)
}

// Hosts implements Service, as GPUs does, with each connection's round
// trip measured.
func (l *Local) Hosts(ctx context.Context, q HostQuery) (HostsDoc, error) {
	reports, err := l.probe(ctx, q, true)
	if err != nil {
		return HostsDoc{}, err
	}
	doc := hostsDoc(reports)
	f, _ := l.hosts() // probed already: it is open
	ds := l.drains()
	for i, r := range reports {
		doc.Hosts[i].DrainDoc = drainDoc(f.Inventory(), r.Host, ds[r.Host.Name], l.opt.Now())
	}
	st, none, err := l.readStore()
	if errors.Is(err, state.ErrDamaged) {
		return doc, err // the hosts are shown, and the damage is the command's error (exit 3)
	}
	if err == nil && !none {
		recs, herr := st.Hosts() // a record that cannot be read is shown as none
		if errors.Is(herr, state.ErrDamaged) {
			return doc, herr
		}
		if len(recs) > 0 {
			for i, h := range doc.Hosts {
				if r, ok := recs[h.Name]; ok && (r.Failures > 0 || r.Down() || len(r.Strays) > 0 || r.LastError != "" || len(r.GPUs) > 0) {
					doc.Hosts[i].Record = &r
				}
			}
		}
	}
	return doc, partial(reports)
}

func (l *Local) probe(ctx context.Context, q HostQuery, ping bool) ([]fleet.Report, error) {
	f, err := l.hosts()
	if err != nil {
		return nil, err
	}
	hosts, err := f.Select(q.Hosts, q.Labels)
	if err != nil {
		return nil, err
	}
	reports := f.Probe(ctx, hosts, fleet.ProbeOptions{Timeout: l.opt.ProbeTimeout, Ping: ping, MaxAge: min(q.MaxAge, l.StreamAge())})
	if err := interrupted(ctx); err != nil {
		return nil, err // what was cut short is not a timeout to report
	}
	return reports, nil
}

// partial returns a *PartialError when some host was not probed.
func partial(reports []fleet.Report) error {
	failed := 0
	for _, r := range reports {
		if !r.Probed() {
			failed++
		}
	}
	if failed > 0 {
		return &PartialError{Failed: failed, Total: len(reports)}
	}
	return nil
}

// drains are the hosts' drains by gssh drain, as the state file keeps
// them; none when there is no state file, or it cannot be read (a
// drained host is then shown as its inventory entry says; the pass, which
// must not miss a drain, reports the error). A record that cannot be
// decoded is shown as the drain in force it is taken for.
func (l *Local) drains() map[string]*sched.Drain {
	out := map[string]*sched.Drain{}
	st, none, err := l.readStore()
	if err != nil || none {
		return out
	}
	ds, _ := st.Drains()
	for name, d := range ds {
		out[name] = &d
	}
	return out
}
