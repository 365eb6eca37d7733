package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// SubmitRequest asks to queue a job.
type SubmitRequest struct {
	// Spec is the job. Host "" means "auto"; Name "" the command's first
	// word. Workdir must be absolute, or "~", "~/dir", "~user[/dir]" (the
	// worker's home directories): the caller resolves a relative one
	// against the directory it was given in, as sbatch does.
	Spec   job.Spec
	DryRun bool // check, and say where the job would go; store nothing
	// Hold queues the job held (gssh submit --hold): never placed until
	// gssh release.
	Hold bool
	// After are dependencies by name, resolved at submit into Spec.After
	// (an array's id: every task of it).
	After []DepRef
	// Array makes the job a job array: one task per index, in this order,
	// submitted in one transaction under consecutive ids; ArrayLimit
	// (%N) lets at most that many run at once (0: no limit).
	Array      []int
	ArrayLimit int
	// Async returns once the job is stored, without the scheduling pass
	// that places it (as sbatch does): its reason is "waiting for the
	// first scheduling pass", and a gssh serve's loop is woken for it
	// (the HTTP API's "async": many submits a second).
	Async bool `json:",omitempty"`
}

// DepRef is one dependency by name: --after 12, --after-any 12_3.
type DepRef struct {
	Kind job.DepKind
	Ref  Ref
}

// SubmitResult is what became of a submitted job.
type SubmitResult struct {
	// Job is the job as stored after its pass: running, or queued with
	// the reason (an array's first task). Zero on a dry run.
	Job job.Job
	// Tasks are a job array's tasks, as stored after the pass.
	Tasks []job.Job
	// A dry run's answer: whether the job would start now, where, or why
	// not (the queue ahead of it included).
	DryRun    bool
	WouldRun  bool
	Placement job.Placement
	Reason    string
	// Explanation is the dry run's whole answer: why not elsewhere, the
	// job's place in the queue, when it is expected to start.
	Explanation *Explanation
	// MemAuto is --mem auto's choice, on a dry run too: the memory per
	// GPU it chose (0: whole GPUs) and from which jobs.
	MemAuto   *job.MemAuto
	MemPerGPU uint64
	// PassError says why the job's pass did not run (another pass held
	// the lock, the state was busy): the job is stored and queued, and
	// the next pass places it.
	PassError error
	// Problems are per-host and per-job errors of the pass.
	Problems []error
}

// dryRunID is the id a dry run's job is planned under: after every real
// one, so it queues behind the jobs of its priority already waiting.
const dryRunID = job.ID(math.MaxUint64)

// Submit implements Service. Errors: an invalid spec, a request that can
// never fit (sched.Validate), an admin priority band of a user who is not
// an admin, or more GPUs than the user's max_gpus cap, are input errors;
// nothing is stored.
func (l *Local) Submit(ctx context.Context, r SubmitRequest) (SubmitResult, error) {
	s, err := CheckSpec(r.Spec)
	if err != nil {
		return SubmitResult{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return SubmitResult{}, err
	}
	if err := l.checkPolicy(f.Inventory().Policy.Plan, s); err != nil {
		return SubmitResult{}, err
	}
	var ss stores
	db, err := l.store(!r.DryRun)
	switch {
	case r.DryRun && errors.Is(err, state.ErrNoState):
		ss = memStores(state.NewMem()) // nothing queued yet; a dry run creates nothing
	case err != nil:
		return SubmitResult{}, err
	default:
		ss = fileStores(db)
	}
	st := ss.queue
	for _, d := range r.After {
		if d.Ref.Task < 0 {
			// A whole array is one dependency, however many its tasks.
			if a, err := st.Get(d.Ref.Job); err == nil && a.Spec.Array != nil && a.Spec.Array.Job == a.ID && a.Spec.Array.Tasks > 1 {
				if dep := (job.Dependency{Kind: d.Kind, Job: a.ID, Tasks: a.Spec.Array.Tasks}); !slices.Contains(s.After, dep) {
					s.After = append(s.After, dep)
				}
				continue
			}
		}
		ids, err := resolve(st, []Ref{d.Ref})
		if err != nil {
			switch {
			case errors.Is(err, state.ErrNotFound) && d.Ref.Task < 0:
				return SubmitResult{}, fmt.Errorf("%s %s: there is no job %d (a job can only wait for one already submitted: see gssh ps -a); nothing was submitted", sched.DependencyFlag(d.Kind), d.Ref, d.Ref.Job)
			case errors.Is(err, state.ErrNotFound):
				return SubmitResult{}, fmt.Errorf("%s %s: %w; nothing was submitted", sched.DependencyFlag(d.Kind), d.Ref, err)
			}
			return SubmitResult{}, err
		}
		for _, id := range ids {
			if dep := (job.Dependency{Kind: d.Kind, Job: id}); !slices.Contains(s.After, dep) {
				s.After = append(s.After, dep)
			}
		}
	}
	if err := checkDeps(st, s.After); err != nil {
		return SubmitResult{}, err
	}
	if s.MemAuto != nil {
		s = autoMem(ss.jobs, l.opt.User, s, l.opt.Now())
	}
	if len(r.Array) > sched.MaxArrayTasks {
		return SubmitResult{}, fmt.Errorf("--array: %d tasks, more than %d", len(r.Array), sched.MaxArrayTasks)
	}
	inv := f.Inventory()
	var reports []fleet.Report
	if l.served != nil && !r.DryRun {
		reports = l.recentProbe(ctx, f, inv.Hosts, submitProbeAge) // many submits, one probe
	} else {
		reports = f.Probe(ctx, inv.Hosts, fleet.ProbeOptions{Timeout: l.opt.ProbeTimeout})
	}
	if err := interrupted(ctx); err != nil {
		return SubmitResult{}, err
	}
	hosts := fleet.SchedHosts(inv, reports)
	if err := sched.Validate(hosts, sched.RequestOf(s)); err != nil {
		return SubmitResult{}, err
	}
	if r.DryRun {
		ctl, err := l.controller(f, ss, reports)
		if err != nil {
			return SubmitResult{}, err
		}
		dry := job.Job{ID: dryRunID, User: l.opt.User, Spec: s}
		if r.Hold {
			dry.Hold = &job.Hold{By: l.opt.User, At: l.opt.Now()}
		}
		if len(r.Array) > 0 { // a dry run plans the array's first task
			dry.Spec.Array = &job.ArrayTask{Job: dryRunID, Task: r.Array[0], Tasks: len(r.Array), Limit: r.ArrayLimit}
		}
		trial, err := ctl.DryRun(ctx, dry)
		if err != nil {
			return SubmitResult{}, err
		}
		ex := explanation(trial)
		return SubmitResult{DryRun: true, WouldRun: trial.Start, Placement: trial.Placement, Reason: trial.Pending.Reason.Text, Explanation: &ex,
			MemAuto: s.MemAuto, MemPerGPU: s.MemPerGPU}, nil
	}

	queued := job.Job{User: l.opt.User, Spec: s, Reason: "waiting for the first scheduling pass"}
	if r.Hold {
		queued.Hold = &job.Hold{By: l.opt.User, At: l.opt.Now()}
	}
	var j job.Job
	var tasks []job.Job
	if len(r.Array) == 0 {
		j, err = db.Submit(queued)
	} else {
		all := make([]job.Job, len(r.Array))
		for i := range all {
			all[i] = queued
		}
		tasks, err = db.SubmitAll(all, func(first job.ID, js []job.Job) {
			for i := range js {
				js[i].Spec.Array = &job.ArrayTask{Job: first, Task: r.Array[i], Tasks: len(js), Limit: r.ArrayLimit}
			}
		})
		if err == nil {
			j = tasks[0]
		}
	}
	if err != nil {
		return SubmitResult{}, err
	}
	if len(tasks) == 0 {
		l.logJob(eventlog.JobSubmit, j, "")
	}
	for _, t := range tasks {
		l.logJob(eventlog.JobSubmit, t, "")
	}
	res := SubmitResult{Job: j, MemAuto: s.MemAuto, MemPerGPU: s.MemPerGPU}
	if r.Async && !r.Hold {
		res.Tasks = tasks
		if !l.wake(ctx) && !l.member() {
			// No gssh serve to wake: this process makes the pass, as a
			// submit does, but after answering is not possible here; it
			// is the next pass's (cron's, or a command's).
			res.Job.Reason = "the next scheduling pass places it"
		}
		return res, nil
	}
	if l.member() {
		// Recorded only: the lab's pass user starts it.
		if !r.Hold {
			res.Job.Reason = fmt.Sprintf("the next pass starts it (the lab's passes are run by %s)", l.lab.passUser)
		}
		res.Tasks = tasks
		for i := range res.Tasks {
			res.Tasks[i].Reason = res.Job.Reason
		}
		if !r.Hold && l.servedPass(ctx, db, j) { // a gssh serve made that pass now
			res.Job, res.Tasks = reread(db, j, tasks)
		}
		return res, nil
	}
	if l.served != nil && !r.Hold {
		// A request of gssh serve's: its loop's next pass, one for every
		// submit that comes meanwhile, places it.
		if _, ok := l.served.Pass(ctx, false); ok {
			res.Job, res.Tasks = reread(db, j, tasks)
			return res, nil
		}
		res.Job.Reason, res.Tasks = "gssh serve's next pass places it", tasks
		return res, interrupted(ctx)
	}
	pass, perr := l.pass(ctx, f, db, reports, l.opt.PassWait)
	res.Problems = pass.Problems
	if got, err := db.Get(j.ID); err == nil {
		res.Job = got
	}
	for _, t := range tasks {
		if got, err := db.Get(t.ID); err == nil {
			t = got
		}
		res.Tasks = append(res.Tasks, t)
	}
	if err := interrupted(ctx); err != nil {
		return res, err
	}
	if perr != nil {
		res.PassError = perr
		if res.Job.State == job.Queued {
			switch {
			case errors.Is(perr, control.ErrPassBusy) && l.wake(ctx):
				res.Job.Reason = "another scheduling pass is running; gssh serve's next pass places it, at once"
			case errors.Is(perr, control.ErrPassBusy):
				res.Job.Reason = "another scheduling pass is running; the next pass (gssh schedule) will place it"
			default:
				res.Job.Reason = "the scheduling pass could not run; the next pass (gssh schedule) will place it"
			}
		}
	}
	return res, nil
}

// reread is j and tasks as the state has them now (each as it was where
// it cannot be read).
func reread(db *state.Bolt, j job.Job, tasks []job.Job) (job.Job, []job.Job) {
	if got, err := db.Get(j.ID); err == nil {
		j = got
	}
	var out []job.Job
	for _, t := range tasks {
		if got, err := db.Get(t.ID); err == nil {
			t = got
		}
		out = append(out, t)
	}
	return j, out
}

// checkPolicy refuses what the inventory's policy never lets the
// service's user run: an admin priority band (0-3) of one who is neither
// the queue's owner nor an admin, and more GPUs than the user's max_gpus.
func (l *Local) checkPolicy(pol sched.Policy, s job.Spec) error {
	if err := pol.CheckPriority(l.opt.User, l.opt.Owner, s.Priority); err != nil {
		return fmt.Errorf("%w; nothing was submitted", err)
	}
	if c := pol.CapsOf(l.opt.User); c.MaxGPUs > 0 && s.GPUs > c.MaxGPUs {
		return fmt.Errorf("--gpus %d: %s's cap is max_gpus %d (the inventory's policy); give --gpus %d or less; nothing was submitted", s.GPUs, l.opt.User, c.MaxGPUs, c.MaxGPUs)
	}
	return nil
}

// The runs --mem auto reads: the user's most recent ended runs of the
// command with a sampled peak, at most autoMemRuns, at most autoMemAge
// old.
const (
	autoMemRuns = 5
	autoMemAge  = 30 * 24 * time.Hour
)

// autoMem is s with --mem auto's choice: the highest peak of user's
// recent ended runs of the same command (argv, shell or not) that gssh
// serve sampled, with job.MemAutoMargin on top, rounded up to whole MiB;
// with none, whole GPUs (MemPerGPU 0, MemAuto.From empty). Which jobs it
// read stays in s.MemAuto, for gssh show and --dry-run to say.
func autoMem(st control.JobLister, user string, s job.Spec, now time.Time) job.Spec {
	ended := []job.State{job.Succeeded, job.Failed, job.Cancelled, job.Timeout, job.Lost}
	past, _ := st.List(state.Filter{User: user, States: ended, Since: now.Add(-autoMemAge)})
	auto := &job.MemAuto{}
	for i := len(past) - 1; i >= 0 && len(auto.From) < autoMemRuns; i-- { // newest first
		p := past[i]
		if p.GPUUse == nil || p.GPUUse.PeakBytes == 0 || p.Spec.Shell != s.Shell || !slices.Equal(p.Spec.Argv, s.Argv) {
			continue
		}
		auto.From = append(auto.From, p.ID)
		auto.Peak = max(auto.Peak, p.GPUUse.PeakBytes)
	}
	s.MemAuto, s.MemPerGPU = auto, 0
	if auto.Peak > 0 {
		const mib = 1 << 20
		b := uint64(float64(auto.Peak) * (1 + job.MemAutoMargin))
		s.MemPerGPU = (b + mib - 1) / mib * mib
	}
	return s
}

// checkDeps refuses dependencies that cannot be met: a job st does not
// hold (a job can only wait for one submitted before it, so no cycle can
// form), one that has ended as its kind does not allow, and one job named
// under two kinds that cannot both be met. Its errors name the flag.
func checkDeps(st control.Store, after []job.Dependency) error {
	kinds := map[job.ID]job.DepKind{}
	for _, d := range job.Flatten(after) {
		dep, err := st.Get(d.Job)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return fmt.Errorf("%s %d: there is no job %d (a job can only wait for one already submitted: see gssh ps -a); nothing was submitted", sched.DependencyFlag(d.Kind), d.Job, d.Job)
		case err != nil:
			return fmt.Errorf("%s %d: %w", sched.DependencyFlag(d.Kind), d.Job, err)
		}
		if k, ok := kinds[d.Job]; ok && k != d.Kind && k != job.AfterAny && d.Kind != job.AfterAny {
			return fmt.Errorf("job %s is named by %s and %s: it cannot both succeed and fail; nothing was submitted", dep.Ref(), sched.DependencyFlag(k), sched.DependencyFlag(d.Kind))
		}
		kinds[d.Job] = d.Kind
		if r, never := sched.DependencyNever(d, dep); never {
			return fmt.Errorf("%s: it could never start; nothing was submitted", r.Text)
		}
	}
	return nil
}

// CheckSpec reports what in s cannot be queued, and fills its defaults
// (Host "auto", Name from the command's first word). Its errors name the
// gssh submit flag to change.
func CheckSpec(s job.Spec) (job.Spec, error) {
	if s.Host == "" {
		s.Host = "auto"
	}
	switch wd := s.Workdir; {
	case s.GPUs < 1:
		return s, fmt.Errorf("--gpus %d: a job needs at least 1 GPU", s.GPUs)
	case s.CPUs < 0:
		return s, fmt.Errorf("--cpus %d: give a whole number of CPUs, 1 or more (leave --cpus out to book none)", s.CPUs)
	case s.Priority < 0 || s.Priority > 10:
		return s, fmt.Errorf("--priority %d: give 0 (first) to 10 (last)", s.Priority)
	case wd == "":
		return s, errors.New("--workdir: empty: give the directory the job runs in")
	case s.Preemptible && s.Interactive != nil:
		return s, errors.New("--preemptible: a job of gssh run is never preempted (nobody would run it again); give it to gssh submit")
	case s.Requeue && s.Interactive != nil:
		return s, errors.New("--requeue: a job of gssh run is never requeued (nobody would run it again); give it to gssh submit")
	case s.SignalGrace < 0 || s.SignalGrace > 0 && !s.Preemptible:
		return s, fmt.Errorf("--signal-grace %s: give a duration more than 0, such as 60s, with --preemptible (it is the time a preempted job gets between SIGTERM and SIGKILL)", s.SignalGrace)
	}
	if err := launch.CheckSpec(s); err != nil {
		return s, err
	}
	if s.Name == "" {
		first := strings.Fields(s.Argv[0] + " x")[0]
		s.Name = defaultName(path.Base(first))
	}
	return s, nil
}

// defaultName is a job's name made of its command's first word: its
// control characters (an escape, a tab) made '?', at most 64 characters,
// so that a name gssh made is one every pass takes.
func defaultName(word string) string {
	r := []rune(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, word))
	return string(r[:min(len(r), 64)])
}
