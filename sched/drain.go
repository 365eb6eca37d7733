package sched

import (
	"fmt"
	"time"

	"github.com/gssh/gssh/units"
)

// Drain is an administrator's drain of a host (gssh drain; the state
// file keeps it, package state's drains/ bucket): from From on the host
// takes no new jobs; before From (a maintenance window ahead) it takes
// only jobs whose walltime ends by From. Running jobs are never stopped
// by a drain. Times are the controller's clock.
type Drain struct {
	By     string    `json:"by"`               // the OS user who drained the host
	At     time.Time `json:"at"`               // when the drain was recorded
	From   time.Time `json:"from"`             // when the host stops taking jobs (gssh drain --at; At when none was given)
	Reason string    `json:"reason,omitempty"` // gssh drain --reason, as given
}

// InForce reports whether d keeps every new job off its host at now:
// From has come.
func (d Drain) InForce(now time.Time) bool { return !now.Before(d.From) }

// Text says what d does at now, in words, times in UTC: "drained by bob
// since 2026-12-02 08:00 UTC: driver upgrade", or, before From,
// "draining at 2026-12-02 08:00 UTC (drained by bob: driver upgrade)".
func (d Drain) Text(now time.Time) string {
	by := "drained by " + d.By
	if d.By == "" {
		by = "drained"
	}
	if d.InForce(now) {
		s := by + " since " + utcMinute(d.From)
		if d.Reason != "" {
			s += ": " + d.Reason
		}
		return s
	}
	s := "draining at " + utcMinute(d.From) + " (" + by
	if d.Reason != "" {
		s += ": " + d.Reason
	}
	return s + ")"
}

// utcMinute prints t as the planner's reasons print times.
func utcMinute(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// checkDrain turns a host down that the inventory drains (drain: true),
// or whose drain is in force at the node's time; before a drain's From
// it turns down a job that would not end by then: one without a walltime
// (no --timeout and no default_timeout) or whose walltime, from the
// node's time, runs past From.
func checkDrain(n *node, w *want) Reason {
	d := n.Drained
	switch {
	case n.Drain:
		return because(CodeDrained, "drained")
	case d == nil:
		return Reason{}
	case w.quiet && (d.InForce(n.now) || w.wall <= 0 || n.now.Add(w.wall).After(d.From)):
		return because(CodeDrained, "")
	case d.InForce(n.now):
		return because(CodeDrained, d.Text(n.now))
	case w.wall <= 0:
		return because(CodeDrained, fmt.Sprintf("draining at %s: the job has no walltime (--timeout) to end by then", utcMinute(d.From)))
	case n.now.Add(w.wall).After(d.From):
		return because(CodeDrained, fmt.Sprintf("draining at %s: the job's walltime %s would run past it", utcMinute(d.From), units.FormatDuration(w.wall)))
	}
	return Reason{}
}

// windowAhead reports whether some host of hosts has a drain whose From
// is still to come at now: jobs' walltimes then decide where they may go,
// and so are part of their shape (see want.shape).
func windowAhead(hosts []*node, now time.Time) bool {
	for _, n := range hosts {
		if n.Drained != nil && !n.Drain && !n.Drained.InForce(now) {
			return true
		}
	}
	return false
}
