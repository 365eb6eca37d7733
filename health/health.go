// Package health is what the controller's passes have learned, over
// time, of each host's reachability: how many contacts in a row failed,
// since when, the last error, whether the host is down, and the attempts
// of jobs given up on it (strays) that must be killed when it answers
// again. A record changes only through the pure functions below, so the
// rules (when a host is down, when its jobs are lost) are decided without
// SSH, in tests and simulations alike. The state store keeps one record
// per host (state.Bolt's hosts/ bucket).
package health

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Defaults of Rules.
const (
	// DefaultFailures is how many failed contacts in a row a host needs
	// before it may be called down.
	DefaultFailures = 3
	// DefaultDownAfter is the least time those failures must span: one
	// slow connect, or three in one minute of cron passes, never make a
	// host down.
	DefaultDownAfter = 60 * time.Second
	// DefaultLostAfter is how long the jobs of a down host stay `unknown`
	// (still booked) before they are recorded `lost` (and requeued when
	// they asked for it).
	DefaultLostAfter = 5 * time.Minute
)

// Rules are the thresholds of host failure: the inventory's policy
// down_after and lost_after. The zero value means the defaults.
type Rules struct {
	Failures  int           // failed contacts in a row (0 = DefaultFailures)
	DownAfter time.Duration // least span of those failures (0 = DefaultDownAfter)
	LostAfter time.Duration // time down before its jobs are lost (0 = DefaultLostAfter)
}

// WithDefaults fills the zero knobs of r.
func (r Rules) WithDefaults() Rules {
	if r.Failures <= 0 {
		r.Failures = DefaultFailures
	}
	if r.DownAfter <= 0 {
		r.DownAfter = DefaultDownAfter
	}
	if r.LostAfter <= 0 {
		r.LostAfter = DefaultLostAfter
	}
	return r
}

// Host is one host's record. Times are the controller's clock.
type Host struct {
	Name string `json:"host"`
	// Failures counts the contacts in a row that failed (a probe or a
	// poll that could not connect, or timed out); 0 once one succeeds.
	Failures int `json:"failures,omitempty"`
	// FailingSince is the first of those failures; zero when Failures is 0.
	FailingSince time.Time `json:"failing_since,omitzero"`
	// LastError is the last failure's error text, kept after the host
	// answers again (LastErrorAt says when it was).
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// LastOK is when a contact succeeded after failed ones (a pass that
	// finds an up host answering writes nothing: passes keep up hosts off
	// the disk).
	LastOK time.Time `json:"last_ok,omitzero"`
	// DownSince is when the host was called down (Failures reached
	// Rules.Failures over at least Rules.DownAfter); zero while up.
	DownSince time.Time `json:"down_since,omitzero"`
	// Strays are attempts of jobs given up while the host did not answer
	// (recorded lost, requeued, or cancelled with --force): their
	// processes may still run there, and the first pass that reaches the
	// host again kills them.
	Strays []Stray `json:"strays,omitempty"`
	// GPUs are the GPUs of the host that read unhealthy (lost, requires
	// reset, error) in a probe and have not read healthy in
	// HealthyProbes probes in a row since, by index (as a string: JSON
	// keys; nvidia-smi's index, which a GPU keeps while it falls off the
	// bus, when its UUID can no longer be read): no job is placed on them
	// meanwhile.
	GPUs map[string]GPU `json:"gpus,omitempty"`
}

// HealthyProbes is how many probes in a row a GPU that read unhealthy
// must read healthy before jobs are placed on it again: a GPU that fell
// off the bus and came back after a reset may fall off again.
const HealthyProbes = 3

// GPU is one GPU's record of failure.
type GPU struct {
	Index int       `json:"index"` // nvidia-smi's index, for messages
	Why   string    `json:"why"`   // the last unhealthy reading: "lost", "requires reset", "error"
	Since time.Time `json:"since"` // the first unhealthy reading of this failure
	Good  int       `json:"good"`  // healthy probes in a row since the last unhealthy one
	// Counted is the time of the last healthy probe Good counts: a probe
	// of that time or before (the same GPU-stream frame read by another
	// pass) counts no more.
	Counted time.Time `json:"counted,omitzero"`
}

// Text says in words why g keeps jobs off: "GPU 2 lost since ..." or,
// once it reads healthy again, how many more probes it needs.
func (g GPU) Text() string {
	if g.Good == 0 {
		return fmt.Sprintf("GPU %d %s since %s", g.Index, g.Why, clock(g.Since))
	}
	return fmt.Sprintf("GPU %d was %s since %s; healthy in %d of the %d probes in a row it needs", g.Index, g.Why, clock(g.Since), g.Good, HealthyProbes)
}

// Reading is one GPU as a probe read it: its index and health ("" when
// healthy).
type Reading struct {
	Index int
	Bad   string // "" healthy; else its health ("lost", "requires reset", "error")
}

// Probed is h after a probe at now that read the GPUs in rs: a GPU that
// reads unhealthy gets a record (kept, with its first time, while it
// stays so or reads unhealthy again before it recovers); one with a
// record that reads healthy counts a good probe (once per probe time:
// now is when the probe was taken), and after HealthyProbes of them in a
// row its record goes. A GPU the probe did not list keeps
// its record. changed reports whether the record differs.
func (h Host) Probed(rs []Reading, now time.Time) (out Host, changed bool) {
	for _, r := range rs {
		key := strconv.Itoa(r.Index)
		g, had := h.GPUs[key]
		next := g
		switch {
		case r.Bad != "":
			next.Index, next.Why, next.Good = r.Index, r.Bad, 0
			if !had {
				next.Since = now
			}
		case had && now.After(g.Counted):
			next.Good, next.Counted = next.Good+1, now
		}
		if !had && r.Bad == "" || had && next == g {
			continue
		}
		if !changed {
			h.GPUs, changed = maps.Clone(h.GPUs), true
			if h.GPUs == nil {
				h.GPUs = map[string]GPU{}
			}
		}
		if next.Good >= HealthyProbes {
			delete(h.GPUs, key)
		} else {
			h.GPUs[key] = next
		}
	}
	if changed && len(h.GPUs) == 0 {
		h.GPUs = nil
	}
	return h, changed
}

// Stray is one job attempt that may still run on a host gssh gave it up
// on. Job is the job as it was then (placement, attempt, remote pid and
// directory): what a stop on the worker needs.
type Stray struct {
	Job   job.Job   `json:"job"`
	Since time.Time `json:"since"`
	Why   string    `json:"why"` // how the attempt was given up: "recorded lost: ...", "requeued: ...", "cancelled with --force"
}

// Down reports whether h is down.
func (h Host) Down() bool { return !h.DownSince.IsZero() }

// Failed is h after a failed contact at now with error text why; it
// calls the host down when the failures reach r's count and span.
func (h Host) Failed(now time.Time, why string, r Rules) Host {
	r = r.WithDefaults()
	if h.Failures == 0 {
		h.FailingSince = now
	}
	h.Failures++
	h.LastError, h.LastErrorAt = why, now
	if h.DownSince.IsZero() && h.Failures >= r.Failures && now.Sub(h.FailingSince) >= r.DownAfter {
		h.DownSince = now
	}
	return h
}

// Answered is h after a contact that succeeded at now: up, no failures.
func (h Host) Answered(now time.Time) Host {
	h.Failures, h.FailingSince, h.DownSince, h.LastOK = 0, time.Time{}, time.Time{}, now
	return h
}

// JobsLost reports whether the jobs of h are to be recorded lost by now:
// the host has been down for r's LostAfter.
func (h Host) JobsLost(now time.Time, r Rules) bool {
	return h.Down() && now.Sub(h.DownSince) >= r.WithDefaults().LostAfter
}

// AddStray is h with attempt j.Attempt of j recorded as a stray (once).
func (h Host) AddStray(j job.Job, now time.Time, why string) Host {
	if h.HasStray(j.ID, j.Attempt) {
		return h
	}
	h.Strays = append(slices.Clone(h.Strays), Stray{Job: j, Since: now, Why: why})
	return h
}

// HasStray reports whether attempt a of job id is a stray of h.
func (h Host) HasStray(id job.ID, a int) bool {
	return slices.ContainsFunc(h.Strays, func(s Stray) bool { return s.Job.ID == id && s.Job.Attempt == a })
}

// DropStray is h without the stray attempt a of job id.
func (h Host) DropStray(id job.ID, a int) Host {
	h.Strays = slices.DeleteFunc(slices.Clone(h.Strays), func(s Stray) bool { return s.Job.ID == id && s.Job.Attempt == a })
	if len(h.Strays) == 0 {
		h.Strays = nil
	}
	return h
}

// Live reports whether stray s is still the live attempt of its job, as
// cur (the job's record now) says: then it is the job's, to adopt or
// poll, not a stray to kill (a crash between recording the stray and
// giving the attempt up leaves such a record).
func (s Stray) Live(cur job.Job) bool {
	return cur.Attempt == s.Job.Attempt && cur.State.Active() && cur.Placement.Host == s.Job.Placement.Host
}

// Summary is h's state in words for gssh hosts: "" when it answered last
// time and nothing failed, else e.g. "down since 14:02:05 (3 failed
// contacts since 14:01:00)" or "2 failed contacts since 14:01:00".
func (h Host) Summary() string {
	switch {
	case h.Down():
		return fmt.Sprintf("down since %s (%d failed contacts since %s)", clock(h.DownSince), h.Failures, clock(h.FailingSince))
	case h.Failures > 0:
		return fmt.Sprintf("%d failed %s since %s", h.Failures, units.Plural(h.Failures, "contact", "contacts"), clock(h.FailingSince))
	}
	return ""
}

func clock(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
