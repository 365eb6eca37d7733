package control_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// brokenBook is a drain book that cannot be read, or only in part.
type brokenBook struct{ err error }

func (b brokenBook) Drains() (map[string]sched.Drain, error) {
	if errors.Is(b.err, state.ErrBadRecord) {
		return map[string]sched.Drain{"ctl": {Reason: "unreadable"}}, b.err
	}
	return nil, b.err
}

// A pass, an explanation and a rebalancing dry run read the drains with
// the hosts: a job waits with the drain's words while it is in force, and
// starts once it is lifted. A book that cannot be read stops the plan (a
// pass without it could fill a host drained for maintenance); one read
// in part is planned on and reported.
func TestPassReadsDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, sched.Policy{}, a100x4("ctl"))
		ctl, err := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Drains: r.store})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if _, err := r.store.UpdateDrains(func(ds map[string]sched.Drain) error {
			ds["ctl"] = sched.Drain{By: "bob", At: now, From: now, Reason: "driver upgrade"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		j := r.submit(t, 5, "sleep", "1")
		res, err := ctl.Pass(context.Background())
		if err != nil || len(res.Started) != 0 {
			t.Fatalf("pass on a drained host: %+v, %v", res, err)
		}
		const want = "ctl: drained by bob since 2000-01-01 00:00 UTC"
		if got := r.get(t, j.ID); got.ReasonCode != string(sched.CodeDrained) || !strings.HasPrefix(got.Reason, want) || !strings.HasSuffix(got.Reason, ": driver upgrade") {
			t.Errorf("reason %q (%s)", got.Reason, got.ReasonCode)
		}
		if tr, err := ctl.Explain(context.Background(), j.ID); err != nil || tr.Start || !strings.HasPrefix(tr.Pending.Reason.Text, want) {
			t.Errorf("explain: %+v, %v", tr, err)
		}
		if d, err := ctl.Preempts(context.Background()); err != nil || len(d.Pending) != 1 || d.Pending[0].Reason.Code != sched.CodeDrained {
			t.Errorf("rebalancing dry run: %+v, %v", d, err)
		}
		for _, tt := range []struct {
			err    error
			starts bool
		}{{errors.New("disk on fire"), false}, {state.ErrBadRecord, false}} {
			c, _ := control.New(control.Options{Store: r.store, Keeper: r.store, Jobs: r.store, Snapshots: r.lab, Workers: r.workers, Drains: brokenBook{tt.err}})
			res, err := c.Pass(context.Background())
			if err != nil || len(res.Started) != 0 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), "host drains: ") {
				t.Errorf("book %v: %+v, %v", tt.err, res, err)
			}
			if _, err := c.Explain(context.Background(), j.ID); errors.Is(tt.err, state.ErrBadRecord) != (err == nil) {
				t.Errorf("book %v: explain %v", tt.err, err)
			}
		}
		if _, err := r.store.UpdateDrains(func(ds map[string]sched.Drain) error { delete(ds, "ctl"); return nil }); err != nil {
			t.Fatal(err)
		}
		if res, err := ctl.Pass(context.Background()); err != nil || len(res.Started) != 1 || res.Started[0].State != job.Running {
			t.Errorf("pass after the resume: %+v, %v", res, err)
		}
	})
}
