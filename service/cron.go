package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
)

// CronSchema is gssh cron list --json's schema name.
const CronSchema = "gssh.cron/v1"

// CronRequest asks for a scheduled job: Submit (its spec, array, hold;
// no dependencies, no dry run) submitted each time Schedule comes round.
type CronRequest struct {
	Schedule string
	Submit   SubmitRequest
}

// CronEntry is one scheduled job and when it is next due.
type CronEntry struct {
	state.Cron
	Next time.Time `json:"next"`
}

// CronsDoc is gssh cron list --json's document.
type CronsDoc struct {
	Schema string      `json:"schema"` // CronSchema
	Crons  []CronEntry `json:"crons"`
}

// parseSchedule reads a cron spec: five fields (minute hour
// day-of-month month day-of-week, in the controller's time zone) or a
// descriptor (@daily, @hourly, @every 6h), as github.com/robfig/cron
// reads them. Errors say what a spec looks like.
func parseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %v: give five fields, minute hour day-of-month month day-of-week, such as \"0 2 * * *\" (every night at 2:00), or @daily, @hourly, @every 6h", spec, err)
	}
	return s, nil
}

// AddCron stores a scheduled job of l's user: checked now as a submit
// is (the spec, the policy's caps and bands), first due at the
// schedule's next time after now.
func (l *Local) AddCron(ctx context.Context, r CronRequest) (CronEntry, error) {
	sched, err := parseSchedule(r.Schedule)
	if err != nil {
		return CronEntry{}, err
	}
	switch {
	case r.Submit.DryRun || len(r.Submit.After) > 0:
		return CronEntry{}, errors.New("a scheduled job takes no --dry-run and no --after: each run is a new job")
	case r.Submit.Spec.Begin != (time.Time{}):
		return CronEntry{}, errors.New("a scheduled job takes no --begin: its schedule says when")
	}
	s, err := CheckSpec(r.Submit.Spec)
	if err != nil {
		return CronEntry{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return CronEntry{}, err
	}
	if err := l.checkPolicy(f.Inventory().Policy.Plan, s); err != nil {
		return CronEntry{}, err
	}
	st, err := l.store(true)
	if err != nil {
		return CronEntry{}, err
	}
	var id [4]byte
	rand.Read(id[:])
	now := l.opt.Now().UTC().Truncate(time.Second)
	c := state.Cron{ID: hex.EncodeToString(id[:]), User: l.opt.User, Schedule: r.Schedule, Spec: s, Array: r.Submit.Array,
		ArrayMax: r.Submit.ArrayLimit, Hold: r.Submit.Hold, Created: now, LastRun: now}
	if err := st.PutCron(c); err != nil {
		return CronEntry{}, err
	}
	return CronEntry{Cron: c, Next: sched.Next(now)}, nil
}

// Crons lists every scheduled job, by id, with when each is next due.
func (l *Local) Crons(ctx context.Context) (CronsDoc, error) {
	doc := CronsDoc{Schema: CronSchema, Crons: []CronEntry{}}
	st, none, err := l.readStore()
	if err != nil || none {
		return doc, err
	}
	cs, err := st.Crons()
	for _, c := range cs {
		e := CronEntry{Cron: c}
		if s, perr := parseSchedule(c.Schedule); perr == nil {
			e.Next = s.Next(c.LastRun)
		}
		doc.Crons = append(doc.Crons, e)
	}
	slices.SortFunc(doc.Crons, func(a, b CronEntry) int { return a.Created.Compare(b.Created) })
	return doc, err
}

// RemoveCrons removes scheduled jobs: a lab member's or a guest's own
// only, unless an admin. Every id must name one (else nothing is
// removed).
func (l *Local) RemoveCrons(ctx context.Context, ids []string) ([]state.Cron, error) {
	st, err := l.store(false)
	if err != nil {
		return nil, err
	}
	all := l.MayActOnAll()
	cs, _ := st.Crons()
	for _, id := range ids {
		i := slices.IndexFunc(cs, func(c state.Cron) bool { return c.ID == id })
		switch {
		case i < 0:
			return nil, fmt.Errorf("scheduled job %s: no such one (gssh cron list shows them); nothing was removed", id)
		case !all && cs[i].User != l.opt.User:
			return nil, fmt.Errorf("scheduled job %s %w: it is %s's; nothing was removed", id, ErrNotYours, cs[i].User)
		}
	}
	return st.RemoveCrons(ids, func(state.Cron) bool { return true })
}

// CronRun is one scheduled job gssh serve submitted (or failed to).
type CronRun struct {
	Cron state.Cron
	Job  job.Job // zero when the submit failed
	Err  error
}

// RunCrons submits, as its user, each scheduled job due at now (its
// schedule's next time after its last run has come) and records the run
// (a time missed while no gssh serve ran is not made up: one run, now).
// gssh serve calls it after each pass.
func (l *Local) RunCrons(ctx context.Context, now time.Time) ([]CronRun, error) {
	st, none, err := l.readStore()
	if err != nil || none {
		return nil, err
	}
	cs, err := st.Crons()
	var runs []CronRun
	for _, c := range cs {
		sched, perr := parseSchedule(c.Schedule)
		if perr != nil || sched.Next(c.LastRun).After(now) {
			continue
		}
		res, serr := l.As(c.User, l.served).Submit(ctx, SubmitRequest{Spec: c.Spec, Array: c.Array, ArrayLimit: c.ArrayMax, Hold: c.Hold, Async: true})
		c.LastRun, c.LastJob, c.LastErr = now.UTC(), res.Job.ID, ""
		if serr != nil {
			c.LastErr = serr.Error()
		}
		if werr := st.PutCron(c); werr != nil {
			err = errors.Join(err, werr)
		}
		runs = append(runs, CronRun{Cron: c, Job: res.Job, Err: serr})
	}
	return runs, err
}
