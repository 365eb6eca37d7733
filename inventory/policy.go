package inventory

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/notify"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/units"
)

var (
	policyKeys    = []string{"order", "placement", "backfill", "fairshare", "users", "default_user", "backfill_estimate", "default_timeout", "rebalance", "preempt_after", "min_runtime", "down_after", "lost_after", "keep_events", "keep_jobs", "keep_job_dirs", "log_limit", "weights", "max_age", "favor_small", "reserve_depth", "idle_after", "idle_cancel", "ports", "ports_per_job"}
	fairShareKeys = []string{"half_life", "window"}
	userKeys      = []string{"weight", "admin", "max_gpus", "max_jobs", "email", "notify"}
	capKeys       = []string{"max_gpus", "max_jobs"}
)

// Policy is the `policy:` block: one block for people, decoded into the
// parts their readers own. Settings the file leaves out are zero, which
// each reader takes as its default.
type Policy struct {
	// Plan is what the planner reads (sched.Plan): order, placement,
	// backfill, fairshare, users, default_user, backfill_estimate,
	// default_timeout, rebalance, preempt_after, min_runtime, weights,
	// max_age, favor_small and reserve_depth.
	Plan sched.Policy
	// Health is when a host is down and its jobs lost (down_after,
	// lost_after): control.Options.Rules.
	Health health.Rules
	// Keep is housekeeping's ages (keep_jobs, keep_job_dirs):
	// control.Options.Keep (job.Keep: a leaf, so that the inventory
	// imports no control).
	Keep job.Keep
	// KeepEvents is how long the event log keeps its rotated files
	// (keep_events, at least a day): eventlog.Options.MaxAge (0 =
	// eventlog.DefaultMaxAge, 30 days).
	KeepEvents time.Duration
	// LogLimit is the log cap, in bytes, of a job submitted without
	// --log-limit (log_limit; 0: none): control.Options.LogLimit, which
	// the pass puts in the job's Spec.LogLimit when it launches it.
	LogLimit uint64
	// IdleAfter is how long a running job's GPUs read 0 % utilization
	// before gssh serve flags it idle (idle_after; 0 = DefaultIdleAfter);
	// IdleCancel, when set, cancels a job flagged idle this much longer
	// (idle_cancel; 0: never).
	IdleAfter, IdleCancel time.Duration
	// Ports is the range each job gets a block of ports from (ports:
	// LO-HI, ports_per_job; the zero value: job.DefaultPorts), none at
	// all with PortsNone (ports: none).
	Ports     job.Ports
	PortsNone bool
	// NotifyUsers are the users' email and notify keys: where and of
	// what gssh serve tells each (notify.Config.Users).
	NotifyUsers map[string]notify.User
}

// PortRange is the port range of p: job.DefaultPorts where the policy
// gives none (or only its size), none with ports: none.
func (p Policy) PortRange() job.Ports {
	if r := p.portsGiven(); !p.PortsNone && r.Blocks() > 0 {
		return r
	}
	return job.Ports{} // none; or a range smaller than one block, refused at load (Check)
}

// portsGiven is the policy's ports and ports_per_job, the defaults for
// those it leaves out.
func (p Policy) portsGiven() job.Ports {
	r := p.Ports
	if r.Lo == 0 {
		r.Lo, r.Hi = job.DefaultPorts.Lo, job.DefaultPorts.Hi
	}
	if r.Count == 0 {
		r.Count = job.DefaultPorts.Count
	}
	return r
}

// DefaultIdleAfter is Policy.IdleAfter's default.
const DefaultIdleAfter = 30 * time.Minute

// IdleAfterOrDefault is how long a running job's GPUs read 0 % before
// gssh serve flags it idle: IdleAfter, or DefaultIdleAfter when unset.
func (p Policy) IdleAfterOrDefault() time.Duration {
	return cmp.Or(p.IdleAfter, DefaultIdleAfter)
}

// Check reports a setting out of range, as each part's reader checks it.
func (p Policy) Check() error {
	if r := p.portsGiven(); !p.PortsNone && r.Blocks() == 0 {
		return fmt.Errorf("policy ports %d-%d holds no block of ports_per_job %d: widen the range or give fewer ports per job", r.Lo, r.Hi, r.Count)
	}
	if err := p.Plan.Check(); err != nil {
		return err
	}
	return p.Keep.Check()
}

// policy reads the `policy:` block into pol: each knob checked where it
// is written, so an error names its line.
func (p parser) policy(m *yaml.Node, pol *Policy) error {
	if m.Kind != yaml.MappingNode {
		return p.errf(m, "`policy` must be a mapping (such as `order: fairshare`), found %s", kindName(m))
	}
	if err := p.unique(m, "`policy`"); err != nil {
		return err
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "order":
			s, err := oneOf(p, v, "policy order", sched.OrderFIFO, sched.OrderPriority, sched.OrderFair)
			pol.Plan.Order = s
			if err != nil {
				return err
			}
		case "placement":
			s, err := oneOf(p, v, "policy placement", sched.FitFirst, sched.FitBest)
			pol.Plan.Fit = s
			if err != nil {
				return err
			}
		case "backfill":
			s, err := oneOf(p, v, "policy backfill", sched.BackfillNone, sched.BackfillSkip, sched.BackfillEasy)
			pol.Plan.Backfill = s
			if err != nil {
				return err
			}
		case "backfill_estimate", "default_timeout", "preempt_after", "min_runtime", "down_after", "lost_after":
			d, err := p.duration(v, "policy "+k.Value, 0)
			if err != nil {
				return err
			}
			if (k.Value == "down_after" || k.Value == "lost_after") && d < time.Second {
				return p.errf(v, "policy %s %q: give at least 1s (passes are seconds apart)", k.Value, v.Value)
			}
			if (k.Value == "default_timeout" || k.Value == "backfill_estimate") && d < time.Second {
				return p.errf(v, "policy %s %q: give at least 1s, the shortest walltime", k.Value, v.Value)
			}
			*map[string]*time.Duration{"backfill_estimate": &pol.Plan.BackfillEstimate, "default_timeout": &pol.Plan.DefaultTimeout,
				"preempt_after": &pol.Plan.PreemptAfter, "min_runtime": &pol.Plan.MinRuntime, "down_after": &pol.Health.DownAfter, "lost_after": &pol.Health.LostAfter}[k.Value] = d
		case "keep_events":
			d, err := p.age(v, "policy keep_events")
			if err != nil {
				return err
			}
			if d < 24*time.Hour {
				return p.errf(v, "policy keep_events %q: give at least a day, such as 30d or 720h (the event log is rotated daily, and its rotated files are removed after this)", v.Value)
			}
			pol.KeepEvents = d
		case "keep_jobs", "keep_job_dirs":
			d, err := p.age(v, "policy "+k.Value)
			if err != nil {
				return err
			}
			if k.Value == "keep_jobs" {
				pol.Keep.Jobs = d
			} else {
				pol.Keep.JobDirs = d
			}
		case "ports":
			if v.Kind == yaml.ScalarNode && v.Value == "none" {
				pol.PortsNone = true
				continue
			}
			lo, hi, ok := strings.Cut(v.Value, "-")
			a, err1 := strconv.Atoi(strings.TrimSpace(lo))
			b, err2 := strconv.Atoi(strings.TrimSpace(hi))
			if v.Kind != yaml.ScalarNode || !ok || err1 != nil || err2 != nil || a < 1024 || b > 65535 || b < a {
				return p.errf(v, "policy ports %q: give a range LO-HI of ports from 1024 to 65535, such as 20000-29999, or none", v.Value)
			}
			pol.Ports.Lo, pol.Ports.Hi = a, b
		case "ports_per_job":
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || n < 1 || n > 1000 {
				return p.errf(v, "policy ports_per_job %q: give a number from 1 to 1000 (the ports each job gets)", v.Value)
			}
			pol.Ports.Count = n
		case "idle_after", "idle_cancel":
			d, err := p.duration(v, "policy "+k.Value, 10*time.Second)
			if err != nil {
				return err
			}
			if k.Value == "idle_after" {
				pol.IdleAfter = d
			} else {
				pol.IdleCancel = d
			}
		case "log_limit":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return p.errf(v, "policy log_limit %s: give a size such as 1G or 500M", kindName(v))
			}
			n, err := units.ParseBytes(v.Value)
			if err != nil {
				return p.errf(v, "policy log_limit: %v (leave log_limit out for no cap)", err)
			}
			pol.LogLimit = n
		case "weights":
			if err := p.weights(v, &pol.Plan.Weights); err != nil {
				return err
			}
		case "max_age":
			d, err := p.age(v, "policy max_age")
			if err != nil {
				return err
			}
			pol.Plan.MaxAge = d
		case "favor_small":
			b, err := p.boolean(v, "policy favor_small")
			if err != nil {
				return err
			}
			pol.Plan.FavorLarge = !b
		case "reserve_depth":
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || n < 1 || n > sched.MaxReserveDepth {
				return p.errf(v, "policy reserve_depth %s: give a whole number from 1 to %d, how many waiting jobs get reservations (1 is classic EASY backfill)", kindName(v), sched.MaxReserveDepth)
			}
			pol.Plan.ReserveDepth = n
		case "rebalance":
			b, err := p.boolean(v, "policy rebalance")
			if err != nil {
				return err
			}
			pol.Plan.Rebalance = b
		case "fairshare":
			if err := p.fairShare(v, &pol.Plan.FairShare); err != nil {
				return err
			}
		case "users":
			if err := p.users(v, &pol.Plan, &pol.NotifyUsers); err != nil {
				return err
			}
		case "default_user":
			if v.Kind != yaml.MappingNode {
				return p.errf(v, "`policy default_user` must be a mapping (such as `{max_gpus: 8}`), found %s", kindName(v))
			}
			if err := p.unique(v, "`policy default_user`"); err != nil {
				return err
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				uk, uv := v.Content[j], v.Content[j+1]
				if !slices.Contains(capKeys, uk.Value) {
					return p.errf(uk, "unknown key %q in `policy default_user`; it takes %s (a weight and admin are given per user, in `users`)", uk.Value, strings.Join(capKeys, ", "))
				}
				if err := p.capValue(uk, uv, "default_user", &pol.Plan.DefaultUser); err != nil {
					return err
				}
			}
		case "half_life", "window":
			return p.errf(k, "`%s` belongs in the fairshare block: `fairshare: {%s: %s}`", k.Value, k.Value, v.Value)
		default:
			return p.errf(k, "unknown key %q in `policy`; it takes %s", k.Value, strings.Join(policyKeys, ", "))
		}
	}
	return nil
}

func (p parser) fairShare(m *yaml.Node, fs *sched.FairShare) error {
	if m.Kind != yaml.MappingNode {
		return p.errf(m, "`policy fairshare` must be a mapping (such as `half_life: 24h`), found %s", kindName(m))
	}
	if err := p.unique(m, "`policy fairshare`"); err != nil {
		return err
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "half_life", "window":
			d, err := p.duration(v, "policy fairshare "+k.Value, time.Minute)
			if err != nil {
				return err
			}
			if k.Value == "window" {
				fs.Window = d
			} else {
				fs.HalfLife = d
			}
			if fs.Window > 0 && fs.HalfLife > 0 {
				return p.errf(k, "`policy fairshare` has both a half_life and a window; give one: half_life decays usage, window sums it over a sliding period")
			}
		default:
			return p.errf(k, "unknown key %q in `policy fairshare`; it takes %s", k.Value, strings.Join(fairShareKeys, " or "))
		}
	}
	return nil
}

func (p parser) users(m *yaml.Node, pol *sched.Policy, notifyUsers *map[string]notify.User) error {
	if m.Kind != yaml.MappingNode {
		return p.errf(m, "`policy users` must map user names to settings (such as `alice: {weight: 2}`), found %s", kindName(m))
	}
	if err := p.unique(m, "`policy users`"); err != nil {
		return err
	}
	pol.Users = map[string]sched.UserShare{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name, err := p.str(k, "user name")
		if err != nil {
			return err
		}
		if !validUser.MatchString(name) {
			return p.errf(k, "user name %q: give a login name (letters, digits, '.', '_', '-', '@')", name)
		}
		if v.Kind != yaml.MappingNode {
			return p.errf(v, "user %q: give a mapping such as `{weight: 2}`, found %s", name, kindName(v))
		}
		if err := p.unique(v, "user "+strconv.Quote(name)); err != nil {
			return err
		}
		share := sched.UserShare{Weight: 1}
		var nu notify.User
		for j := 0; j+1 < len(v.Content); j += 2 {
			uk, uv := v.Content[j], v.Content[j+1]
			switch uk.Value {
			case "email":
				s, err := p.str(uv, "user "+strconv.Quote(name)+" email")
				if err != nil {
					return err
				}
				if err := p.address(uv, s, "user "+strconv.Quote(name)+" email"); err != nil {
					return err
				}
				nu.Email = s
				continue
			case "notify":
				e, err := p.events(uv, "user "+strconv.Quote(name)+" notify")
				if err != nil {
					return err
				}
				nu.Events = e
				continue
			case "weight":
			case "admin":
				b, err := p.boolean(uv, "user "+strconv.Quote(name)+" admin")
				if err != nil {
					return err
				}
				share.Admin = b
				continue
			case "max_gpus", "max_jobs":
				if err := p.capValue(uk, uv, "user "+strconv.Quote(name), &share.Caps); err != nil {
					return err
				}
				continue
			default:
				return p.errf(uk, "unknown key %q for user %q; a user takes %s", uk.Value, name, strings.Join(userKeys, ", "))
			}
			w, err := strconv.ParseFloat(uv.Value, 64)
			if uv.Kind != yaml.ScalarNode || uv.Tag != "!!int" && uv.Tag != "!!float" || err != nil || !(w >= minWeight && w <= maxWeight) {
				return p.errf(uv, "user %q: weight %q: give a number from 0.001 to 1000000, such as 1 or 2 (a user of weight 2 may use twice the GPU time of one of weight 1)", name, uv.Value)
			}
			share.Weight = w
		}
		pol.Users[name] = share
		if nu.Email != "" || nu.Events != nil {
			if *notifyUsers == nil {
				*notifyUsers = map[string]notify.User{}
			}
			(*notifyUsers)[name] = nu
		}
	}
	return nil
}

// capValue reads cap k (max_gpus or max_jobs) of who ("user \"bob\"",
// "default_user") into c: a whole number more than 0.
func (p parser) capValue(k, v *yaml.Node, who string, c *sched.Caps) error {
	n, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || n < 1 {
		what := map[string]string{"max_gpus": "GPUs the user's running jobs may hold", "max_jobs": "jobs the user may run"}[k.Value]
		return p.errf(v, "%s: %s %s: give a whole number more than 0, the most %s at once, such as 4 (leave it out for no cap)", who, k.Value, kindName(v), what)
	}
	if k.Value == "max_gpus" {
		c.MaxGPUs = n
	} else {
		c.MaxJobs = n
	}
	return nil
}

// Bounds of a fair-share weight: what a table can print, and far beyond
// what any lab gives.
const minWeight, maxWeight = 0.001, 1e6

// validUser accepts a login name (LDAP ones included).
var validUser = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._@-]*$`)
