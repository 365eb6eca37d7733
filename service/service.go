// Package service holds gssh's user-facing operations as typed calls:
// submit (with validation and dry-run), cancel, the job list and one job,
// a job's log, a scheduling pass, and the GPUs and hosts of the fleet,
// with the versioned JSON documents they answer with (docs.go).
//
// cmd/gssh calls them through the Service interface. Local carries them
// out in the calling process, opening the state file and reaching the
// hosts itself; the daemon will later serve the same interface over a
// unix socket and HTTP, and a client will implement it.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/launch"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Service is what a gssh front end asks for. Errors that concern some
// hosts only come as a *PartialError next to a complete answer; state
// file problems as a *state.FileError; a cancelled ctx as an error
// wrapping context.Canceled.
type Service interface {
	// GPUs probes the selected hosts (all, when q is empty).
	GPUs(ctx context.Context, q HostQuery) (GPUsDoc, error)
	// Hosts probes the selected hosts and measures their connections.
	Hosts(ctx context.Context, q HostQuery) (HostsDoc, error)
	// Submit validates and queues a job, then runs one pass to start it.
	Submit(ctx context.Context, r SubmitRequest) (SubmitResult, error)
	// Jobs lists jobs, oldest first.
	Jobs(ctx context.Context, q JobQuery) (JobsDoc, error)
	// Job returns one job; an error wrapping state.ErrNotFound when there
	// is none.
	Job(ctx context.Context, id job.ID) (job.Job, error)
	// Logs writes a job's log to out (following it until the job ends with
	// r.Follow).
	Logs(ctx context.Context, r LogsRequest, out io.Writer) (LogsResult, error)
	// Cancel stops one job and records it cancelled, then (when it held
	// GPUs) runs a pass so that queued jobs start on them at once.
	Cancel(ctx context.Context, r CancelRequest) (CancelResult, error)
	// Run queues a job, waits for its placement and runs it in the
	// foreground with the request's streams (gssh run).
	Run(ctx context.Context, r RunRequest) (RunResult, error)
	// Schedule runs one pass.
	Schedule(ctx context.Context, r ScheduleRequest) (PassResult, error)
	// Hold keeps queued jobs from being placed until released; Release
	// takes the holds off, then runs one pass so they may start at once.
	// Each job's error is in its HoldResult; the jobs before it are done.
	Hold(ctx context.Context, ids []job.ID) ([]HoldResult, error)
	// Update changes queued jobs (priority, walltime, GPU memory, name),
	// then runs one pass.
	Update(ctx context.Context, r UpdateRequest) ([]HoldResult, error)
	// Requeue stops running jobs and puts them back in the queue under
	// their ids (their runs count in fair-share), then runs one pass.
	Requeue(ctx context.Context, ids []job.ID, grace time.Duration) ([]HoldResult, error)
	// Resolve turns job names ("12", an array's id "12", "12_3") into job
	// ids.
	Resolve(ctx context.Context, names []string) ([]job.ID, error)
	Release(ctx context.Context, ids []job.ID) ([]HoldResult, error)
	// Explain says what the planner makes of a queued job now: why it
	// waits, its place in the queue, its reservation, its expected start.
	Explain(ctx context.Context, id job.ID) (Explanation, error)
	// Usage reports each user's fair-share usage and standing.
	Usage(ctx context.Context) (UsageDoc, error)
	// Reap probes the hosts and kills the orphans of gssh jobs (and
	// foreign processes where reap_foreign: kill), or with r.DryRun says
	// what it would kill.
	Reap(ctx context.Context, r ReapRequest) (ReapDoc, error)
	// Events calls fn with each event of the event log that q selects,
	// oldest first (gssh events).
	Events(ctx context.Context, q EventQuery, fn func(eventlog.Record) error) (EventsResult, error)
	// Drain records a drain of hosts (all or none): from r.From on they
	// take no new jobs, and before then only jobs that end by then; the
	// jobs running there go on. Resume lifts drains Drain recorded (all
	// or none). DrainJobs lists the gssh jobs holding GPUs on hosts
	// (gssh drain --wait).
	Drain(ctx context.Context, r DrainRequest) (DrainResult, error)
	Resume(ctx context.Context, hosts []string) (DrainResult, error)
	DrainJobs(ctx context.Context, hosts []string) ([]job.Job, error)
	// StateBackup writes a consistent copy of the state file to file;
	// StateCheck checks file (the state file when "") and reports its
	// problems; StateRestore puts a backup in place of the state file,
	// job ids continuing past every id found on the workers.
	StateBackup(ctx context.Context, file string) (state.Summary, error)
	StateCheck(ctx context.Context, file string) (state.Report, error)
	StateRestore(ctx context.Context, r RestoreRequest) (RestoreResult, error)
	// CreateToken makes an HTTP API token (shown once); Tokens lists the
	// tokens the caller may see; RevokeTokens removes tokens by id.
	// Doctor checks the hosts q selects (all when empty): see Local.Doctor.
	Doctor(ctx context.Context, q HostQuery) (DoctorDoc, error)
	CreateToken(ctx context.Context, r TokenRequest) (TokenCreated, error)
	Tokens(ctx context.Context) (TokensDoc, error)
	RevokeTokens(ctx context.Context, ids []string) ([]TokenInfo, error)
	// AddCron stores a scheduled job, Crons lists them, RemoveCrons
	// removes them by id (see Local.AddCron).
	AddCron(ctx context.Context, r CronRequest) (CronEntry, error)
	Crons(ctx context.Context) (CronsDoc, error)
	RemoveCrons(ctx context.Context, ids []string) ([]state.Cron, error)
}

// HostQuery selects hosts: by name (all when empty) and by labels (a host
// must carry every one).
type HostQuery struct {
	Hosts  []string
	Labels []string
	// MaxAge lets a running gssh serve answer GPUs from a probe of the
	// same hosts at most this old, and from its GPU streams' frames of at
	// most this age or StreamAge, the lesser (0: a probe now). A Local
	// that keeps no streams always probes.
	MaxAge time.Duration `json:",omitempty"`
}

// JobQuery selects jobs for Jobs.
type JobQuery struct {
	All  bool   // ended jobs too; else queued, launching and running ones
	User string // "" = every user's
	// Since, with All, keeps the jobs active at some time since then:
	// not ended, or ended at or after it (state.Filter.Since).
	Since time.Time
	// First, when N > 0, lists the oldest N jobs only; After, the jobs
	// whose ids are greater (a page: state.Filter.First, After).
	First int
	After job.ID
}

// LogsRequest asks for a job's log.
type LogsRequest struct {
	ID     job.ID
	Tail   int  // the last Tail lines first; -1 = all
	Follow bool // keep printing until the job ends
	// Attempt is the launch attempt whose log to print (its number,
	// GSSH_ATTEMPT); 0: the latest attempt that ran. Follow goes with the
	// job's current attempt only.
	Attempt int
}

// LogsResult says what became of a followed job.
type LogsResult struct {
	// Job is the job as its log's attempt ran it: the record itself for
	// its current attempt; for an earlier one, the record with that
	// attempt's number, host and directory.
	Job job.Job
	// Ended is how the job ended when Logs followed it to its end (nil
	// otherwise): the log itself does not say.
	Ended *job.Status
}

// UpdateRequest changes queued jobs: each field not nil replaces the
// spec's.
type UpdateRequest struct {
	IDs      []job.ID
	Priority *int
	Timeout  *time.Duration
	Mem      *uint64 // bytes per GPU, > 0
	Name     *string
	CPUs     *int    // host CPUs, > 0
	HostMem  *uint64 // host memory in bytes, > 0
	LogLimit *uint64 // the log's cap in bytes (--log-limit), > 0
}

// HoldResult is what Hold, Release or Update did to one job: Job as recorded, or
// Err (an error wrapping control.ErrNotQueued, control.ErrNotHeld or
// state.ErrNotFound) and nothing changed.
type HoldResult struct {
	Job job.Job
	Err error
}

// CancelRequest asks to stop one job.
type CancelRequest struct {
	ID    job.ID
	Grace time.Duration // between SIGTERM and SIGKILL
	// NoPass leaves the pass to the caller (who cancels several jobs and
	// runs one pass after the last, so none of them is started meanwhile).
	NoPass bool
	// By is who the job is recorded cancelled by ("cancelled by ...");
	// "": the service's user.
	By string
	// Force records the job cancelled without reaching its worker
	// (control.ForceCancel): for a job whose host is down or gone from
	// the inventory. Its processes are killed if a pass reaches the host
	// again.
	Force bool
}

// CancelResult is what a cancel did.
type CancelResult struct {
	Job job.Job // as recorded
	// Freed: the job held GPUs (it was launching or running), so a pass
	// may start what waited for them.
	Freed bool
	// Recorded: shared-lab mode, the job is active and only the cancel
	// is recorded; the next pass (the pass user's) stops it.
	Recorded bool
	// Pass is the pass run after the job freed its GPUs (nil when it held
	// none, or the pass could not run: PassError says why).
	Pass      *PassResult
	PassError error
}

// ScheduleRequest asks for one pass.
type ScheduleRequest struct {
	Wait time.Duration // how long to wait for another pass's lock
	// Rebalance has the pass preempt for waiting jobs even when the
	// policy's rebalance is off (gssh schedule --rebalance).
	Rebalance bool
	// DryRun (with Rebalance) plans as a rebalancing pass would now and
	// says what it would preempt and why (PassResult.Preempts), changing
	// nothing: no pass lock, no worker signalled, nothing written. The
	// jobs are as the last pass recorded them.
	DryRun bool
	// ReusePolls lets the pass leave out of its poll the hosts whose jobs
	// all run undisturbed and were polled less than the poll interval
	// ago (ReusePolls on the service; control.Options.PollEvery): gssh
	// serve's own passes, unless a request asked for a full one.
	ReusePolls bool `json:"-"`
}

// PassResult is what a pass did.
type PassResult struct {
	Started  []job.Job `json:"started"`
	Finished []job.Job `json:"finished"`
	Pending  []job.Job `json:"pending"`
	Queued   int       `json:"queued"` // how many jobs the pass left queued
	// Preempted are the jobs the pass signalled for a preemption (now
	// preempting), Requeued the preempted ones it put back in the queue.
	Preempted []job.Job `json:"preempted,omitempty"`
	Requeued  []job.Job `json:"requeued,omitempty"`
	// Hosts are what the pass said of hosts called down, still down, or
	// answering again; Strays the attempts left on a failed host that it
	// found running there and killed (each as the job was then).
	Hosts  []HostChange   `json:"hosts,omitempty"`
	Strays []health.Stray `json:"strays_killed,omitempty"`
	// Unknown are the jobs the pass found on a host it called down.
	Unknown []job.Job `json:"unknown,omitempty"`
	// GPUFailed are the running jobs whose GPU the pass found unhealthy.
	GPUFailed []job.Job `json:"gpu_failed,omitempty"`
	// Preempts are what a dry run (ScheduleRequest.DryRun) would preempt,
	// and for whom, and why.
	Preempts []sched.Preempt `json:"preempts,omitempty"`
	// Holds say, when a dry run would preempt nothing, which setting
	// keeps each waiting job from preempting (sched.Hold).
	Holds []sched.Hold `json:"holds,omitempty"`
	// Problems are per-host and per-job errors that did not stop the pass.
	Problems []error `json:"-"`
	// Reaped are the GPU processes the pass meant to kill (orphans of
	// gssh jobs; foreign ones where reap_foreign: kill) and what became of
	// each (Action).
	Reaped []ReapedDoc `json:"reaped,omitempty"`
	// Housekeeping is what the pass trimmed: job records moved to the
	// history, usage entries pruned, job directories removed.
	Housekeeping control.Housekeeping `json:"-"`
}

// HostChange is one host a pass found down (Change "down": called down
// now; "still down") or answering again ("up"), with its record.
type HostChange struct {
	Host   string      `json:"host"`
	Change string      `json:"change"`
	Record health.Host `json:"record"`
}

func hostNotes(ns []control.HostNote) []HostChange {
	var out []HostChange
	for _, n := range ns {
		out = append(out, HostChange{Host: n.Host.Name, Change: n.Change, Record: n.Host})
	}
	return out
}

// PartialError means the answer is complete but some hosts could not be
// reached or probed (`gssh` exits 2).
type PartialError struct{ Failed, Total int }

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d of %d hosts could not be reached or probed", e.Failed, e.Total)
}

// ErrPassBusy means another pass held the pass lock for longer than the
// wait (Schedule; a Submit reports it in SubmitResult.PassError).
var ErrPassBusy = control.ErrPassBusy

// Defaults.
const (
	// DefaultPassWait is how long a submit-triggered pass waits for the
	// pass lock before leaving the job queued (ARCHITECTURE: about 2 s).
	DefaultPassWait = 2 * time.Second
	// DefaultGrace is gssh cancel's time between SIGTERM and SIGKILL.
	DefaultGrace = launch.DefaultGrace
)

// Options configure Local.
type Options struct {
	// Fleet says how hosts are found and reached (see fleet.Options).
	Fleet fleet.Options
	// StatePath is the state file. StateExplicit says it was given
	// (--state, $GSSH_STATE): then a missing file is an error for the
	// read-only calls; the default path missing is an empty queue.
	StatePath     string
	StateExplicit bool
	// Server is gssh serve's socket, when given (--server, $GSSH_SERVER):
	// a Remote's calls then go through it alone (see Remote); "": the
	// socket beside the state, when a gssh serve answers there. A URL
	// (http://, https://) is a gssh serve's HTTP API, reached with Token
	// (its requests made as the token's user; no view of the hosts is
	// sent: the server's is taken).
	Server string
	Token  string
	// StateWait is how long one state operation waits for another
	// process's lock (0 = state.DefaultTimeout; negative: one try, no
	// wait); StateTrace, when set, sees each operation (state.Options.Trace);
	// closing StateCancel ends a wait for the lock at once (the CLI's
	// Ctrl-C: state.Options.Cancel).
	StateWait   time.Duration
	StateTrace  func(state.Op)
	StateCancel <-chan struct{}
	// User owns the jobs submitted and is named in "cancelled by".
	User string
	// Owner is the user who owns the queue and so may use every priority
	// band (sched.Policy.CheckPriority): in personal mode the local user,
	// who is also User; "" for a queue no one owns (the shared-lab
	// mode), where only the policy's `admin: true` users may give
	// --priority 0-3.
	Owner string
	// ProbeTimeout bounds each host's probe (0 = fleet.DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// PassWait is how long a submit's pass waits for the pass lock (0 =
	// DefaultPassWait).
	PassWait time.Duration
	Now      func() time.Time // nil = time.Now
	// LabInventory is where a lab's shared queue is looked for
	// (DefaultLabInventory for gssh; "" = personal mode only): see
	// findLab.
	LabInventory string
}

// Local carries the operations out in this process. Its fleet (and so its
// SSH connections) lives from the first call that needs hosts to Close.
type Local struct {
	opt     Options
	lab     *lab        // shared-lab mode; nil in personal mode
	labErr  error       // the lab inventory is broken: every call fails with it
	checked checkedView // gssh serve's: how Check found the hosts (Answers)
	*conns              // shared with the Locals As makes of this one
	derived bool        // made by As: Close leaves conns to the Local it came from
	// served is gssh serve's loop, in a Local of its requests (As): a
	// submit or a change records, then waits for the loop's pass in place
	// of a pass of its own (many requests, one pass).
	served Passes
}

// Passes are gssh serve's passes as the Locals of its requests see them.
type Passes interface {
	// Wake asks for a pass soon; it does not wait.
	Wake()
	// Pass asks for a pass and waits until one that started after the
	// call has ended (bounded by ctx): whether one did, and what the last
	// pass to end did (nil when it could not run). With full, that pass
	// polls every host with jobs (gssh schedule, gssh wait: they ask to
	// see every end); otherwise it may leave out the hosts polled a
	// moment ago (ScheduleRequest.ReusePolls).
	Pass(ctx context.Context, full bool) (*PassResult, bool)
}

// conns are what a Local keeps open between calls: the fleet (its SSH
// connections), the event log, the state file's page walks and gssh
// serve's answers to gssh gpus.
type conns struct {
	mu       sync.Mutex
	fleet    *fleet.Fleet
	fleetErr error
	ev       events
	tap      func(eventlog.Event) // TapEvents: told of each event written
	walks    state.Walks          // the state file's page walks, shared by every open of this process
	gpus     gpusCache            // gssh serve's answers to gssh gpus (CachedGPUs)
	probes   probeCache           // gssh serve's last probe of every host, for its submits (recentProbe)
	peers    peerCache            // the accounts of gssh serve's peers' uids (PeerUser)
	others   othersCache          // the hosts' other queues' jobs, for passes on streamed hosts (otherQueues)
	logs     logHub               // the logs followed, each shared by its followers (Logs)
	memory   memoryLog            // gssh serve's samples of each job's GPU memory (SampleMemory)
	// keep, when set (KeepState: gssh serve's), keeps the state file
	// open between operations that come close together.
	keep *state.Keep
	// watch, when set (WatchGPUs: gssh serve's), is the interval of the
	// GPU streams each fleet opened keeps to its hosts; unwatch stops
	// the current fleet's.
	watch    time.Duration
	watchLog func(problem bool, text string)
	unwatch  func()
	// polls, when set (ReusePolls: gssh serve's), is when each host's
	// jobs were last polled, and pollEvery how often they must be.
	polls     *pollBook
	pollEvery time.Duration
}

// ReusePolls has l's passes poll a host whose jobs all run undisturbed
// at most every interval (control.Options.PollEvery): a pass a request
// asks for between gssh serve's timed passes then reaches only the
// hosts it launches on or stops jobs on. For gssh serve, with its pass
// interval; call it before l's first call.
func (l *Local) ReusePolls(every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls, l.pollEvery = &pollBook{at: map[string]time.Time{}}, every
}

// pollBook is a control.PollBook shared by a service's passes.
type pollBook struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (b *pollBook) LastPolled(host string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at[host]
}

func (b *pollBook) Polled(host string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at[host] = at
}

// WatchGPUs has every fleet l opens keep a GPU stream to each of its
// hosts, a frame every interval (fleet.Watch): its passes, submits and
// answers to gssh gpus read the hosts' GPUs from the frames of the last
// StreamAge, probing only hosts without one. log (may be nil) is told
// when a host's stream stops or runs again (fleet.Watch). For gssh
// serve; call it before l's first call.
func (l *Local) WatchGPUs(every time.Duration, log func(problem bool, text string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watch, l.watchLog = every, log
}

// StreamAge is how old a GPU stream's frame may be to stand for a probe:
// two of its intervals (a frame comes every interval; one late frame does
// not make the pass probe); 0 when l keeps no streams.
func (l *Local) StreamAge() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return 2 * l.watch
}

// KeepState has l keep the state file open between its operations that
// come less than state.DefaultIdle apart, its concurrent submits sharing
// a commit (state.Keep): for gssh serve, the state's main user. Other
// processes wait for the file meanwhile, as for any operation of it.
func (l *Local) KeepState() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep == nil {
		l.keep = &state.Keep{}
	}
}

// ObserveProbes has fn told of each probe l's fleet makes
// (fleet.Options.Probed): gssh serve's metrics. It takes effect when the
// fleet is first opened (call it before any other call).
func (l *Local) ObserveProbes(fn func(fleet.Report)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opt.Fleet.Probed = fn
}

var _ Service = (*Local)(nil)

// New returns a Local service; nothing is opened before the first call.
func New(opt Options) *Local {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.ProbeTimeout = cmp.Or(opt.ProbeTimeout, fleet.DefaultProbeTimeout)
	opt.PassWait = cmp.Or(opt.PassWait, DefaultPassWait)
	l := &Local{opt: opt, conns: &conns{}}
	l.lab, l.labErr = findLab(&l.opt)
	return l
}

// As is l acting for user (gssh serve's request of that user): the
// jobs it submits are user's, what it may do is what user may (a lab
// member's rights, unless user is the lab's pass user), and a submit or
// a change waits for a pass of served (nil: as l does). It shares l's
// connections, event log and state file: its Close closes nothing.
func (l *Local) As(user string, served Passes) *Local {
	d := *l
	d.opt.User, d.derived, d.served = user, true, served
	return &d
}

// Close closes the fleet's connections, if any were opened, and the
// event log. Calls made after it open them again.
func (l *Local) Close() error {
	if l.derived {
		return nil
	}
	l.closeEvents()
	l.mu.Lock()
	if l.keep != nil {
		l.keep.Close()
	}
	l.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.fleet
	l.fleet, l.fleetErr = nil, nil
	if l.unwatch != nil {
		l.unwatch()
		l.unwatch = nil
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// hosts opens the fleet on first use.
func (l *Local) hosts() (*fleet.Fleet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.labErr != nil {
		return nil, l.labErr
	}
	if l.fleet == nil && l.fleetErr == nil {
		l.fleet, l.fleetErr = fleet.New(l.opt.Fleet)
		if l.fleetErr == nil && l.watch > 0 {
			l.unwatch = l.fleet.Watch(context.Background(), l.watch, l.watchLog)
		}
	}
	return l.fleet, l.fleetErr
}

// store opens the state file; a read-only caller never creates it.
func (l *Local) store(create bool) (*state.Bolt, error) {
	if l.labErr != nil {
		return nil, l.labErr
	}
	l.mu.Lock()
	keep := l.keep
	l.mu.Unlock()
	o := state.Options{Now: l.opt.Now, Timeout: l.opt.StateWait, NoCreate: !create, Trace: l.opt.StateTrace, Cancel: l.opt.StateCancel, Walks: &l.walks, Keep: keep}
	if l.lab != nil {
		o.Shared = l.shared()
	}
	st, err := state.Open(l.opt.StatePath, o)
	var fe *state.FileError
	if l.lab != nil && errors.Is(err, fs.ErrPermission) && errors.As(err, &fe) {
		// Keep the FileError (exit 3), saying why this user may not.
		fe.Err = fmt.Errorf("%w: the lab's queue is group %s's (%s); ask its admin to add you (usermod -aG %s %s), then log in again", fe.Err, l.lab.dir.Group, l.lab.file, l.lab.dir.Group, l.opt.User)
	}
	return st, err
}

// readStore opens the state file for reading. none reports that the
// default file does not exist yet: nothing was ever submitted, which is an
// empty queue, not an error.
func (l *Local) readStore() (st *state.Bolt, none bool, err error) {
	st, err = l.store(false)
	if errors.Is(err, state.ErrNoState) && !l.opt.StateExplicit {
		return nil, true, nil
	}
	return st, false, err
}

// workers is the worker side of jobs over the fleet, for the state's
// cluster id; hosts of run_as: sudo run each job as its owner.
func workers(f *fleet.Fleet, cluster string) launch.Workers {
	return launch.Workers{
		Cluster: cluster,
		Shell:   func(h string) (launch.Shell, error) { return f.Shell(h) },
		Sudo: func(h string) bool {
			host, ok := f.Inventory().Lookup(h)
			return ok && host.RunAsSudo
		},
	}
}

// controller builds the pass of f over the stores s, under the
// inventory's policy; reports, when set, are the probe the pass uses
// instead of probing again.
func (l *Local) controller(f *fleet.Fleet, s stores, reports []fleet.Report) (*control.Controller, error) {
	return l.rebalancer(f, s, reports, false)
}

// rebalancer is controller, whose passes plan preemptions whatever the
// policy says when rebalance is set (gssh schedule --rebalance).
func (l *Local) rebalancer(f *fleet.Fleet, s stores, reports []fleet.Report, rebalance bool) (*control.Controller, error) {
	return l.passController(f, s, reports, rebalance, false)
}

// passController is rebalancer, leaving out of its polls the steady
// hosts polled a moment ago with reusePolls (ReusePolls).
func (l *Local) passController(f *fleet.Fleet, s stores, reports []fleet.Report, rebalance, reusePolls bool) (*control.Controller, error) {
	cluster := ""
	if s.cluster != nil {
		var err error
		if cluster, err = s.cluster(); err != nil {
			return nil, err
		}
	}
	snaps := otherQueues{Snapshots: fleet.Snapshots{Fleet: f, Timeout: l.opt.ProbeTimeout, Reports: reports, MaxAge: l.StreamAge()}, fleet: f, cluster: cluster, timeout: l.opt.ProbeTimeout, cache: &l.others, now: l.opt.Now}
	w := workers(f, cluster)
	var polls control.PollBook
	if l.polls != nil && reusePolls {
		polls = l.polls
	}
	return control.New(control.Options{
		Store:     s.queue,
		Snapshots: snaps,
		HostsOf:   snaps,
		Workers:   w,
		Reaper:    w,
		Remover:   w,
		Jobs:      s.jobs,
		Keeper:    s.keeper,
		Events:    eventSink{l.eventLog()},
		Sessions:  l.sessions(),
		Self:      l.opt.User,
		Now:       l.opt.Now,
		Policy:    f.Inventory().Policy.Plan,
		Cluster:   cluster,
		Rebalance: rebalance,
		Ledger:    s.ledger,
		Drains:    s.drains,
		Rules:     f.Inventory().Policy.Health,
		Keep:      f.Inventory().Policy.Keep,
		LogLimit:  f.Inventory().Policy.LogLimit,
		Ports:     f.Inventory().Policy.PortRange(),
		Known:     func(h string) bool { _, ok := f.Inventory().Lookup(h); return ok },
		Launches:  passLaunches,
		Polls:     polls,
		PollEvery: l.pollEvery,
	})
}

// passLaunches is how many launches a pass runs at once: a burst of
// submits started in one pass takes its longest host's share of them,
// not their sum (each connection's sessions are capped still: sshexec's
// MaxSessions).
const passLaunches = 16

// pass runs one pass under the pass lock (next to the state file),
// waiting up to wait for it.
func (l *Local) pass(ctx context.Context, f *fleet.Fleet, st *state.Bolt, reports []fleet.Report, wait time.Duration) (PassResult, error) {
	return l.rebalancePass(ctx, f, st, reports, wait, ScheduleRequest{})
}

// rebalancePass is pass, planning preemptions whatever the policy says
// when r.Rebalance is set, and leaving steady hosts out of its polls
// with r.ReusePolls.
func (l *Local) rebalancePass(ctx context.Context, f *fleet.Fleet, st *state.Bolt, reports []fleet.Report, wait time.Duration, r ScheduleRequest) (PassResult, error) {
	if l.member() {
		return PassResult{}, l.notPassUser()
	}
	ctl, err := l.passController(f, fileStores(st), reports, r.Rebalance, r.ReusePolls)
	if err != nil {
		return PassResult{}, err
	}
	unlock, err := l.passLock()(ctx, l.opt.StatePath+".pass.lock", wait)
	if err != nil {
		return PassResult{}, err
	}
	defer unlock()
	if l.lab != nil {
		l.runDir() // the pass account keeps the directory of gssh run's locks; a problem is a member's gssh run's to tell
	}
	if active, err := st.Active(); err == nil {
		l.sessions().sweep(active) // under the pass lock
	}
	res, err := ctl.Pass(ctx)
	if ierr := interrupted(ctx); ierr != nil {
		err = ierr
	}
	return PassResult{Started: res.Started, Finished: res.Finished, Pending: res.Pending, Queued: res.Queued, Problems: res.Errors,
		Preempted: res.Preempted, Requeued: res.Requeued, Hosts: hostNotes(res.Hosts), Strays: res.Strays, Unknown: res.Unknown, GPUFailed: res.GPUFailed,
		Reaped: reapedDocs(res.Reaped), Housekeeping: res.Housekeeping}, err
}

// Schedule implements Service. An error wrapping control.ErrPassBusy
// means another pass held the lock for longer than r.Wait. It never
// creates the state file: with the default one missing there is nothing
// to schedule; a file named by the user that is missing is an error (a
// typo in a crontab must not start a second, empty queue).
//
// A dry run (r.DryRun, with r.Rebalance) takes no lock and changes
// nothing, so a member of a shared lab may ask for one too.
func (l *Local) Schedule(ctx context.Context, r ScheduleRequest) (PassResult, error) {
	if r.DryRun && !r.Rebalance {
		return PassResult{}, errors.New("--dry-run goes with --rebalance: gssh schedule --rebalance --dry-run says what a rebalancing pass would preempt (gssh submit --dry-run says where a job would start)")
	}
	if l.member() && !r.DryRun && l.served != nil {
		// A member's request of gssh serve: its loop's pass, which every
		// request that comes meanwhile shares.
		res, ok := l.served.Pass(ctx, true)
		switch {
		case !ok:
			return PassResult{}, cmp.Or(interrupted(ctx), ErrPassBusy)
		case res == nil:
			return PassResult{}, fmt.Errorf("gssh serve's pass could not run (its log says why)")
		}
		return *res, nil
	}
	if l.member() && !r.DryRun {
		return PassResult{}, l.notPassUser()
	}
	st, none, err := l.readStore()
	if err != nil || none {
		return PassResult{}, err
	}
	f, err := l.hosts()
	if err != nil {
		return PassResult{}, err
	}
	if r.DryRun {
		ctl, err := l.rebalancer(f, fileStores(st), nil, true)
		if err != nil {
			return PassResult{}, err
		}
		d, err := ctl.Preempts(ctx)
		if ierr := interrupted(ctx); ierr != nil {
			err = ierr
		}
		return PassResult{Started: []job.Job{}, Finished: []job.Job{}, Pending: []job.Job{}, Queued: len(d.Pending), Preempts: d.Preempts, Holds: d.Holds}, err
	}
	return l.rebalancePass(ctx, f, st, nil, r.Wait, r)
}

// interrupted returns ctx's error when the caller gave up (Ctrl-C), so
// that nothing half-probed is reported as a timeout.
func interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return nil
}
