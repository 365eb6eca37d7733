package sched

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// IdleUsedMax is the most GPU memory, in bytes, a GPU whose process list
// cannot be read may show in use and still count as idle for an exclusive
// job: the driver keeps a few MiB, a CUDA context takes hundreds. More
// than this (and the driver's reserve, gpuinfo.Slack) in use that no
// listed process accounts for is memory held by an invisible process
// (gpuinfo.GPU.Invisible).
const IdleUsedMax = gpuinfo.IdleUsedMax

// Host is one host as the planner sees it: the inventory's facts and the
// host's last snapshot. What gssh jobs hold there comes from
// Input.Running, never from the caller. The planner never changes it.
type Host struct {
	Name       string
	Labels     []string
	ReservePct float64 // GPU memory kept back, percent of each GPU's total, in [0, 100)
	Drain      bool    // the inventory's drain: true: no new jobs
	// Drained is the host's drain by gssh drain, as the state file keeps
	// it (nil: none): no new jobs from its From on, and before then only
	// jobs that end by then (see Drain).
	Drained *Drain
	// ReapForeign is the inventory's reap_foreign: kill: GPU processes
	// there that are no gssh job's are killed (package reap, by a pass);
	// the planner does not read it.
	ReapForeign bool
	Snapshot    gpuinfo.Snapshot
	// ProbedAt is when Snapshot was taken (zero: unknown, now): a pass
	// that reads the same frame of a host's GPU stream as the pass before
	// counts it once toward a GPU's recovery. The planner does not read it.
	ProbedAt time.Time
	// Others are the jobs of other gssh queues (other state files, other
	// cluster ids, other logins) live on this host, as the worker's GPU
	// claims say (launch.OtherQueues): their GPUs are taken, as the
	// bookings of this queue's jobs are, and never taken back.
	Others []OtherJob
	// Reached reports whether the host answered SSH when Snapshot was
	// taken, whatever the probe then found (a probe that timed out after
	// connecting, on a hung nvidia-smi, still reached it): what the pass
	// counts as a contact. The planner does not read it.
	Reached bool
	// Recovering are the GPUs (by index) that read unhealthy in an
	// earlier probe and have not read healthy in enough probes in a row
	// since (health.HealthyProbes), each with why in words: no job is
	// placed on them (CodeUnhealthy), whatever this snapshot says.
	Recovering map[int]string

	// units are the snapshot's units, listed by Prepare; nil: listed by
	// each plan.
	units  []unit
	listed *gpuinfo.GPU // &Snapshot.GPUs[0] when units were listed
}

// Prepare lists each host's GPUs (and MIG devices) once, for the plans
// that follow on the same snapshots (a simulator plans thousands of times
// on one lab): a plan then reuses the list instead of making its own. A
// host whose Snapshot.GPUs is replaced is listed afresh by the next plan;
// one whose GPUs are changed in place must be prepared again. Plans decide
// the same with or without it.
func Prepare(hosts []Host) {
	for i := range hosts {
		h := &hosts[i]
		h.units, h.listed = listUnits(h), nil
		if len(h.Snapshot.GPUs) > 0 {
			h.listed = &h.Snapshot.GPUs[0]
		}
	}
}

// prepared is h's units as Prepare listed them, if they still are its
// snapshot's.
func (h *Host) prepared() ([]unit, bool) {
	if h.units == nil {
		return nil, false
	}
	if len(h.Snapshot.GPUs) == 0 {
		return h.units, h.listed == nil
	}
	return h.units, h.listed == &h.Snapshot.GPUs[0]
}

// OtherJob is a job of another gssh queue, as its directory on the worker
// records it (spec.json): its placement there, its user, what it booked.
type OtherJob struct {
	Queue string // that queue's cluster id
	Job   job.Job
}

// otherBase is where the holder ids of other queues' jobs start: ids no
// job of this queue has (its ids count from 1), so what-ifs keyed by job
// id never take one for the other.
const otherBase = job.ID(1) << 62

// Holder is one gssh job holding a GPU or MIG device: enough to tell who
// would lose what if the job were preempted, and what it takes.
type Holder struct {
	// Job is the job's id; for a job of another queue (Queue set), an id
	// of otherBase and up, its own id being OtherID.
	Job job.ID
	// Array is the job's array place (nil: a job of its own, or of
	// another queue): Ref names it for people. Kept as the pointer, not
	// the name, so that booking a job formats nothing (a pass books
	// every job; only a reason shown reads the name).
	Array    *job.ArrayTask
	User     string
	Priority int
	Mem      uint64 // bytes booked on this GPU; 0 = the job holds it exclusively
	// Session is the job's session id on its worker (its session leader's
	// pid; 0 when not known yet): GPU processes in it are the job's.
	Session int
	// Planned: placed by this plan, not yet running: it uses nothing yet.
	Planned bool
	// Ends is when the job is expected to end (its start plus its
	// walltime, or the policy's backfill estimate): what reservations are
	// worked out from. Zero: unknown.
	Ends time.Time
	// CPUs and HostMem are what the job books of the host itself
	// (Spec.CPUs, Spec.HostMem: a CPU count, bytes of RAM); CPUIDs the
	// CPUs it is pinned to (Placement.CPUs). The same on each GPU it
	// holds: the host's ledger counts a job once.
	CPUs    int
	CPUIDs  []int
	HostMem uint64
	// Queue is the cluster id of the other gssh queue the job is of, and
	// OtherID its id there; "" for this queue's jobs.
	Queue   string
	OtherID job.ID
	// Attempt is the job's launch attempt (job.Job.Attempt): a process
	// carrying the job's GSSH_JOB_ID but another GSSH_ATTEMPT is an
	// earlier attempt's leftover, not the job's.
	Attempt int
}

// other reports whether h is a job of another gssh queue.
func (h Holder) other() bool { return h.Queue != "" }

// Booking is what gssh jobs hold on one GPU (or MIG device): each holder
// in the order it was booked (running jobs in the order Input.Running
// gives them, then the jobs this plan placed).
type Booking struct {
	Holders []Holder
}

// Jobs is the number of gssh jobs holding the GPU.
func (b Booking) Jobs() int { return len(b.Holders) }

// Mem is the memory, in bytes, shared jobs booked on the GPU.
func (b Booking) Mem() uint64 {
	var sum uint64
	for _, h := range b.Holders {
		sum += h.Mem
	}
	return sum
}

// Exclusive reports whether an exclusive gssh job holds the GPU.
func (b Booking) Exclusive() bool {
	return slices.ContainsFunc(b.Holders, func(h Holder) bool { return h.Mem == 0 })
}

// Key is the booking key of a whole GPU: its UUID, or "idx:N" when the
// driver reports none (corpus 020).
func Key(g gpuinfo.GPU) string {
	if g.UUID == "" {
		return "idx:" + strconv.Itoa(g.Index)
	}
	return g.UUID
}

// placementKeys are the booking keys of the GPUs of p: the ids given in
// CUDA_VISIBLE_DEVICES, except a GPU without UUID, which goes by index.
func placementKeys(p job.Placement) []string {
	keys := make([]string, len(p.GPUs))
	for i := range p.GPUs {
		keys[i] = placementKey(p, i)
	}
	return keys
}

// placementKey is the booking key of p's i-th GPU (see placementKeys).
func placementKey(p job.Placement, i int) string {
	id := p.GPUs[i]
	if i < len(p.Indexes) && isIndex(id, p.Indexes[i]) {
		return "idx:" + id
	}
	return id
}

// isIndex reports whether id is strconv.Itoa(index), without making that
// string.
func isIndex(id string, index int) bool {
	if index < 0 {
		return id == strconv.Itoa(index) // not met in practice
	}
	if id == "" || len(id) > 1 && id[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' || n > (1<<31)/10 {
			return false
		}
		n = n*10 + int(id[i]-'0')
	}
	return n == index
}

// Ref names h's job for people (job.Job.Ref: "16_2" for an array
// task).
func (h Holder) Ref() string { return job.RefOf(h.Job, h.Array) }

// HolderOf is the Holder record of job j.
func HolderOf(j job.Job) Holder { return holderOf(&j) }

// holderOf is HolderOf, without copying the job.
func holderOf(j *job.Job) Holder {
	return Holder{Job: j.ID, Array: j.Spec.Array, User: j.User, Priority: j.Spec.Priority, Mem: j.Spec.MemPerGPU, Session: j.Remote.PID,
		CPUs: j.Spec.CPUs, CPUIDs: j.Placement.CPUs, HostMem: j.Spec.HostMem, Attempt: j.Attempt}
}

// Bookings returns what active (launching or running) jobs hold, by host
// name and then GPU key, holders in the order of jobs. Other jobs are left
// out.
func Bookings(jobs []job.Job) map[string]map[string]Booking {
	out := map[string]map[string]Booking{}
	for i := range jobs {
		j := &jobs[i]
		if !j.State.Active() || j.Placement.Host == "" {
			continue
		}
		held := out[j.Placement.Host]
		if held == nil {
			held = map[string]Booking{}
			out[j.Placement.Host] = held
		}
		h := holderOf(j)
		for k := range j.Placement.GPUs {
			key := placementKey(j.Placement, k)
			b := held[key]
			b.Holders = append(b.Holders, h)
			held[key] = b
		}
	}
	return out
}

// node is a host during one plan: its facts and snapshot (never changed),
// its GPUs as units (listed once), and the ledger of who holds each unit,
// running jobs and the ones this plan placed. Taking a holder off the
// ledger gives its room back: what a reservation or a preemption needs.
type node struct {
	*Host
	units []unit
	// held is the ledger, by slot: unit u's booking is held[u.slot] (units
	// of one booking key share one), and after the units' slots come
	// those of the keys no unit of the host has (extra: a running job's
	// GPU the snapshot does not list). A slot's holders are its own: no
	// two slots share a backing array, so a booking appends in place.
	held  []Booking
	extra map[string]int // slot of each booking key no unit has; nil: none
	// spare is the last plan's ledger (a Planner's), then a buffer for
	// the next one.
	spare []Booking
	// jobs are the ledger's holders, each once (a job holding several
	// units is in each of their bookings), in the order booked.
	jobs []*Holder
	// counts is the ledger's scratch while it is made: holders per slot.
	counts  []int
	cluster string // Input.Cluster: whose GSSH_JOB_IDs are ours
	// now is the time the checks are made for: the plan's, or in a
	// reservation's what-if the time the room is found (a drain's window
	// is measured from it).
	now     time.Time
	scratch *scratch // the plan's buffers, shared by its nodes
	// gone are holders taken off in a what-if (a reservation: "once these
	// jobs end"): they hold nothing, and what their processes use is free.
	gone map[job.ID]bool
	// holds are the reservations on n's units, in the order the plan made
	// them: only a job that ends before a hold begins (or starts after
	// it ends) may use its units.
	holds []hold
	// cache holds the verdicts of feasible, by shape id (scratch.shape),
	// each of the ledger or reservation version it was worked out for: a
	// booking elsewhere leaves this host's answers as they were, so a
	// queue of thousands works each host out once per change, not once
	// per job. A Planner keeps them for its next plan while nothing they
	// read changes (was: the host's facts then; reservedLast: the last
	// plan ended with a reservation here).
	version      int
	cache        []hostVerdict
	nocache      bool // plan without memo: every answer worked out afresh
	was          facts
	reservedLast bool
	// listed is the units a Planner listed for the last plan, and of
	// which snapshot GPUs: while a host comes with the same Snapshot.GPUs
	// (a caller that probes anew gives new ones), they are listed once.
	listed listing
}

// listing is the units listed from one Snapshot.GPUs.
type listing struct {
	from  *gpuinfo.GPU // &Snapshot.GPUs[0]
	n     int          // len(Snapshot.GPUs)
	units []unit
}

// unitsOf is n's units: Prepare's, else the ones the Planner listed from
// the same snapshot GPUs for the last plan, else listed now (and kept).
func (n *node) unitsOf() []unit {
	if us, ok := n.Host.prepared(); ok {
		return us
	}
	gs := n.Snapshot.GPUs
	if len(gs) == 0 {
		return listUnits(n.Host)
	}
	if l := n.listed; l.from == &gs[0] && l.n == len(gs) {
		return l.units
	}
	n.listed = listing{from: &gs[0], n: len(gs), units: listUnits(n.Host)}
	return n.listed.units
}

// hold is a reservation of some of a node's units for a queued job that
// cannot start yet: from when it is expected to start until its expected
// end (from plus its walltime, or the backfill estimate).
type hold struct {
	units       map[string]bool // unit keys
	from, until time.Time
	job         job.ID
	ref         string // job.Job.Ref
}

// reserve records a reservation for job (named ref) on n.
func (n *node) reserve(r Reservation, j job.ID, ref string, until time.Time) {
	h := hold{units: map[string]bool{}, from: r.From, until: until, job: j, ref: ref}
	for _, k := range placementKeys(job.Placement{GPUs: r.GPUs, Indexes: r.Indexes}) {
		h.units[k] = true
	}
	n.holds = append(n.holds, h)
	n.changed()
}

// isReserved reports whether some hold on n takes unit key.
func (n *node) isReserved(key string) bool {
	for _, h := range n.holds {
		if h.units[key] {
			return true
		}
	}
	return false
}

// holdsFor reports whether some hold on n is job id's.
func (n *node) holdsFor(id job.ID) bool {
	for _, h := range n.holds {
		if h.job == id {
			return true
		}
	}
	return false
}

// hostVerdict is one answer of feasible, for the node's version at - 1
// (0: none).
type hostVerdict struct {
	units []*unit
	why   Reason
	at    int
}

// changed marks n's ledger or reservation changed: its cached verdicts
// are stale.
func (n *node) changed() { n.version++ }

// feasibleCached is feasible, through n's cache; id is w's shape id
// (scratch.shape).
func (n *node) feasibleCached(w *want, id int) ([]*unit, Reason) {
	if n.holdsFor(w.job) {
		return feasible(n, w) // the one job the reservation is for: not its shape's answer
	}
	if id < len(n.cache) && n.cache[id].at == n.version+1 {
		return n.cache[id].units, n.cache[id].why
	}
	us, why := feasible(n, w)
	if !n.nocache {
		if id >= len(n.cache) {
			old := len(n.cache)
			n.cache = slices.Grow(n.cache, id+1-old)[:id+1]
			clear(n.cache[old:])
		}
		n.cache[id] = hostVerdict{us, why, n.version + 1}
	}
	return us, why
}

// booking is what holds unit u of n now: the live holders (none of
// n.gone) and the ones gone. In a what-if both are the scratch's, good
// until the next call.
func (n *node) booking(u *unit) (live Booking, gone []Holder) {
	b := n.held[u.slot]
	if len(n.gone) == 0 {
		return b, nil
	}
	s := n.scratch
	lives, gones := s.live[:0], s.goneHolders[:0]
	for _, h := range b.Holders {
		if n.gone[h.Job] {
			gones = append(gones, h)
		} else {
			lives = append(lives, h)
		}
	}
	s.live, s.goneHolders = lives, gones
	if len(lives) > 0 {
		live.Holders = lives
	}
	return live, gones
}

// whatIf returns a copy of n in which the holders in gone hold nothing:
// the ledger and snapshot are shared, never changed.
func (n *node) whatIf(gone map[job.ID]bool) *node { return n.whatIfIn(new(node), gone) }

// whatIfIn is whatIf, made in c.
func (n *node) whatIfIn(c *node, gone map[job.ID]bool) *node {
	*c = *n
	c.gone, c.holds, c.cache = gone, nil, nil
	return c
}

// book records a job just placed at p on n.
func (n *node) book(p job.Placement, who Holder) {
	who.Planned, who.CPUIDs = true, p.CPUs
	for k := range p.GPUs {
		s := n.slotOf(&p, k)
		n.held[s].Holders = append(n.held[s].Holders, who)
		if k == 0 {
			hs := n.held[s].Holders
			n.jobs = append(n.jobs, &hs[len(hs)-1]) // never written again: a later booking appends past it, or moves the holders out
		}
	}
	n.changed()
}

// slotOf is the slot in n.held of the booking key of p's k-th GPU
// (placementKey); a key no unit of n has gets a slot of its own.
func (n *node) slotOf(p *job.Placement, k int) int {
	id := p.GPUs[k]
	byIndex := k < len(p.Indexes) && isIndex(id, p.Indexes[k])
	if k < len(p.Indexes) { // a whole GPU is most often at its index in the list
		if i := p.Indexes[k]; i >= 0 && i < len(n.units) && keyIs(n.units[i].key, id, byIndex) {
			return n.units[i].slot
		}
	}
	for i := range n.units {
		if keyIs(n.units[i].key, id, byIndex) {
			return n.units[i].slot
		}
	}
	key := placementKey(*p, k)
	if s, ok := n.extra[key]; ok {
		return s
	}
	if n.extra == nil {
		n.extra = map[string]int{}
	}
	s := len(n.held)
	n.extra[key] = s
	n.held = append(n.held, Booking{})
	n.counts = append(n.counts, 0)
	return s
}

// keyIs reports whether key is the booking key of a GPU listed as id:
// id itself, or "idx:"+id when byIndex (placementKey), without making
// that string.
func keyIs(key, id string, byIndex bool) bool {
	if byIndex {
		return len(key) == len(id)+4 && key[:4] == "idx:" && key[4:] == id
	}
	return key == id
}

// usedBy is the GPU memory, in bytes, that holder h's processes use on u
// now: those carrying its GSSH_JOB_ID (and this state's GSSH_CLUSTER_ID,
// when they say one), or in its session.
func (u *unit) usedBy(h Holder, cluster string) uint64 {
	if h.Planned {
		return 0
	}
	var sum uint64
	for _, p := range u.own {
		if owns(p, h, cluster) && p.UsedBytes != nil {
			sum += *p.UsedBytes
		}
	}
	return sum
}

// owns reports whether process p is holder h's: it carries h's
// GSSH_JOB_ID (and this state's GSSH_CLUSTER_ID, when it says one, and
// h's GSSH_ATTEMPT, when it says one: an earlier attempt's leftover is
// not the job's, and its memory is no part of the job's booking), or
// runs in h's session.
func owns(p gpuinfo.Proc, h Holder, cluster string) bool {
	if h.Planned {
		return false
	}
	if h.other() {
		return p.JobID == strconv.FormatUint(uint64(h.OtherID), 10) && p.ClusterID == h.Queue ||
			h.Session > 0 && p.SessionID != nil && *p.SessionID == h.Session
	}
	return p.JobID == strconv.FormatUint(uint64(h.Job), 10) && (p.ClusterID == "" || cluster == "" || p.ClusterID == cluster) &&
		(p.Attempt == "" || p.Attempt == strconv.Itoa(h.Attempt)) ||
		h.Session > 0 && p.SessionID != nil && *p.SessionID == h.Session
}

// Usable is the memory, in bytes, gssh may book on a GPU of total bytes
// on a host that keeps reservePct percent back.
func Usable(total uint64, reservePct float64) uint64 {
	switch {
	case reservePct <= 0:
		return total
	case reservePct >= 100:
		return 0
	}
	return uint64(float64(total) * (1 - reservePct/100))
}

// unit is what one job's GPU slot can be: a whole GPU, or a MIG device.
type unit struct {
	key      string // booking key
	slot     int    // the ledger's slot (node.held) of key: the first unit's of the host with it
	id       string // for CUDA_VISIBLE_DEVICES: a UUID, or the index when there is none
	index    int    // the (parent) GPU's index
	mig      int    // the MIG device's index; -1 for a whole GPU
	profile  string // the MIG device's profile ("1g.10gb"); "" for a whole GPU
	gpu      *gpuinfo.GPU
	total    *uint64 // bytes; nil when unknown
	used     *uint64
	free     *uint64
	memState string         // why memory is unknown
	procs    int            // processes that may be on the unit (for MIG: its own and those not attributed to one)
	own      []gpuinfo.Proc // the processes known to be on the unit (for MIG: those NVML attributed to it)
	broken   string         // why the unit cannot take jobs as listed ("MIG device without a UUID")
	// invisible is the memory in use, in bytes, that no listed process
	// accounts for (gpuinfo.Unaccounted): held by a process the probe
	// cannot see (a container, another PID namespace); 0 when none or
	// when that cannot be told.
	invisible uint64
}

// listUnits lists a host's GPUs, or their MIG devices where they have
// some, in index order.
func listUnits(h *Host) []unit {
	gpus := make([]*gpuinfo.GPU, len(h.Snapshot.GPUs))
	for i := range h.Snapshot.GPUs {
		gpus[i] = &h.Snapshot.GPUs[i]
	}
	byIndex := func(a, b *gpuinfo.GPU) int { return cmp.Compare(a.Index, b.Index) }
	if !slices.IsSortedFunc(gpus, byIndex) { // as a probe lists them, they are
		slices.SortStableFunc(gpus, byIndex)
	}
	size := len(gpus)
	for _, g := range gpus {
		size += len(g.MIG)
	}
	out := make([]unit, 0, size)
	for _, g := range gpus {
		if len(g.MIG) == 0 {
			u := unit{key: Key(*g), id: g.UUID, index: g.Index, mig: -1, gpu: g,
				total: g.MemTotal, used: g.MemUsed, free: g.MemFree, memState: g.MemoryState, procs: len(g.Procs), own: g.Procs,
				invisible: g.Invisible()}
			if u.id == "" {
				u.id = strconv.Itoa(g.Index)
			}
			if g.MIGMode == "Enabled" {
				u.broken = "MIG enabled but no MIG device listed"
			}
			out = append(out, u)
			continue
		}
		migs := make([]*gpuinfo.MIG, len(g.MIG))
		for i := range g.MIG {
			migs[i] = &g.MIG[i]
		}
		slices.SortStableFunc(migs, func(a, b *gpuinfo.MIG) int { return cmp.Compare(a.Index, b.Index) })
		for _, m := range migs {
			u := unit{key: m.UUID, id: m.UUID, index: g.Index, mig: m.Index, profile: m.Profile, gpu: g,
				total: m.MemTotal, used: m.MemUsed, free: m.MemFree, memState: m.MemoryState}
			if m.UUID == "" {
				u.broken = "MIG device without a UUID"
			}
			for _, p := range g.Procs {
				if p.GPUUUID == m.UUID || !slices.ContainsFunc(g.MIG, func(o gpuinfo.MIG) bool { return o.UUID != "" && o.UUID == p.GPUUUID }) {
					u.procs++
				}
				if m.UUID != "" && p.GPUUUID == m.UUID {
					u.own = append(u.own, p)
				}
			}
			if u.procs == len(u.own) { // every process that may be here is known to be
				u.invisible = gpuinfo.Unaccounted(m.MemTotal, m.MemUsed, g.ProcsKnown, u.own)
			}
			out = append(out, u)
		}
	}
	setSlots(out)
	return out
}

// setSlots gives each unit of us its ledger slot: the index of the first
// unit with its key.
func setSlots(us []unit) {
	var first map[string]int // for long lists only
	if len(us) > 16 {
		first = make(map[string]int, len(us))
	}
	for i := range us {
		us[i].slot = i
		switch {
		case first != nil:
			if s, ok := first[us[i].key]; ok {
				us[i].slot = s
			} else {
				first[us[i].key] = i
			}
		default:
			for k := range i {
				if us[k].key == us[i].key {
					us[i].slot = k
					break
				}
			}
		}
	}
}
