package sched

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Gates: what keeps a queued job from being placed at all, before any
// host is looked at. A gated job is neither placed, nor holds up the
// queue, nor gets a reservation.
const (
	CodeHeld       Code = "held"        // gssh hold / submit --hold: never placed until released
	CodeDependency Code = "dependency"  // waits for jobs to end (--after, --after-any, --after-notok)
	CodeBegin      Code = "begin"       // --begin is later than now
	CodeArrayLimit Code = "array_limit" // its array runs as many tasks as --array %N allows
)

// Cancel is a queued job the plan ends as cancelled: a dependency of it
// can never be met.
type Cancel struct {
	Job    job.ID `json:"job"`
	Reason Reason `json:"reason"`
}

// CodeDependencyNever is the code of a Cancel: a dependency ended as its
// kind does not allow ("job 12 failed (exit status 3); --after needs it to
// succeed"), or is not in the state at all.
const CodeDependencyNever Code = "dependency_never"

// jobStates finds the state of any job a plan's queue may depend on: the
// queue, the running jobs, and Input.Deps. Built on first use: most plans
// have no dependency.
type jobStates struct {
	in   *Input
	byID map[job.ID]*job.Job
	// tasks counts, per job array, its tasks that hold GPUs: running, or
	// started by this plan (built on first use).
	tasks map[job.ID]int
	// arrays are the verdicts on whole-array dependencies (a task's end
	// changes them only between plans).
	arrays map[arrayKey]arrayVerdict
	// loads is what each user's jobs hold, for the caps: running, or
	// started by this plan (built on first use).
	loads map[string]Load
	// gone are the running jobs a forecast took to have ended: they hold
	// nothing.
	gone map[job.ID]bool
}

// userLoad is what user's jobs hold.
func (s *jobStates) userLoad(user string) Load {
	if s.loads == nil {
		s.loads = loads(s.in.Running, s.gone)
	}
	return s.loads[user]
}

// arrayTasks is how many tasks of array id hold GPUs.
func (s *jobStates) arrayTasks(id job.ID) int {
	if s.tasks == nil {
		s.tasks = map[job.ID]int{}
		for _, r := range s.in.Running {
			if a := r.Spec.Array; a != nil && r.State.Active() {
				s.tasks[a.Job]++
			}
		}
	}
	return s.tasks[id]
}

// arrayDependency says where dependency d on a whole array stands: how
// many of its tasks have yet to end, or why it can never be met (a task
// ended as d.Kind does not allow, or is not in the state). Each array is
// looked at once per plan, however many jobs wait for it.
func (s *jobStates) arrayDependency(d job.Dependency) (left int, doom Reason) {
	key := arrayKey{d.Job, d.Tasks, d.Kind}
	if v, ok := s.arrays[key]; ok {
		return v.left, v.doom
	}
	var v arrayVerdict
	for k := range d.Tasks {
		id := d.Job + job.ID(k)
		t, ok := s.get(id)
		if !ok {
			v.doom = because(CodeDependencyNever, fmt.Sprintf("job %d of array %d is not in the state; %s needs every task to %s", id, d.Job, DependencyFlag(d.Kind), DependencyNeed(d.Kind)))
			break
		}
		met, never := (job.Dependency{Kind: d.Kind, Job: id}).Met(t.State)
		if never {
			v.doom = because(CodeDependencyNever, fmt.Sprintf("job %s %s; %s needs every task of array %d to %s", t.Ref(), ended(t), DependencyFlag(d.Kind), d.Job, DependencyNeed(d.Kind)))
			break
		}
		if !met {
			v.left++
		}
	}
	if s.arrays == nil {
		s.arrays = map[arrayKey]arrayVerdict{}
	}
	s.arrays[key] = v
	return v.left, v.doom
}

type arrayKey struct {
	id    job.ID
	tasks int
	kind  job.DepKind
}

type arrayVerdict struct {
	left int
	doom Reason
}

// started counts job j, just placed on p: for its array, if it is a
// task of one, and for its user's caps.
func (s *jobStates) started(j *job.Job, p job.Placement) {
	if a := j.Spec.Array; a != nil && a.Limit > 0 {
		s.arrayTasks(a.Job) // counts the running ones first
		s.tasks[a.Job]++
	}
	if s.loads != nil || s.in.Policy.hasCaps() {
		l := s.userLoad(j.User) // counts the running ones first
		l.add(p)
		s.loads[j.User] = l
	}
}

func (s *jobStates) get(id job.ID) (*job.Job, bool) {
	if s.byID == nil {
		s.byID = make(map[job.ID]*job.Job, len(s.in.Queue)+len(s.in.Running)+len(s.in.Deps))
		for i := range s.in.Running {
			s.byID[s.in.Running[i].ID] = &s.in.Running[i]
		}
		for i := range s.in.Queue {
			s.byID[s.in.Queue[i].ID] = &s.in.Queue[i]
		}
		for id, j := range s.in.Deps { // last: a forecast ends running jobs here
			s.byID[id] = &j
		}
	}
	j, ok := s.byID[id]
	return j, ok
}

// gate says why queued job j may not be placed now (a zero Reason: it
// may), and doom why it never can be (its dependency can never be met:
// the plan cancels it). A doomed job is doomed whatever else holds it;
// then a hold, then unmet dependencies, then --begin, then its array's
// limit, then its user's caps.
func gate(j *job.Job, now time.Time, states *jobStates, terse bool) (why, doom Reason) {
	var waiting [3][]job.ID    // by kind: AfterOK, AfterAny, AfterNotOK
	var tasks [3][]string      // the same, for array tasks, by name: "16_2"
	var arraysLeft [3][]string // the same, for whole arrays: "array 9 (5 of 8 tasks left)"
	for _, d := range j.Spec.After {
		if d.Tasks > 0 {
			left, doom := states.arrayDependency(d)
			switch {
			case !doom.ok():
				return Reason{}, doom
			case left > 0:
				k := kindIndex(d.Kind)
				arraysLeft[k] = append(arraysLeft[k], fmt.Sprintf("array %d (%d of %d tasks left)", d.Job, left, d.Tasks))
			}
			continue
		}
		dep, ok := states.get(d.Job)
		if !ok {
			return Reason{}, because(CodeDependencyNever, fmt.Sprintf("job %d is not in the state; %s needs it to %s", d.Job, DependencyFlag(d.Kind), DependencyNeed(d.Kind)))
		}
		if r, never := DependencyNever(d, *dep); never {
			return Reason{}, r
		}
		switch met, _ := d.Met(dep.State); {
		case !met && dep.Spec.Array != nil:
			k := kindIndex(d.Kind)
			tasks[k] = append(tasks[k], dep.Ref())
		case !met:
			k := kindIndex(d.Kind)
			waiting[k] = append(waiting[k], d.Job) // no state: it would be stale as soon as the plan starts the job
		}
	}
	switch {
	case j.Hold != nil:
		if terse {
			return because(CodeHeld, ""), Reason{}
		}
		return HeldReason(j), Reason{}
	case len(waiting[0])+len(waiting[1])+len(waiting[2])+len(tasks[0])+len(tasks[1])+len(tasks[2])+len(arraysLeft[0])+len(arraysLeft[1])+len(arraysLeft[2]) > 0:
		if terse {
			return because(CodeDependency, ""), Reason{}
		}
		var parts []string
		for k, ids := range waiting {
			var what []string
			switch n := len(ids) + len(tasks[k]); {
			case n == 1:
				what = append(what, "job "+strings.Join(append(idList(ids), tasks[k]...), ""))
			case n > 1:
				what = append(what, "jobs "+strings.Join(append(idList(ids), tasks[k]...), ", "))
			}
			what = append(what, arraysLeft[k]...)
			if len(what) > 0 {
				parts = append(parts, fmt.Sprintf("%s to %s", strings.Join(what, ", "), DependencyNeed([]job.DepKind{job.AfterOK, job.AfterAny, job.AfterNotOK}[k])))
			}
		}
		return because(CodeDependency, "waits for "+strings.Join(parts, "; ")), Reason{}
	case j.Spec.Begin.After(now):
		if terse {
			return because(CodeBegin, ""), Reason{}
		}
		return because(CodeBegin, "begins at "+j.Spec.Begin.UTC().Format("2006-01-02 15:04:05 UTC")+" (--begin)"), Reason{}
	case j.Spec.Array != nil && j.Spec.Array.Limit > 0 && states.arrayTasks(j.Spec.Array.Job) >= j.Spec.Array.Limit:
		if terse {
			return because(CodeArrayLimit, ""), Reason{}
		}
		a := j.Spec.Array
		return because(CodeArrayLimit, fmt.Sprintf("array %d runs at most %d of its tasks at once (--array %%%d)", a.Job, a.Limit, a.Limit)), Reason{}
	}
	if c := states.in.Policy.CapsOf(j.User); c != (Caps{}) {
		if r := CapReason(c, j.User, states.userLoad(j.User), j.Spec.GPUs); !r.ok() {
			if terse {
				r.Text = ""
			}
			return r, Reason{}
		}
	}
	return Reason{}, Reason{}
}

// DependencyNever says whether dependency d on job dep (d.Job) can no
// longer be met, and why ("job 12 failed (exit status 3); --after needs it
// to succeed", code CodeDependencyNever).
func DependencyNever(d job.Dependency, dep job.Job) (Reason, bool) {
	if _, never := d.Met(dep.State); !never {
		return Reason{}, false
	}
	return because(CodeDependencyNever, fmt.Sprintf("job %s %s; %s needs it to %s", dep.Ref(), ended(&dep), DependencyFlag(d.Kind), DependencyNeed(d.Kind))), true
}

// depKinds are the words of each dependency kind: its flag, what it needs
// of its job, and its place in a reason's list.
var depKinds = map[job.DepKind]struct {
	flag, need string
	index      int
}{
	job.AfterOK:    {"--after", "succeed", 0},
	job.AfterAny:   {"--after-any", "end", 1},
	job.AfterNotOK: {"--after-notok", "fail, time out or be lost", 2},
}

// HeldReason is the pending reason of held job j: "held by alice since
// 2026-12-01 12:00 UTC (gssh release 7)".
func HeldReason(j *job.Job) Reason {
	return because(CodeHeld, fmt.Sprintf("held by %s since %s (gssh release %s)", j.Hold.By, j.Hold.At.UTC().Format("2006-01-02 15:04 UTC"), j.Ref()))
}

func kindIndex(k job.DepKind) int { return depKinds[k].index }

// DependencyFlag is the gssh submit flag of a dependency kind.
func DependencyFlag(k job.DepKind) string { return depKinds[k].flag }

// DependencyNeed is what a dependency kind needs of its job: "succeed",
// "end", "fail, time out or be lost".
func DependencyNeed(k job.DepKind) string { return depKinds[k].need }

// ended says how job j ended: "failed (exit status 3)", "was cancelled
// (cancelled by bob)".
func ended(j *job.Job) string {
	word := map[job.State]string{job.Succeeded: "succeeded", job.Failed: "failed", job.Cancelled: "was cancelled", job.Timeout: "timed out", job.Lost: "was lost"}[j.State]
	if word == "" {
		word = "is " + string(j.State)
	}
	if j.Reason != "" {
		word += " (" + j.Reason + ")"
	}
	return word
}

// idList is idRanges of ids as one element, none for no ids.
func idList(ids []job.ID) []string {
	if len(ids) == 0 {
		return nil
	}
	return []string{idRanges(ids)}
}

// idRanges writes job ids as runs, "9-16, 20", at most 10 runs and then
// how many more jobs: an array of thousands is one run.
func idRanges(ids []job.ID) string {
	s := slices.Sorted(slices.Values(ids))
	var runs []string
	written := 0
	for first, last := range units.Runs(s) {
		if len(runs) == 10 {
			runs = append(runs, fmt.Sprintf("and %d more", len(s)-written))
			break
		}
		r := strconv.FormatUint(uint64(first), 10)
		if last > first {
			r += "-" + strconv.FormatUint(uint64(last), 10)
		}
		runs = append(runs, r)
		written += int(last-first) + 1
	}
	return strings.Join(runs, ", ")
}
