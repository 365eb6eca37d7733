package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Explanation is what the planner makes of one queued job now (gssh show
// of a queued job, gssh submit --dry-run): where it would start and why
// not elsewhere, or why it waits, its place in the queue, its reservation
// and when it is expected to start.
type Explanation struct {
	WouldStart bool           `json:"would_start"`
	Placement  *job.Placement `json:"placement,omitempty"` // when WouldStart
	// Position is the job's place in the queue's order (1 = next) and Rank
	// says why in words; when it waits.
	Position int    `json:"position,omitempty"`
	Rank     string `json:"rank,omitempty"`
	// Reason is why it waits: what it waits for, host by host.
	Reason *sched.Reason `json:"reason,omitempty"`
	// Rejected are the hosts turned down for it, and why, in name order.
	Rejected    []sched.Rejection  `json:"rejected"`
	Reservation *sched.Reservation `json:"reservation,omitempty"`
	// Forecast is when it is expected to start if running jobs end at
	// their walltimes and nothing is submitted ahead of it.
	Forecast *sched.Forecast `json:"forecast,omitempty"`
}

func explanation(t control.Trial) Explanation {
	ex := Explanation{WouldStart: t.Start, Rejected: nonNil(t.Rejected)}
	if t.Start {
		p := t.Placement
		ex.Placement = &p
		return ex
	}
	r, f := t.Pending.Reason, t.Forecast
	ex.Position, ex.Rank, ex.Reason, ex.Reservation, ex.Forecast = t.Pending.Position, t.Pending.Rank, &r, t.Pending.Reservation, &f
	return ex
}

// Explain implements Service: it probes the hosts and plans the queue as
// a pass would (polling no worker, writing nothing). A job that is not
// queued is an error.
func (l *Local) Explain(ctx context.Context, id job.ID) (Explanation, error) {
	st, none, err := l.readStore()
	switch {
	case err != nil:
		return Explanation{}, err
	case none:
		return Explanation{}, fmt.Errorf("%w %d: nothing was submitted yet", state.ErrNotFound, id)
	}
	f, err := l.hosts()
	if err != nil {
		return Explanation{}, err
	}
	ctl, err := l.controller(f, fileStores(st), nil)
	if err != nil {
		return Explanation{}, err
	}
	t, err := ctl.Explain(ctx, id)
	if ierr := interrupted(ctx); ierr != nil {
		return Explanation{}, ierr
	}
	if err != nil {
		return Explanation{}, err
	}
	return explanation(t), nil
}

// UsageSchema names the document `gssh usage --json` prints.
const UsageSchema = "gssh.usage/v1"

// UsageDoc is each user's fair-share standing, as Slurm's sshare shows it.
type UsageDoc struct {
	Schema string    `json:"schema"` // UsageSchema
	Time   time.Time `json:"time"`   // the time usage is computed for
	// HalfLifeS or WindowS is how usage is weighed over time (seconds):
	// the policy's fairshare.
	HalfLifeS float64 `json:"half_life_s,omitempty"`
	WindowS   float64 `json:"window_s,omitempty"`
	// PeriodS is what GPUHours sums over, in seconds: the window, or 7
	// days under a half-life.
	PeriodS float64     `json:"period_s"`
	Users   []UserUsage `json:"users"` // in fair-share order (lowest score first)
}

// UserUsage is one user's line of UsageDoc. GPU amounts are whole GPUs'
// worth (a --mem job counts the part of its GPUs' memory it booked).
type UserUsage struct {
	User        string  `json:"user"`
	Weight      float64 `json:"weight"`       // the policy's (default 1)
	RunningJobs int     `json:"running_jobs"` // launching or running
	RunningGPUs float64 `json:"running_gpus"`
	Queued      int     `json:"queued_jobs"`
	GPUHours    float64 `json:"gpu_hours"` // GPU-hours used in the last PeriodS, undecayed
	// Decayed is the GPU-hours the order goes by (decayed by the
	// half-life, or summed over the window); Score = Decayed / Weight.
	Decayed float64 `json:"decayed_gpu_hours"`
	Score   float64 `json:"score"`
	// Factor is the fair-share factor of the user's jobs' priority, in
	// [0, 1]: 2^(−Score / the fair score), 1 for no usage
	// (sched.Ranking.FairShareFactor).
	Factor float64 `json:"fairshare_factor"`
	// Share is the user's part of everyone's decayed usage; Fair is what
	// the weights give them: weight / the sum of the weights of the users
	// with jobs queued or running now (0 without any).
	Share float64 `json:"share"`
	Fair  float64 `json:"fair"`
	// Rank is the user's place in the fair-share order (1 = first, the
	// highest factor), among the users listed.
	Rank int `json:"rank"`
	// Caps are the user's caps on running jobs and GPUs (the policy's
	// users, else default_user; absent: none).
	Caps sched.Caps `json:"caps,omitzero"`
}

// Usage implements Service. It reads the state file only and never
// creates it; users listed are those with usage within the policy's
// horizon, jobs now, or a weight in the policy.
func (l *Local) Usage(_ context.Context) (UsageDoc, error) {
	now := l.opt.Now()
	doc := UsageDoc{Schema: UsageSchema, Time: now.UTC().Truncate(time.Millisecond), Users: []UserUsage{}}
	f, err := l.hosts()
	if err != nil {
		return doc, err
	}
	pol := f.Inventory().Policy.Plan.WithDefaults()
	fs := pol.FairShare
	period := cmp.Or(fs.Window, sched.UsagePeriod)
	doc.HalfLifeS, doc.WindowS, doc.PeriodS = fs.HalfLife.Seconds(), fs.Window.Seconds(), period.Seconds()
	if fs.Window > 0 {
		doc.HalfLifeS = 0
	}
	st, none, err := l.readStore()
	var active []job.Job
	var uses []job.Use
	var bad error
	switch {
	case err != nil:
		return doc, err
	case !none:
		active, err = st.Active()
		if err != nil && !errors.Is(err, state.ErrBadRecord) {
			return doc, err
		}
		bad = err
		uses, err = st.Uses(now.Add(-sched.LedgerHorizon(fs)))
		if err != nil && !errors.Is(err, state.ErrBadRecord) {
			return doc, err
		}
		bad = errors.Join(bad, err)
	}
	uses = append(uses, sched.Uses(active)...)
	doc.Users = usageRows(pol, now, period, uses, active)
	return doc, bad
}

// usageRows works out every user's line, in fair-share order.
func usageRows(pol sched.Policy, now time.Time, period time.Duration, uses []job.Use, active []job.Job) []UserUsage {
	decayed := sched.Usage(uses, now, pol.FairShare)
	raw := sched.Usage(uses, now, sched.FairShare{Window: period})
	rows := map[string]*UserUsage{}
	row := func(u string) *UserUsage {
		if rows[u] == nil {
			rows[u] = &UserUsage{User: u, Weight: pol.Weight(u), Caps: pol.CapsOf(u)}
		}
		return rows[u]
	}
	for u := range pol.Users {
		row(u)
	}
	for u, v := range decayed {
		if v > 0 {
			row(u).Decayed = v / 3600
		}
	}
	for u, v := range raw {
		if v > 0 {
			row(u).GPUHours = v / 3600
		}
	}
	for _, j := range active {
		r := row(j.User)
		switch {
		case j.State == job.Queued:
			r.Queued++
		case j.State.Active():
			r.RunningJobs++
			if u, ok := j.Use(); ok {
				r.RunningGPUs += u.Share
			} else {
				r.RunningGPUs += float64(len(j.Placement.GPUs))
			}
		}
	}
	var total, weights float64
	var busy []string
	for _, r := range rows {
		total += r.Decayed
		if r.Queued+r.RunningJobs > 0 {
			weights += r.Weight
			busy = append(busy, r.User)
		}
	}
	rank := sched.NewRanking(pol, now, decayed, slices.Values(busy))
	out := make([]UserUsage, 0, len(rows))
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		r := rows[name]
		r.Score = rank.Score(name) / 3600
		r.Factor = rank.FairShareFactor(rank.Score(name))
		if total > 0 {
			r.Share = r.Decayed / total
		}
		if r.Queued+r.RunningJobs > 0 && weights > 0 {
			r.Fair = r.Weight / weights
		}
		out = append(out, *r)
	}
	slices.SortStableFunc(out, func(a, b UserUsage) int { return cmp.Compare(a.Score, b.Score) })
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}
