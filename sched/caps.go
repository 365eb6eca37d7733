package sched

import (
	"fmt"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// CodeUserCap is a gate: the job's user already runs as many GPUs or jobs
// as the policy's max_gpus / max_jobs allow (Slurm's QOSMaxGRESPerUser,
// QOSMaxJobsPerUserLimit). Like array_limit, it neither holds up the jobs
// behind it nor gets a reservation.
const CodeUserCap Code = "user_cap"

// Caps limit what one user's jobs hold at once, as Slurm's QOS
// MaxTRESPerUser=gres/gpu=N and MaxJobsPerUser=N do. A field of 0 is no
// cap; a negative one is refused by Policy.Check.
type Caps struct {
	// MaxGPUs caps the GPUs of the user's launching and running jobs,
	// counted per job as Slurm counts GRES: each GPU (or MIG device) a
	// job is placed on counts 1, so two --mem jobs sharing one GPU count 2.
	MaxGPUs int `json:"max_gpus,omitempty"`
	// MaxJobs caps the user's launching and running jobs.
	MaxJobs int `json:"max_jobs,omitempty"`
}

// check refuses a negative cap; where names the block ("policy users bob").
func (c Caps) check(where string) error {
	for _, k := range []struct {
		name string
		n    int
	}{{"max_gpus", c.MaxGPUs}, {"max_jobs", c.MaxJobs}} {
		if k.n < 0 {
			return fmt.Errorf("%s: %s %d: give a whole number more than 0, such as 4 (leave it out for no cap)", where, k.name, k.n)
		}
	}
	return nil
}

// CapsOf is user's caps: its own from Users, each field it leaves 0 taken
// from DefaultUser; a user not listed has DefaultUser's. The zero Caps: no
// cap.
func (p Policy) CapsOf(user string) Caps {
	c := p.Users[user].Caps
	if c.MaxGPUs == 0 {
		c.MaxGPUs = p.DefaultUser.MaxGPUs
	}
	if c.MaxJobs == 0 {
		c.MaxJobs = p.DefaultUser.MaxJobs
	}
	return c
}

// hasCaps reports whether any user may be capped.
func (p Policy) hasCaps() bool {
	if p.DefaultUser != (Caps{}) {
		return true
	}
	for _, u := range p.Users {
		if u.Caps != (Caps{}) {
			return true
		}
	}
	return false
}

// Load is what one user's jobs hold at once, counted as Caps count it.
type Load struct {
	Jobs int `json:"jobs"` // launching and running jobs
	GPUs int `json:"gpus"` // the GPUs (or MIG devices) of their placements, one per job per GPU
}

// add counts one job placed on p.
func (l *Load) add(p job.Placement) {
	l.Jobs++
	l.GPUs += len(p.GPUs)
}

// Loads is each user's Load over jobs: those launching or running count,
// every other state is ignored.
func Loads(jobs []job.Job) map[string]Load { return loads(jobs, nil) }

// loads is Loads without the jobs in gone (those a forecast took to have
// ended).
func loads(jobs []job.Job, gone map[job.ID]bool) map[string]Load {
	out := map[string]Load{}
	for i := range jobs {
		if j := &jobs[i]; j.State.Active() && !gone[j.ID] {
			l := out[j.User]
			l.add(j.Placement)
			out[j.User] = l
		}
	}
	return out
}

// CapReason says why a job of user asking for gpus GPUs may not start
// while user's jobs hold held, under caps c: a Reason of CodeUserCap
// ("bob runs 4 GPUs and this job asks for 1; bob's cap is max_gpus 4"),
// or the zero Reason when starting it keeps user within c. The jobs cap
// is looked at first. It is the one rule of caps: the planner's gate, and
// rebalancing, ask it.
func CapReason(c Caps, user string, held Load, gpus int) Reason {
	switch {
	case c.MaxJobs > 0 && held.Jobs+1 > c.MaxJobs:
		return because(CodeUserCap, fmt.Sprintf("%s runs %d %s; %s's cap is max_jobs %d", user, held.Jobs, units.Plural(held.Jobs, "job", "jobs"), user, c.MaxJobs))
	case c.MaxGPUs > 0 && gpus > c.MaxGPUs:
		return because(CodeUserCap, fmt.Sprintf("the job asks for %d GPUs, more than %s's cap max_gpus %d: it starts only once the cap is raised", gpus, user, c.MaxGPUs))
	case c.MaxGPUs > 0 && held.GPUs+gpus > c.MaxGPUs:
		return because(CodeUserCap, fmt.Sprintf("%s runs %d %s and this job asks for %d; %s's cap is max_gpus %d", user, held.GPUs, units.Plural(held.GPUs, "GPU", "GPUs"), gpus, user, c.MaxGPUs))
	}
	return Reason{}
}

// MaxAdminPriority is the last of the admin priority bands: --priority 0
// to MaxAdminPriority are for admins only (CheckPriority).
const MaxAdminPriority = 3

// IsAdmin reports whether user has `admin: true` in the policy's users.
func (p Policy) IsAdmin(user string) bool { return p.Users[user].Admin }

// CheckPriority refuses priority for user when it is an admin band
// (0-MaxAdminPriority) and user is neither owner (the queue's owner, who
// may use every band; "" for a queue without one) nor an admin of the
// policy. The error names --priority and the priorities user may give.
func (p Policy) CheckPriority(user, owner string, priority int) error {
	if priority > MaxAdminPriority || owner != "" && user == owner || p.IsAdmin(user) {
		return nil
	}
	return fmt.Errorf("--priority %d: priorities 0-%d are for admins (the queue's owner, and users with `admin: true` in the inventory's policy users), and %s is not one; give %d (first for everyone else) to 10",
		priority, MaxAdminPriority, user, MaxAdminPriority+1)
}
