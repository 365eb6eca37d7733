package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/fleet"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// ReapSchema names the document `gssh reap --json` prints.
const ReapSchema = "gssh.reap/v1"

// ReapRequest asks for gssh reap.
type ReapRequest struct {
	Hosts  []string // only these hosts (all when empty)
	DryRun bool     // say what would be killed, kill nothing
}

// ReapDoc is what gssh reap found and did (`gssh reap --json`).
type ReapDoc struct {
	Schema string        `json:"schema"` // ReapSchema
	Time   time.Time     `json:"time"`
	DryRun bool          `json:"dry_run"`
	Hosts  []ReapHostDoc `json:"hosts"` // in inventory order
	// JobsError says why some processes could not be matched to jobs
	// (the state file could not be read whole); "" otherwise.
	JobsError string `json:"jobs_error,omitempty"`
}

// ReapHostDoc is one host of ReapDoc.
type ReapHostDoc struct {
	Name   string          `json:"name"`
	State  probe.HostState `json:"state"`
	Error  string          `json:"error,omitempty"` // why it was not probed, or why its reap failed
	Source string          `json:"source,omitempty"`
	// ReapForeign is the inventory's reap_foreign: "report" or "kill".
	ReapForeign string         `json:"reap_foreign"`
	Processes   []ProcessDoc   `json:"processes"` // every GPU process found, running gssh jobs' included
	Invisible   []InvisibleDoc `json:"invisible_memory"`
}

// ProcessDoc is one GPU process and whose it is (package reap), in
// gssh reap --json and gssh gpus --json (gpu_processes).
type ProcessDoc struct {
	GPU       int       `json:"gpu_index"`
	GPUID     string    `json:"gpu_id"` // the UUID of its GPU or MIG device, or the index
	PID       int       `json:"pid"`
	User      string    `json:"user,omitempty"`
	Name      string    `json:"name"`
	UsedBytes *uint64   `json:"used_memory_bytes"`
	Kind      reap.Kind `json:"kind"` // job, orphan, other_queue, foreign, unattributed
	// Job, Attempt and JobState: the gssh job it is of (for other_queue,
	// its id in the queue Queue names) and the array task it is (nil for
	// a job of its own or of another queue), the attempt it is of, the
	// job's state now.
	Job job.ID `json:"job,omitempty"`
	*TaskRef
	Attempt  int       `json:"attempt,omitempty"`
	JobState job.State `json:"job_state,omitempty"`
	Queue    string    `json:"queue,omitempty"`
	Why      string    `json:"why"`
	// Action is what gssh reap did or would do, in words ("killed",
	// "would kill", "not killed: ..."); "" where nothing is to be done
	// (a running job's own process), and always "" in gssh gpus.
	Action string `json:"action,omitempty"`
	// Outcome is the worker's word for what became of a process gssh
	// reap meant to kill (reap.Outcome); "" otherwise.
	Outcome reap.Outcome `json:"outcome,omitempty"`
}

// Ref names the process's job as people and commands do ("16_2" for a
// task).
func (p ProcessDoc) Ref() string { return p.TaskRef.of(p.Job) }

// InvisibleDoc is GPU memory held by a process no probe can see.
type InvisibleDoc struct {
	GPU   int    `json:"gpu_index"`
	GPUID string `json:"gpu_id"`
	Bytes uint64 `json:"bytes"`
}

// Reap implements Service: it probes the hosts, tells whose each GPU
// process is and, unless r.DryRun, kills the orphans of gssh jobs and,
// on hosts with reap_foreign: kill, the foreign processes (see
// control.Controller.Reap). A lab member may only ask for a dry run (the
// orphans are the pass account's). The error is a *PartialError when
// some host could not be probed or reaped: the document still lists
// every host, the others reaped.
func (l *Local) Reap(ctx context.Context, r ReapRequest) (ReapDoc, error) {
	if l.member() && !r.DryRun {
		return ReapDoc{}, l.notPassReaper()
	}
	if l.guest() && !r.DryRun {
		return ReapDoc{}, fmt.Errorf("gssh reap kills processes on the workers of %s's queue, which only %s does; gssh reap --dry-run shows what it would kill", l.opt.Owner, l.opt.Owner)
	}
	f, err := l.hosts()
	if err != nil {
		return ReapDoc{}, err
	}
	hosts, err := f.Select(r.Hosts, nil)
	if err != nil {
		return ReapDoc{}, err
	}
	reports := f.Probe(ctx, hosts, fleet.ProbeOptions{Timeout: l.opt.ProbeTimeout})
	if err := interrupted(ctx); err != nil {
		return ReapDoc{}, err
	}
	// The jobs are read after the probe: every process it saw was
	// launched by an attempt the state knows of.
	st, none, serr := l.readStore()
	switch {
	case serr != nil && !r.DryRun:
		return ReapDoc{}, serr // nothing is killed on a state that cannot be read
	case serr != nil || none:
		st = nil
	}
	found, jerr := l.classify(ctx, f, st, reports, r.DryRun)
	if err := interrupted(ctx); err != nil {
		return ReapDoc{}, err
	}
	jerr = errors.Join(serr, jerr)
	doc := ReapDoc{Schema: ReapSchema, Time: l.opt.Now().UTC().Truncate(time.Millisecond), DryRun: r.DryRun, Hosts: []ReapHostDoc{}}
	if jerr != nil {
		doc.JobsError = jerr.Error()
	}
	failed := 0
	for i, rep := range reports {
		h := found[i]
		d := ReapHostDoc{Name: rep.Host.Name, State: rep.Snapshot.State, Error: rep.Snapshot.Error, Source: rep.Snapshot.Source,
			ReapForeign: "report", Processes: processDocs(h, r.DryRun, true), Invisible: invisibleDocs(h.Found)}
		if rep.Host.ReapForeign {
			d.ReapForeign = "kill"
		}
		if !rep.Probed() {
			failed++
		} else if h.Err != nil {
			d.Error = h.Err.Error()
			failed++
		}
		doc.Hosts = append(doc.Hosts, d)
	}
	if errors.Is(serr, state.ErrDamaged) {
		return doc, serr // what was found is shown, and the damage is the command's error (exit 3)
	}
	if failed > 0 {
		return doc, &PartialError{Failed: failed, Total: len(reports)}
	}
	return doc, nil
}

// classify tells whose the GPU processes of reports are, one
// control.HostReap per report in its order, and kills what is to be
// killed unless dryRun. Without a state (st nil: no file yet, or one
// that cannot be read) there are no jobs, so no orphans: every process
// is foreign, unattributed or another queue's.
func (l *Local) classify(ctx context.Context, f *fleet.Fleet, st *state.Bolt, reports []fleet.Report, dryRun bool) ([]control.HostReap, error) {
	s := memStores(state.NewMem())
	if st != nil {
		s = fileStores(st)
	}
	ctl, err := l.controller(f, s, reports)
	if err != nil {
		return nil, err
	}
	hosts := slices.DeleteFunc(fleet.SchedHosts(f.Inventory(), reports), func(h sched.Host) bool {
		return !slices.ContainsFunc(reports, func(r fleet.Report) bool { return r.Host.Name == h.Name })
	})
	found, err := ctl.Reap(ctx, hosts, dryRun)
	byName := map[string]control.HostReap{}
	for _, h := range found {
		byName[h.Host.Name] = h
	}
	out := make([]control.HostReap, len(reports))
	for i, r := range reports {
		out[i] = byName[r.Host.Name]
	}
	return out, err
}

// processDocs lists h's processes; with actions, what gssh reap did or
// would do to each (dryRun: would).
func processDocs(h control.HostReap, dryRun, actions bool) []ProcessDoc {
	out := []ProcessDoc{}
	for _, f := range h.Found.Procs {
		d := ProcessDoc{GPU: f.GPU, GPUID: f.GPUID, PID: f.Proc.PID, User: f.Proc.User, Name: f.Proc.Name, UsedBytes: f.Proc.UsedBytes,
			Kind: f.Kind, Job: f.Job, TaskRef: taskRef(f.Array), Attempt: f.Attempt, JobState: f.State, Queue: f.Queue, Why: f.Why}
		if actions {
			d.Action, d.Outcome = action(h, f, dryRun)
		}
		out = append(out, d)
	}
	return out
}

// action is what gssh reap did (or would do) to the process of f.
func action(h control.HostReap, f reap.Finding, dryRun bool) (string, reap.Outcome) {
	i := slices.IndexFunc(h.Reaped, func(x control.Reaped) bool { return x.Finding.Proc.PID == f.Proc.PID })
	if i < 0 {
		switch f.Kind {
		case reap.KindJob:
			return "", ""
		case reap.KindForeign:
			return "reported (reap_foreign: report)", ""
		case reap.KindOtherQueue:
			return "left to its own queue", ""
		case reap.KindOrphan:
			return "not killed: its start time could not be read, so it cannot be told from a process given its pid since", ""
		}
		return "not killed (whose it is cannot be told)", ""
	}
	o := h.Reaped[i].Outcome
	switch {
	case dryRun:
		return "would kill", ""
	case h.Err != nil:
		return "not killed: " + h.Err.Error(), ""
	}
	switch o {
	case reap.Terminated:
		return "killed (ended on SIGTERM)", o
	case reap.Killed:
		return "killed (SIGKILL after the grace)", o
	case reap.Gone:
		return "gone before the kill (it exited, or it is not the process the probe saw)", o
	case reap.Denied:
		return "not killed: not permitted (the login may not signal another user's process)", o
	case reap.Survived:
		return "not killed: still there after SIGKILL (stuck in the kernel or the driver?)", o
	}
	return "not killed: the worker did not answer for it", o
}

// ReapedDoc is one process a pass meant to kill, on its host.
type ReapedDoc struct {
	Host string `json:"host"`
	ProcessDoc
}

// reapedDocs are a pass's reaped processes, with what became of each.
func reapedDocs(xs []control.Reaped) []ReapedDoc {
	var out []ReapedDoc
	for _, x := range xs {
		h := control.HostReap{Found: reap.Host{Procs: []reap.Finding{x.Finding}}, Reaped: []control.Reaped{x}}
		out = append(out, ReapedDoc{Host: x.Host, ProcessDoc: processDocs(h, false, true)[0]})
	}
	return out
}

func invisibleDocs(h reap.Host) []InvisibleDoc {
	out := []InvisibleDoc{}
	for _, v := range h.Invisible {
		out = append(out, InvisibleDoc{GPU: v.GPU, GPUID: v.GPUID, Bytes: v.Bytes})
	}
	return out
}
