package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

func owned(j job.Job, user string) job.Job {
	j.User = user
	return j
}

func startIDs(d Decisions) []job.ID {
	var ids []job.ID
	for _, s := range d.Starts {
		ids = append(ids, s.Job)
	}
	return ids
}

// A user's caps count the running jobs and those the same plan starts:
// one pass never starts more than the cap, and the capped job waits with
// user_cap and words; a listed user's unset cap falls back to
// default_user's, and an unlisted user has default_user's.
func TestUserCaps(t *testing.T) {
	hosts := []Host{host("a", gpus(10, 80*GiB)...)}
	pol := Policy{Order: OrderFIFO,
		Users:       map[string]UserShare{"bob": {Weight: 1, Caps: Caps{MaxGPUs: 4}}},
		DefaultUser: Caps{MaxJobs: 4}}
	run := []job.Job{owned(running(1, "a", 0, "GPU-00", "GPU-01"), "bob")}
	queue := []job.Job{
		owned(queued(10, excl(1)), "bob"),   // 3 GPUs
		owned(queued(11, excl(2)), "bob"),   // would be 5
		owned(queued(12, excl(1)), "bob"),   // 4 GPUs, 3 jobs
		owned(queued(13, excl(1)), "bob"),   // would be 5 GPUs
		owned(queued(20, excl(1)), "carol"), // carol: max_jobs 4, no GPU cap
		owned(queued(21, excl(1)), "carol"),
		owned(queued(22, excl(1)), "carol"),
		owned(queued(23, excl(1)), "carol"),
		owned(queued(24, excl(1)), "carol"), // a 5th job
	}
	for _, terse := range []bool{false, true} {
		d := Plan(Input{Now: t0, Policy: pol, Hosts: hosts, Running: run, Queue: queue, Terse: terse})
		if got, want := startIDs(d), []job.ID{10, 12, 20, 21, 22, 23}; !slices.Equal(got, want) {
			t.Fatalf("terse %v: starts %v, want %v", terse, got, want)
		}
		for id, text := range map[job.ID]string{
			11: "bob runs 3 GPUs and this job asks for 2; bob's cap is max_gpus 4",
			13: "bob runs 4 GPUs and this job asks for 1; bob's cap is max_gpus 4",
			24: "carol runs 4 jobs; carol's cap is max_jobs 4",
		} {
			p := pendingOf(t, d, id)
			if terse {
				text = ""
			}
			if p.Reason != (Reason{CodeUserCap, text}) || p.Reservation != nil || p.Exhausted {
				t.Errorf("terse %v: job %d: %+v, want %q", terse, id, p, text)
			}
		}
	}

	// bob's max_jobs falls back to default_user's 4: a fifth job waits
	// though bob's GPUs are within his cap.
	many := []job.Job{owned(queued(30, shared(1, GiB)), "bob"), owned(queued(31, shared(1, GiB)), "bob"), owned(queued(32, shared(1, GiB)), "bob"), owned(queued(33, shared(1, GiB)), "bob")}
	d := Plan(Input{Now: t0, Policy: Policy{Users: pol.Users, DefaultUser: Caps{MaxJobs: 3}}, Hosts: hosts, Queue: many})
	if got := startIDs(d); len(got) != 3 {
		t.Errorf("default max_jobs 3: starts %v", got)
	}
	if p := pendingOf(t, d, 33); p.Reason.Text != "bob runs 3 jobs; bob's cap is max_jobs 3" {
		t.Errorf("default max_jobs: %+v", p)
	}
}

// Two --mem jobs on one GPU count two GPUs, as Slurm counts GRES per job.
func TestUserCapSharedGPU(t *testing.T) {
	hosts := []Host{host("a", gpus(2, 80*GiB)...)}
	pol := Policy{DefaultUser: Caps{MaxGPUs: 2}}
	run := []job.Job{owned(running(1, "a", 8*GiB, "GPU-00"), "dave"), owned(running(2, "a", 8*GiB, "GPU-00"), "dave")}
	d := Plan(Input{Now: t0, Policy: pol, Hosts: hosts, Running: run, Queue: []job.Job{owned(queued(10, shared(1, 8*GiB)), "dave")}})
	if p := pendingOf(t, d, 10); len(d.Starts) != 0 || p.Reason.Text != "dave runs 2 GPUs and this job asks for 1; dave's cap is max_gpus 2" {
		t.Errorf("starts %v, pending %+v", d.Starts, d.Pending)
	}
	// Ended, launching and queued jobs: only launching and running ones count.
	run[0].State, run[1].State = job.Succeeded, job.Launching
	if d := Plan(Input{Now: t0, Policy: pol, Hosts: hosts, Running: run, Queue: []job.Job{owned(queued(10, shared(1, 8*GiB)), "dave")}}); len(d.Starts) != 1 {
		t.Errorf("one ended: %+v", d)
	}
	if got := Loads(run)["dave"]; got != (Load{Jobs: 1, GPUs: 1}) {
		t.Errorf("Loads: %+v", got)
	}
}

// A capped job is a gate, not a queue head: it never gets the EASY
// reservation nor blocks under backfill none, and other users' jobs behind
// it start.
func TestUserCapNeverBlocks(t *testing.T) {
	pol := Policy{Order: OrderPriority, Users: map[string]UserShare{"bob": {Weight: 1, Caps: Caps{MaxGPUs: 1}}}}
	bobRuns := owned(running(1, "a", 0, "GPU-00"), "bob")
	bobRuns.StartedAt, bobRuns.Spec.Timeout = t0, time.Hour
	first := owned(queued(10, excl(1)), "bob")
	first.Spec.Priority = 0 // ahead of carol's
	carol := owned(queued(11, excl(1)), "carol")
	for _, bf := range []Backfill{BackfillNone, BackfillSkip, BackfillEasy} {
		pol.Backfill = bf
		d := Plan(Input{Now: t0, Policy: pol, Hosts: []Host{host("a", gpus(2, 80*GiB)...)}, Running: []job.Job{bobRuns}, Queue: []job.Job{first, carol}})
		if got := startIDs(d); len(got) != 1 || got[0] != 11 {
			t.Errorf("%s: starts %v, want carol's 11", bf, got)
		}
		if p := pendingOf(t, d, 10); p.Reason.Code != CodeUserCap || p.Reservation != nil {
			t.Errorf("%s: bob's %+v", bf, p)
		}
	}
	// The host full: the reservation goes to carol's job, the first that
	// waits for GPUs, not to bob's capped one ahead of it.
	carolRuns := owned(running(2, "a", 0, "GPU-01"), "carol")
	carolRuns.StartedAt, carolRuns.Spec.Timeout = t0, 2*time.Hour
	pol.Backfill = BackfillEasy
	in := Input{Now: t0, Policy: pol, Hosts: []Host{host("a", gpus(2, 80*GiB)...)}, Running: []job.Job{bobRuns, carolRuns}, Queue: []job.Job{first, carol}}
	d := Plan(in)
	if p := pendingOf(t, d, 10); p.Reason.Code != CodeUserCap || p.Reservation != nil {
		t.Errorf("full: bob's %+v", p)
	}
	if p := pendingOf(t, d, 11); p.Reservation == nil || !p.Reservation.From.Equal(t0.Add(time.Hour)) {
		t.Errorf("full: carol's %+v", p)
	}
	// Played forward, bob's job starts when his running one ends (which
	// then holds nothing), not never.
	if f := ForecastStart(in, 10, nil); !f.Start.Equal(t0.Add(time.Hour)) {
		t.Errorf("forecast %+v", f)
	}
	// A job asking for more than the cap waits for the cap to be raised.
	big := owned(queued(12, excl(2)), "bob")
	in.Queue = []job.Job{big}
	const why = "the job asks for 2 GPUs, more than bob's cap max_gpus 1: it starts only once the cap is raised"
	if p := pendingOf(t, Plan(in), 12); p.Reason.Text != why {
		t.Errorf("too big: %+v", p)
	}
	if f := ForecastStart(in, 12, nil); !f.Start.IsZero() || f.Why != why {
		t.Errorf("too big: forecast %+v", f)
	}
}

func TestCapsOf(t *testing.T) {
	pol := Policy{Users: map[string]UserShare{
		"bob":   {Weight: 1, Caps: Caps{MaxGPUs: 4, MaxJobs: 2}},
		"alice": {Weight: 2, Caps: Caps{MaxJobs: 1}},
		"carol": {Weight: 1},
	}, DefaultUser: Caps{MaxGPUs: 8}}
	for user, want := range map[string]Caps{
		"bob":   {MaxGPUs: 4, MaxJobs: 2},
		"alice": {MaxGPUs: 8, MaxJobs: 1},
		"carol": {MaxGPUs: 8},
		"dan":   {MaxGPUs: 8},
	} {
		if got := pol.CapsOf(user); got != want {
			t.Errorf("%s: %+v, want %+v", user, got, want)
		}
	}
	if got := (Policy{}).CapsOf("bob"); got != (Caps{}) || (Policy{}).hasCaps() {
		t.Errorf("no policy: %+v", got)
	}
	for _, tt := range []struct {
		p    Policy
		want string
	}{
		{Policy{DefaultUser: Caps{MaxGPUs: -1}}, "policy default_user: max_gpus -1: give a whole number more than 0, such as 4 (leave it out for no cap)"},
		{Policy{Users: map[string]UserShare{"bob": {Weight: 1, Caps: Caps{MaxJobs: -2}}}}, "policy users bob: max_jobs -2: give a whole number more than 0, such as 4 (leave it out for no cap)"},
	} {
		if err := tt.p.Check(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: %v, want %s", tt.p, err, tt.want)
		}
	}
}

// Priorities 0-3 are for the queue's owner and admin: true users.
func TestCheckPriority(t *testing.T) {
	pol := Policy{Users: map[string]UserShare{"alice": {Weight: 2, Admin: true}, "bob": {Weight: 1}}}
	for _, tt := range []struct {
		user, owner string
		prio        int
		ok          bool
	}{
		{"alice", "", 0, true},  // admin: true
		{"bob", "bob", 0, true}, // the owner (personal mode)
		{"bob", "", 3, false},
		{"bob", "ann", 0, false},
		{"carol", "", 2, false}, // not listed
		{"bob", "", 4, true},    // everyone's bands
		{"bob", "", 10, true},
		{"", "", 1, false}, // no owner matches an empty user
	} {
		err := pol.CheckPriority(tt.user, tt.owner, tt.prio)
		if (err == nil) != tt.ok {
			t.Errorf("%+v: %v", tt, err)
		}
	}
	err := pol.CheckPriority("bob", "", 2)
	if want := "--priority 2: priorities 0-3 are for admins (the queue's owner, and users with `admin: true` in the inventory's policy users), and bob is not one; give 4 (first for everyone else) to 10"; err == nil || err.Error() != want {
		t.Errorf("words: %v", err)
	}
}
