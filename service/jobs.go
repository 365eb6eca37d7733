package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/sshexec"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/units"
)

// Jobs implements Service. It reads the state file only (a pass changes
// what it holds) and never creates it.
func (l *Local) Jobs(_ context.Context, q JobQuery) (JobsDoc, error) {
	doc := JobsDoc{Schema: JobsSchema, Jobs: []job.Job{}}
	st, none, err := l.readStore()
	if err != nil || none {
		return doc, err
	}
	f := state.Filter{User: q.User, Since: q.Since, First: q.First, After: q.After}
	if !q.All {
		f.States = []job.State{job.Queued, job.Launching, job.Running, job.Preempting, job.Unknown}
	}
	jobs, err := st.List(f)
	doc.Jobs = append(doc.Jobs, jobs...)
	return doc, err // with ErrBadRecord: the others, and which could not be read
}

// Job implements Service. It never creates the state file.
func (l *Local) Job(_ context.Context, id job.ID) (job.Job, error) {
	st, none, err := l.readStore()
	switch {
	case err != nil:
		return job.Job{}, err
	case none:
		return job.Job{}, fmt.Errorf("%w %d: nothing was submitted yet", state.ErrNotFound, id)
	}
	j, err := st.Get(id)
	if errors.Is(err, state.ErrNotFound) {
		return job.Job{}, fmt.Errorf("%w (see gssh ps -a)", err)
	}
	return j, err
}

// Logs implements Service. A job that has not started has no log. A lab
// member's or a guest's request for another user's job is refused
// (ErrNotYours) unless they are an admin: a log is its owner's.
func (l *Local) Logs(ctx context.Context, r LogsRequest, out io.Writer) (LogsResult, error) {
	j, err := l.Job(ctx, r.ID)
	if err != nil {
		return LogsResult{}, err
	}
	if l.restricted() && j.User != l.opt.User {
		if f, err := l.hosts(); err != nil || !f.Inventory().Policy.Plan.Users[l.opt.User].Admin {
			return LogsResult{}, fmt.Errorf("job %s %w: it is %s's, and its log is for its owner and the admins (policy users: admin: true)", j.Ref(), ErrNotYours, j.User)
		}
	}
	j, current, err := logAttempt(j, r.Attempt)
	res := LogsResult{Job: j}
	if err != nil {
		return res, err
	}
	f, err := l.hosts()
	if err != nil {
		return res, err
	}
	if err := housekept(j, f.Inventory().Policy.Keep); err != nil {
		return res, err
	}
	st, err := l.store(false)
	if err != nil {
		return res, err
	}
	cluster, err := st.ClusterID()
	if err != nil {
		return res, err
	}
	if _, ok := f.Lookup(j.Placement.Host); !ok {
		return res, fmt.Errorf("job %s ran on %s, which is no longer in the inventory", j.Ref(), j.Placement.Host)
	}
	w := workers(f, cluster)
	follow := r.Follow && current && !j.State.Terminal()
	lctx := ctx
	if follow {
		lctx = sshexec.LongSession(ctx) // as long as the job runs: never in the passes' reserve
	}
	logs := func() error { return w.Logs(lctx, j, r.Tail, follow, out) }
	if follow && r.Tail < 0 {
		// The whole log, followed: shared with the job's other followers.
		k := feedKey{host: j.Placement.Host, id: j.ID, attempt: j.Attempt}
		logs = func() error {
			ok, err := l.logs.follow(ctx, k, func(fctx context.Context, fw io.Writer) error {
				return w.Logs(sshexec.LongSession(fctx), j, -1, true, fw)
			}, out)
			if !ok {
				return w.Logs(lctx, j, r.Tail, follow, out)
			}
			return err
		}
	}
	if err := logs(); err != nil {
		if ierr := interrupted(ctx); ierr != nil {
			return res, ierr
		}
		return res, err
	}
	if err := interrupted(ctx); err != nil {
		return res, err
	}
	if follow {
		// Say how it ended, as the log itself does not. The log may end
		// a moment before the worker's view of the job does (its exit
		// file, its pid gone), and a poll may fail on a busy host: a
		// few tries.
		for try := 0; try < 15 && res.Ended == nil && ctx.Err() == nil; try++ {
			if try > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			if m, err := w.Poll(ctx, j.Placement.Host, []*job.Job{&j}); err == nil {
				if s, ok := m[j.ID]; ok && s.State != job.Running {
					res.Ended = &s
				}
			}
		}
	}
	return res, nil
}

// logAttempt is j as launch attempt n ran it (0: the latest that ran),
// for its log: the record itself when that is the current attempt
// (current), else the record with that attempt's number, host, GPUs and
// directory (job.Attempt). An attempt j never had, or one that never
// started, is an error that says which attempts there are.
func logAttempt(j job.Job, n int) (out job.Job, current bool, err error) {
	placed := j.Placement.Host != "" && (j.Remote.Dir != "" || j.Attempt > 0 || j.State == job.Launching)
	if n == 0 || n == j.Attempt && placed {
		if placed {
			return j, true, nil
		}
		last, ok := j.LastRun()
		if !ok {
			return j, false, fmt.Errorf("job %s has no log: it has not started (%s: %s)", j.Ref(), j.State, j.Reason)
		}
		n = last.N
	}
	all := j.AllAttempts()
	i := slices.IndexFunc(all, func(a job.Attempt) bool { return a.N == n })
	var a job.Attempt
	switch {
	case i >= 0:
		a = all[i]
		if a.StartedAt.IsZero() && a.Dir == "" {
			return j, false, fmt.Errorf("attempt %d of job %s never started on %s (%s): it has no log", n, j.Ref(), a.Host, cmp.Or(a.Reason, a.Ended))
		}
	case n >= 1 && n <= len(j.AttemptHosts) && j.AttemptHosts[n-1] != "":
		// An attempt of a gssh before attempts were kept: its directory
		// has the attempt's default name on the host it was placed on.
		a = job.Attempt{N: n, Host: j.AttemptHosts[n-1]}
	default:
		return j, false, fmt.Errorf("job %s has no attempt %d: %s (gssh show %s lists them)", j.Ref(), n, attemptsText(j), j.Ref())
	}
	out = j
	out.Attempt, out.Placement, out.Remote = a.N, job.Placement{Host: a.Host, Indexes: a.GPUs}, job.Remote{Dir: a.Dir, By: a.By}
	out.StartedAt, out.EndedAt, out.ExitCode, out.Signal = a.StartedAt, a.EndedAt, a.ExitCode, a.Signal
	if a.State != "" {
		out.State = a.State
	}
	return out, false, nil
}

// attemptsText says which attempts j has had: "its attempts are 1 to 3",
// "its only attempt is 1", "it has not been launched".
func attemptsText(j job.Job) string {
	last := j.Attempt
	for _, a := range j.Attempts {
		last = max(last, a.N)
	}
	last = max(last, len(j.AttemptHosts))
	switch last {
	case 0:
		return "it has not been launched"
	case 1:
		return "its only attempt is 1"
	}
	return fmt.Sprintf("its attempts are 1 to %d", last)
}

// housekept says why ended job j has no log any more, when housekeeping
// removed its job directory (or found it gone); nil otherwise.
func housekept(j job.Job, keep job.Keep) error {
	h := j.Housekept
	switch {
	case h == nil:
		return nil
	case h.Removed > 0:
		return fmt.Errorf("job %s has no log any more: housekeeping removed it with the job's directory on %s at %s, keep_job_dirs (%s) after the job ended (the inventory's policy sets keep_job_dirs)",
			j.Ref(), j.Placement.Host, h.At.Local().Format(time.RFC3339), units.FormatAge(keep.WithDefaults().JobDirs))
	case h.Kept == "":
		return fmt.Errorf("job %s has no log any more: its job directory was gone from %s when housekeeping looked at %s (removed by hand?)", j.Ref(), j.Placement.Host, h.At.Local().Format(time.RFC3339))
	}
	return nil // left where it is: read it there
}

// Cancel implements Service: a queued job is dropped; an active one gets
// SIGTERM on its worker, then SIGKILL after r.Grace, and is recorded
// cancelled once its processes are gone (control.Controller.Cancel). An
// ended job is an error wrapping control.ErrEnded. A job that held GPUs
// is followed by a pass (waiting for the pass lock as a submit does), so
// that what waited for them starts now rather than at the next cron pass.
func (l *Local) Cancel(ctx context.Context, r CancelRequest) (CancelResult, error) {
	st, err := l.store(false)
	if errors.Is(err, state.ErrNoState) && !l.opt.StateExplicit {
		return CancelResult{}, fmt.Errorf("%w %d: nothing was submitted yet", state.ErrNotFound, r.ID)
	}
	if err != nil {
		return CancelResult{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return CancelResult{}, err
	}
	ctl, err := l.controller(f, fileStores(st), nil)
	if err != nil {
		return CancelResult{}, err
	}
	if err := l.mayAct(f, st, r.ID, "cancel"); err != nil {
		return CancelResult{Job: job.Job{ID: r.ID}}, err
	}
	if r.Force {
		j, err := ctl.ForceCancel(r.ID, cmp.Or(r.By, l.opt.User))
		if errors.Is(err, state.ErrNotFound) {
			err = fmt.Errorf("%w (see gssh ps -a)", err)
		}
		return CancelResult{Job: j}, err // its GPUs are not known free: no pass
	}
	if l.member() {
		// No SSH: a queued job is cancelled, an active one's cancel is
		// recorded for the pass user's next pass.
		j, recorded, err := ctl.RequestCancel(r.ID, r.Grace, cmp.Or(r.By, l.opt.User))
		if errors.Is(err, state.ErrNotFound) {
			err = fmt.Errorf("%w (see gssh ps -a)", err)
		}
		if recorded && err == nil {
			e := eventlog.OfJob(l.opt.Now(), eventlog.JobCancel, j).By(cmp.Or(r.By, l.opt.User))
			e.Reason = "cancel recorded; the lab's next pass stops the job"
			l.eventLog().Write(e)
			l.wake(ctx)
		}
		return CancelResult{Job: j, Recorded: recorded}, err
	}
	before, _ := st.Get(r.ID)
	j, err := ctl.Cancel(ctx, r.ID, r.Grace, cmp.Or(r.By, l.opt.User))
	if errors.Is(err, state.ErrNotFound) {
		return CancelResult{Job: j}, fmt.Errorf("%w (see gssh ps -a)", err)
	}
	res := CancelResult{Job: j, Freed: before.State.Active() && err == nil}
	if !res.Freed || r.NoPass {
		return res, err
	}
	if l.served != nil { // gssh serve's request: its loop's pass starts what waited
		l.served.Wake()
		return res, nil
	}
	pass, perr := l.pass(ctx, f, st, nil, l.opt.PassWait)
	if perr != nil {
		res.PassError = perr
		return res, interrupted(ctx)
	}
	res.Pass = &pass
	return res, nil
}

// Hold implements Service.
func (l *Local) Hold(ctx context.Context, ids []job.ID) ([]HoldResult, error) {
	return l.holds(ctx, ids, func(c *control.Controller, id job.ID) (job.Job, error) { return c.Hold(id, l.opt.User) }, false, eventlog.JobHold)
}

// Release implements Service.
func (l *Local) Release(ctx context.Context, ids []job.ID) ([]HoldResult, error) {
	return l.holds(ctx, ids, (*control.Controller).Release, true, eventlog.JobRelease)
}

// holds applies do to each job of ids, then (pass, and some job changed)
// runs one pass. Each job do changed is event k of the event log (""
// for none: do reports its own). The error is one that stopped it all:
// the state could not be opened; a pass that could not run is left to
// the next.
func (l *Local) holds(ctx context.Context, ids []job.ID, do func(*control.Controller, job.ID) (job.Job, error), pass bool, k eventlog.Kind) ([]HoldResult, error) {
	st, err := l.store(false)
	if errors.Is(err, state.ErrNoState) && !l.opt.StateExplicit {
		return nil, fmt.Errorf("%w %d: nothing was submitted yet", state.ErrNotFound, ids[0])
	}
	if err != nil {
		return nil, err
	}
	f, err := l.hosts()
	if err != nil {
		return nil, err
	}
	ctl, err := l.controller(f, fileStores(st), nil)
	if err != nil {
		return nil, err
	}
	out := make([]HoldResult, len(ids))
	changed := false
	for i, id := range ids {
		if err := l.mayAct(f, st, id, "change"); err != nil {
			out[i].Job, out[i].Err = job.Job{ID: id}, err
			continue
		}
		var before job.Job
		if k == eventlog.JobHold {
			before, _ = st.Get(id) // held already: a hold keeps the first, and changes nothing
		}
		out[i].Job, out[i].Err = do(ctl, id)
		if out[i].Err == nil && k != "" && before.Hold == nil {
			l.logJob(k, out[i].Job, l.opt.User)
		}
		if out[i].Job.ID == 0 {
			out[i].Job.ID = id // the job is named even when nothing was done
		}
		if errors.Is(out[i].Err, state.ErrNotFound) {
			out[i].Err = fmt.Errorf("%w (see gssh ps -a)", out[i].Err)
		}
		changed = changed || out[i].Err == nil
	}
	if pass && changed && (l.member() || l.served != nil) {
		// The lab's pass user's pass starts them: a gssh serve's now,
		// and they are said as it left them.
		if l.labPass(ctx) {
			for i := range out {
				if out[i].Err == nil {
					if j, err := st.Get(out[i].Job.ID); err == nil {
						out[i].Job = j
					}
				}
			}
		}
	} else if pass && changed {
		if _, err := l.pass(ctx, f, st, nil, l.opt.PassWait); err == nil {
			for i := range out {
				if out[i].Err == nil {
					if j, err := st.Get(out[i].Job.ID); err == nil {
						out[i].Job = j
					}
				}
			}
		}
	}
	return out, interrupted(ctx)
}

// Update implements Service. A new --mem, --cpus or --host-mem is checked
// against the hosts (probed) as submit checks it: a job no host could
// ever take is refused; so is a --priority in the admin bands (0-3) from
// a user who is neither the queue's owner nor an admin, before any job
// changes.
func (l *Local) Update(ctx context.Context, r UpdateRequest) ([]HoldResult, error) {
	switch {
	case r.Priority == nil && r.Timeout == nil && r.Mem == nil && r.Name == nil && r.CPUs == nil && r.HostMem == nil && r.LogLimit == nil:
		return nil, errors.New("nothing to update: give --priority, --timeout, --mem, --cpus, --host-mem, --log-limit or --name")
	case r.LogLimit != nil && *r.LogLimit == 0:
		return nil, errors.New("--log-limit 0: give the log's cap, such as 1G")
	case r.CPUs != nil && *r.CPUs < 1:
		return nil, fmt.Errorf("--cpus %d: give 1 or more", *r.CPUs)
	case r.HostMem != nil && *r.HostMem == 0:
		return nil, errors.New("--host-mem 0: give the host memory to book, such as 64G")
	case r.Priority != nil && (*r.Priority < 0 || *r.Priority > 10):
		return nil, fmt.Errorf("--priority %d: give 0 (first) to 10 (last)", *r.Priority)
	case r.Timeout != nil && *r.Timeout <= 0:
		return nil, fmt.Errorf("--timeout %s: give a walltime above 0", *r.Timeout)
	case r.Mem != nil && *r.Mem == 0:
		return nil, errors.New("--mem 0: give the GPU memory per GPU, such as 8G")
	case r.Name != nil && *r.Name == "":
		return nil, errors.New("--name is empty: give the job a name")
	}
	if r.Priority != nil {
		f, err := l.hosts()
		if err != nil {
			return nil, err
		}
		if err := f.Inventory().Policy.Plan.CheckPriority(l.opt.User, l.opt.Owner, *r.Priority); err != nil {
			return nil, fmt.Errorf("%w; nothing was updated", err)
		}
	}
	var hosts []sched.Host
	if r.Mem != nil || r.CPUs != nil || r.HostMem != nil {
		f, err := l.hosts()
		if err != nil {
			return nil, err
		}
		inv := f.Inventory()
		hosts = fleet.SchedHosts(inv, f.Probe(ctx, inv.Hosts, fleet.ProbeOptions{Timeout: l.opt.ProbeTimeout}))
		if err := interrupted(ctx); err != nil {
			return nil, err
		}
	}
	return l.holds(ctx, r.IDs, func(c *control.Controller, id job.ID) (job.Job, error) {
		return c.Update(id, func(s *job.Spec) error {
			if r.Mem != nil || r.CPUs != nil || r.HostMem != nil {
				next := *s
				if r.Mem != nil {
					next.MemPerGPU = *r.Mem
					if err := sched.Validate(hosts, sched.RequestOf(next)); err != nil {
						return fmt.Errorf("job %s: --mem %s: %w", job.RefOf(id, s.Array), units.FormatMem(*r.Mem), err)
					}
				}
				if r.CPUs != nil {
					next.CPUs = *r.CPUs
				}
				if r.HostMem != nil {
					next.HostMem = *r.HostMem
				}
				if err := sched.Validate(hosts, sched.RequestOf(next)); err != nil {
					return fmt.Errorf("job %s: %w", job.RefOf(id, s.Array), err) // names --cpus or --host-mem
				}
				s.MemPerGPU, s.CPUs, s.HostMem = next.MemPerGPU, next.CPUs, next.HostMem
			}
			if r.Priority != nil {
				s.Priority = *r.Priority
			}
			if r.Timeout != nil {
				s.Timeout = *r.Timeout
			}
			if r.Name != nil {
				s.Name = *r.Name
			}
			if r.LogLimit != nil {
				s.LogLimit = *r.LogLimit
			}
			_, err := CheckSpec(*s) // what submit refuses, update refuses
			return err
		})
	}, true, eventlog.JobUpdate)
}

// Requeue implements Service.
func (l *Local) Requeue(ctx context.Context, ids []job.ID, grace time.Duration) ([]HoldResult, error) {
	if l.member() {
		return nil, fmt.Errorf("gssh requeue stops running jobs over SSH, which in the shared lab queue only its pass user %s does: ask them, or gssh cancel and submit again", l.lab.passUser)
	}
	return l.holds(ctx, ids, func(c *control.Controller, id job.ID) (job.Job, error) {
		return c.Requeue(ctx, id, grace, l.opt.User)
	}, true, "") // the controller reports the requeue
}
