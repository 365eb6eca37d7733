package service

import (
	"slices"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/health"
	"github.com/gssh/gssh/inventory"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/sched"
)

// Schema names of the JSON documents (docs/json.md describes each).
// Within one version fields are only ever added; a change that could
// break a reader bumps the version. v2 of all three: durations in
// seconds in fields ending _s (probe_s; rtt_s, connect_s; a job spec's
// timeout_s, signal_grace_s, a cancel request's grace_s).
const (
	GPUsSchema  = "gssh.gpus/v2"  // gssh gpus --json
	HostsSchema = "gssh.hosts/v2" // gssh hosts --json
	JobsSchema  = "gssh.jobs/v2"  // gssh ps --json
)

// GPUsSchemaV1 is the gpus document before durations were in seconds
// (probe_ms): gssh sim --lab reads a saved one still (it reads nothing
// that changed).
const GPUsSchemaV1 = "gssh.gpus/v1"

// GPUsDoc is the document `gssh gpus --json` prints.
type GPUsDoc struct {
	Schema string     `json:"schema"` // GPUsSchema
	Time   time.Time  `json:"time"`   // when the oldest host snapshot was taken: a probe's end, or a GPU stream's frame (RFC 3339, UTC, milliseconds)
	Hosts  []HostGPUs `json:"hosts"`  // in inventory order
	// JobsError says why the gssh jobs are missing (the state file could
	// not be read); "" when they are shown.
	JobsError string `json:"jobs_error,omitempty"`
}

// HostGPUs is one host of GPUsDoc: its probe.Snapshot (name, state,
// error, source, driver, warnings, GPUs with memory in bytes, their
// processes) and where it was reached.
type HostGPUs struct {
	probe.Snapshot
	Address string   `json:"address"` // "local", or user@host:port [via jumps]
	Labels  []string `json:"labels"`
	DrainDoc
	ProbeS float64 `json:"probe_s"` // wall time of this host's probe, connect included, in seconds (µs resolution)
	// Jobs are the gssh jobs holding GPUs of the host, as the state file
	// records them (launching or running), one entry per GPU held.
	Jobs []GPUJob `json:"gssh_jobs"`
	// Recovering are the GPUs (by index) that read
	// unhealthy in a pass's probe and have not read healthy in
	// health.HealthyProbes probes in a row since: no job is placed on
	// them. From the state file; absent when none.
	Recovering map[string]health.GPU `json:"recovering,omitempty"`
	// Processes are the host's GPU processes and whose each is (a gssh
	// job's, an orphan, another queue's, foreign, unattributed: package
	// reap), by GPU then pid; Invisible the GPU memory held by processes
	// no probe can see. Empty where the GPUs' processes were not read.
	Processes []ProcessDoc   `json:"gpu_processes"`
	Invisible []InvisibleDoc `json:"invisible_memory"`
}

// DrainDoc says whether a host takes new jobs, and who keeps them off.
type DrainDoc struct {
	// Drain: the host takes no new jobs now (the inventory's drain: true,
	// or a drain by gssh drain in force).
	Drain bool `json:"drain"`
	// Drained is the host's drain by gssh drain, from the state file: by
	// whom, when (at), from when it takes no new jobs (from: later than
	// at for a maintenance window ahead, when it takes only jobs that end
	// by then) and why; absent when none.
	Drained *sched.Drain `json:"drained,omitempty"`
	// InventoryDrain is where the inventory drains the host ("FILE:LINE"
	// of its drain: true); absent when it does not.
	InventoryDrain string `json:"inventory_drain,omitempty"`
}

// drainDoc is h's DrainDoc at now, d being its drain by gssh drain (nil:
// none).
func drainDoc(inv *inventory.Inventory, h inventory.Host, d *sched.Drain, now time.Time) DrainDoc {
	return DrainDoc{Drain: h.Drain || d != nil && d.InForce(now), Drained: d, InventoryDrain: inventoryDrain(inv, h)}
}

// GPUJob is one gssh job holding one GPU (or MIG device).
type GPUJob struct {
	Index int    `json:"gpu_index"` // the GPU's index, as nvidia-smi numbers it
	ID    string `json:"gpu_id"`    // the UUID (GPU or MIG) given in CUDA_VISIBLE_DEVICES, or the index
	Job   job.ID `json:"job"`
	*TaskRef
	User  string    `json:"user"`
	State job.State `json:"state"`
	// BookedBytes is the GPU memory the job booked (--mem); 0 when it
	// holds the GPU exclusively.
	BookedBytes uint64 `json:"booked_bytes"`
}

// Ref names the job as people and commands do ("16_2" for a task).
func (g GPUJob) Ref() string { return g.TaskRef.of(g.Job) }

// TaskRef is, in a document, the array task a job is: the array's id
// and the task's index, "array" and "task" as in an event; the job is
// ARRAY_TASK ("16_2"). Nil (absent) for a job of its own.
type TaskRef struct {
	Array job.ID `json:"array"`
	Task  int    `json:"task"`
}

// taskRef is the TaskRef of array place a (nil for nil).
func taskRef(a *job.ArrayTask) *TaskRef {
	if a == nil {
		return nil
	}
	return &TaskRef{Array: a.Job, Task: a.Task}
}

// of is job.RefOf of job id with array place t.
func (t *TaskRef) of(id job.ID) string {
	if t == nil {
		return job.RefOf(id, nil)
	}
	return job.RefOf(id, &job.ArrayTask{Job: t.Array, Task: t.Task})
}

// HostsDoc is the document `gssh hosts --json` prints.
type HostsDoc struct {
	Schema string     `json:"schema"` // HostsSchema
	Hosts  []HostInfo `json:"hosts"`  // in inventory order
}

// HostInfo is one host of HostsDoc.
type HostInfo struct {
	Name    string   `json:"name"`
	Address string   `json:"address"` // "local", or user@host:port [via jumps]
	Labels  []string `json:"labels"`
	DrainDoc
	State     string  `json:"state"`           // probe.HostState
	Error     string  `json:"error,omitempty"` // why, when not ok
	Source    string  `json:"source,omitempty"`
	SourceWhy string  `json:"source_reason,omitempty"`
	Driver    string  `json:"driver_version,omitempty"`
	GPUs      int     `json:"gpu_count"`
	RTTS      float64 `json:"rtt_s"`     // one SSH request round trip, in seconds (µs resolution); 0 for local
	ConnectS  float64 `json:"connect_s"` // TCP + SSH handshake + auth, in seconds (µs resolution); 0 for local or reused
	// Record is what the queue's passes learned of the host over time
	// (the state file's host record: failed contacts in a row, since
	// when, the last error, down since, attempts left to kill); nil when
	// the passes never failed to reach it (or no state file exists).
	Record *health.Host `json:"record,omitempty"`

	// MissingFields are the nvidia-smi query fields the host's driver
	// does not know (probe.Snapshot.MissingFields): those facts are unknown.
	MissingFields []string `json:"missing_fields,omitempty"`
}

// JobsDoc is the document `gssh ps --json` prints: job records as
// `gssh show --json` prints them one by one.
type JobsDoc struct {
	Schema string    `json:"schema"` // JobsSchema
	Jobs   []job.Job `json:"jobs"`   // oldest first
}

// SubmitDoc is what `gssh submit --json` prints: where the job runs or why
// it waits (a dry run: where it would go).
type SubmitDoc struct {
	ID       job.ID    `json:"id,omitempty"`        // not on a dry run
	State    job.State `json:"state,omitempty"`     // not on a dry run
	DryRun   bool      `json:"dry_run,omitempty"`   //
	WouldRun *bool     `json:"would_run,omitempty"` // dry run only
	Host     string    `json:"host"`
	GPUs     []string  `json:"gpus"`           // UUIDs as in CUDA_VISIBLE_DEVICES
	Indexes  []int     `json:"gpu_indexes"`    // as nvidia-smi numbers them
	Reason   string    `json:"reason"`         // why queued, or ""
	Held     bool      `json:"held,omitempty"` // queued held (--hold): never placed until gssh release
	// Explain is a dry run's whole answer: why not elsewhere, the job's
	// place in the queue, its reservation, its expected start.
	Explain *Explanation `json:"explain,omitempty"`
}

// Doc is r as SubmitDoc.
func (r SubmitResult) Doc() SubmitDoc {
	p, reason := r.Job.Placement, r.Job.Reason
	d := SubmitDoc{ID: r.Job.ID, State: r.Job.State, Held: r.Job.Hold != nil}
	if r.DryRun {
		would := r.WouldRun
		d = SubmitDoc{DryRun: true, WouldRun: &would, Explain: r.Explanation}
		p, reason = r.Placement, r.Reason
	}
	d.Host, d.GPUs, d.Indexes, d.Reason = p.Host, nonNil(p.GPUs), nonNil(p.Indexes), reason
	return d
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// gpusDoc builds GPUsDoc from reports, the active jobs and whose the
// processes are (found, one per report; nil: none known): lists are []
// rather than null.
func gpusDoc(now time.Time, reports []fleet.Report, active []job.Job, found []control.HostReap) GPUsDoc {
	held := map[string][]GPUJob{}
	for _, j := range active {
		if !j.State.Active() {
			continue
		}
		for i, id := range j.Placement.GPUs {
			g := GPUJob{ID: id, Job: j.ID, TaskRef: taskRef(j.Spec.Array), User: j.User, State: j.State, BookedBytes: j.Spec.MemPerGPU}
			if i < len(j.Placement.Indexes) {
				g.Index = j.Placement.Indexes[i]
			}
			held[j.Placement.Host] = append(held[j.Placement.Host], g)
		}
	}
	doc := GPUsDoc{Schema: GPUsSchema, Time: now.UTC().Truncate(time.Millisecond), Hosts: []HostGPUs{}}
	for i, r := range reports {
		var h control.HostReap
		if i < len(found) {
			h = found[i]
		}
		s := r.Snapshot
		s.Warnings = nonNil(s.Warnings)
		s.GPUs = slices.Clone(nonNil(s.GPUs))
		for i := range s.GPUs {
			s.GPUs[i].Procs = nonNil(s.GPUs[i].Procs)
		}
		doc.Hosts = append(doc.Hosts, HostGPUs{Snapshot: s, Address: r.Address, Labels: nonNil(r.Host.Labels), DrainDoc: DrainDoc{Drain: r.Host.Drain},
			ProbeS: seconds(r.Took), Jobs: nonNil(held[s.Host]), Processes: processDocs(h, true, false), Invisible: invisibleDocs(h.Found)})
	}
	return doc
}

// hostsDoc builds HostsDoc from reports.
func hostsDoc(reports []fleet.Report) HostsDoc {
	doc := HostsDoc{Schema: HostsSchema, Hosts: []HostInfo{}}
	for _, r := range reports {
		s := r.Snapshot
		doc.Hosts = append(doc.Hosts, HostInfo{Name: r.Host.Name, Address: r.Address, Labels: nonNil(r.Host.Labels), DrainDoc: DrainDoc{Drain: r.Host.Drain},
			State: string(s.State), Error: s.Error, Source: s.Source, SourceWhy: s.SourceWhy, Driver: s.Driver,
			MissingFields: s.MissingFields, GPUs: len(s.GPUs), RTTS: seconds(r.RTT), ConnectS: seconds(r.Connect)})
	}
	return doc
}

// seconds is d in seconds, to the microsecond: a measured time's JSON.
func seconds(d time.Duration) float64 { return job.SecondsTo(d, time.Microsecond) }

// ShowDoc is gssh show --json and the HTTP API's GET /v1/jobs/{id}: the
// job's record and, for a queued job, what the planner makes of it now.
type ShowDoc struct {
	job.Job
	Queue *Explanation `json:"queue,omitempty"`
}
