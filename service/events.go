package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/notify"
)

// EventQuery selects the events gssh events prints.
type EventQuery struct {
	Filter eventlog.Filter
	// Warn is told of each line skipped (not an event: a torn write, a
	// hand edit), with its file and line; nil: nothing is said.
	Warn func(string)
}

// EventsResult says where the events were read.
type EventsResult struct {
	Path string // the event log (events.log beside the state file)
	// None: the log has no file yet (nothing was recorded since it came).
	None bool
}

// Events implements Service: it calls fn with each event of the event
// log that q selects, oldest first, rotated files included. It reads the
// files only (never the state file, never a host).
func (l *Local) Events(_ context.Context, q EventQuery, fn func(eventlog.Record) error) (EventsResult, error) {
	if l.labErr != nil {
		return EventsResult{}, l.labErr
	}
	res := EventsResult{Path: eventlog.Path(l.opt.StatePath)}
	found, err := eventlog.Read(res.Path, q.Filter, fn, q.Warn)
	res.None = !found && err == nil
	return res, err
}

// events is the event log a Local writes, opened on first use.
type events struct {
	mu  sync.Mutex
	log *eventlog.Log
}

// eventLog is the event log beside the state file, kept for the
// policy's keep_events, at the lab's mode in shared-lab mode.
func (l *Local) eventLog() *eventlog.Log {
	f, _ := l.hosts() // its inventory's policy; none: the defaults
	l.ev.mu.Lock()
	defer l.ev.mu.Unlock()
	if l.ev.log == nil {
		o := eventlog.Options{Shared: l.lab != nil, Now: l.opt.Now, Tap: l.tap}
		if l.lab != nil {
			o.Lab = &l.lab.dir
		}
		if f != nil {
			o.MaxAge = f.Inventory().Policy.KeepEvents
		}
		if w := l.opt.Fleet.Warn; w != nil {
			o.Warn = func(s string) { w("warning: " + s) }
		}
		l.ev.log = eventlog.Open(eventlog.Path(l.opt.StatePath), o)
	}
	return l.ev.log
}

// TapEvents has f told of each event l writes from now on (gssh serve:
// its notifications). Call it before l writes any.
func (l *Local) TapEvents(f func(eventlog.Event)) { l.tap = f }

// Notifications is what the inventory says to send (its `notify:` block
// and its users' addresses). Errors: the inventory's.
func (l *Local) Notifications() (notify.Config, error) {
	f, err := l.hosts()
	if err != nil {
		return notify.Config{}, err
	}
	return f.Inventory().Notify, nil
}

// closeEvents closes the event log, if one was opened.
func (l *Local) closeEvents() {
	l.ev.mu.Lock()
	defer l.ev.mu.Unlock()
	if l.ev.log != nil {
		l.ev.log.Close()
		l.ev.log = nil
	}
}

// logJob writes event k of j (as recorded after the change), done by
// who ("": the job's own change, such as a submit).
func (l *Local) logJob(k eventlog.Kind, j job.Job, who string) {
	l.eventLog().Write(eventlog.OfJob(l.opt.Now(), k, j).By(who))
}

// logEvent writes e to the event log beside the state file (gssh drain
// and resume: l.logEvent(eventlog.Drain(...)), eventlog.Resume). It never
// fails: what cannot be written is a warning.
func (l *Local) logEvent(e eventlog.Event) {
	if e.Time.IsZero() {
		e.Time = l.opt.Now()
	}
	l.eventLog().Write(e)
}

// eventSink writes a controller's events to the event log.
type eventSink struct{ log *eventlog.Log }

func (s eventSink) Emit(ev control.Event) { s.log.Write(logLine(ev)) }

// logLine is the event log's line of a change a pass (or a cancel, a
// requeue) made: an event of the kind the controller reports (a job it
// cancelled is a job_end of state cancelled, so that every end is one
// job_end).
func logLine(ev control.Event) eventlog.Event {
	switch ev.Kind {
	case eventlog.StrayKilled:
		e := eventlog.OfJob(ev.Time, eventlog.StrayKilled, ev.Job)
		e.Host, e.State = ev.Host, ""
		e.Reason = fmt.Sprintf("attempt %d, given up on %s while it did not answer, ran there still: killed", ev.Job.Attempt, ev.Host)
		return e
	case eventlog.HostDown, eventlog.HostUp:
		e := eventlog.Event{Time: ev.Time, Kind: ev.Kind, Host: ev.Host}
		if r := ev.Record; r != nil && ev.Kind == eventlog.HostDown {
			e.Reason = r.LastError
			e.Extra = []slog.Attr{slog.String("since", eventlog.Stamp(r.FailingSince))}
		}
		return e
	case eventlog.GPUFailed, eventlog.GPUHealthy:
		e := eventlog.Event{Time: ev.Time, Kind: ev.Kind, Host: ev.Host}
		if g := ev.GPU; g != nil {
			e.GPUs, e.Reason = []int{g.Index}, g.Why
			if ev.Kind == eventlog.GPUHealthy {
				e.Reason = "healthy in the probes in a row it needs, after it read " + g.Why
			}
			e.Extra = []slog.Attr{slog.String("since", eventlog.Stamp(g.Since))}
		}
		return e
	case eventlog.OrphanReaped, eventlog.ForeignKilled:
		e := eventlog.Event{Time: ev.Time, Kind: ev.Kind, Host: ev.Host}
		if x := ev.Reaped; x != nil {
			f := x.Finding
			e.GPUs, e.Reason, e.Job, e.Attempt = []int{f.GPU}, f.Why, f.Job, f.Attempt
			e.User = ev.Job.User
			e.Extra = []slog.Attr{slog.Int("pid", f.Proc.PID), slog.String("process", f.Proc.Name), slog.String("outcome", string(x.Outcome))}
			if f.Proc.User != "" {
				e.Extra = append(e.Extra, slog.String("process_user", f.Proc.User))
			}
			if f.Proc.UsedBytes != nil {
				e.Extra = append(e.Extra, slog.Uint64("memory_bytes", *f.Proc.UsedBytes))
			}
		}
		return e
	}
	return eventlog.OfJob(ev.Time, ev.Kind, ev.Job)
}
