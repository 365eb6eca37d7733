package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/sched"
	"github.com/gssh/gssh/state"
)

// Resolve implements Service: the jobs names name, in order, each once.
// A name is a job id ("12", "#12"); the id of a job array (its first
// task's) names every task of it, as in Slurm; "12_3" names task 3 of
// array 12. Errors: a name that is none of these (an input error), an
// array without that task or a job that does not exist (wrapping
// state.ErrNotFound), the state unreadable.
func (l *Local) Resolve(_ context.Context, names []string) ([]job.ID, error) {
	refs, err := ParseRefs(names)
	if err != nil {
		return nil, err
	}
	st, none, err := l.readStore()
	if err != nil {
		return nil, err
	}
	if none {
		return nil, fmt.Errorf("%w %d: nothing was submitted yet", state.ErrNotFound, refs[0].Job)
	}
	return resolve(st, refs)
}

// Ref is a job as a user names it: a job id, or Task of array Job.
type Ref struct {
	Job  job.ID
	Task int // -1: Job itself (every task, when Job is an array's id)
}

func (r Ref) String() string {
	if r.Task < 0 {
		return strconv.FormatUint(uint64(r.Job), 10)
	}
	return fmt.Sprintf("%d_%d", r.Job, r.Task)
}

// ParseRefs reads job names: "12", "#12", "12_3", several per argument
// comma-separated, and the folded form gssh ps prints, "12[3-31]" or
// "12[4,9]" (those tasks of array 12). Its error says which name is
// wrong.
func ParseRefs(names []string) ([]Ref, error) {
	var out []Ref
	for _, arg := range names {
		for _, s := range splitNames(arg) {
			if id, tasks, ok := strings.Cut(s, "["); ok && strings.HasSuffix(tasks, "]") {
				n, err := strconv.ParseUint(strings.TrimPrefix(id, "#"), 10, 64)
				idx, _, aerr := sched.ParseArray(strings.TrimSuffix(tasks, "]"))
				if err != nil || n == 0 || aerr != nil {
					return nil, fmt.Errorf("%q is not a job id (a number as gssh ps shows it, ARRAY_TASK such as 12_3, or ARRAY[TASKS] such as 12[3-31])", s)
				}
				for _, t := range idx {
					if r := (Ref{Job: job.ID(n), Task: t}); !slices.Contains(out, r) {
						out = append(out, r)
					}
				}
				continue
			}
			idText, taskText, isTask := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "#"), "_")
			n, err := strconv.ParseUint(idText, 10, 64)
			r := Ref{Job: job.ID(n), Task: -1}
			if err == nil && isTask {
				r.Task, err = strconv.Atoi(taskText)
				if r.Task < 0 {
					err = errors.New("negative")
				}
			}
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%q is not a job id (a number as gssh ps shows it, ARRAY_TASK such as 12_3, or ARRAY[TASKS] such as 12[3-31])", s)
			}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no job id given")
	}
	return out, nil
}

// splitNames splits an argument at the commas outside brackets:
// "12[4,9],13" is "12[4,9]" and "13".
func splitNames(arg string) []string {
	var out []string
	depth, from := 0, 0
	for i, r := range arg {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, arg[from:i])
				from = i + 1
			}
		}
	}
	return append(out, arg[from:])
}

// resolve turns refs into job ids by st; see Resolve.
func resolve(st control.Store, refs []Ref) ([]job.ID, error) {
	var out []job.ID
	add := func(id job.ID) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	for _, r := range refs {
		j, err := st.Get(r.Job)
		if errors.Is(err, state.ErrNotFound) {
			return nil, fmt.Errorf("%w (see gssh ps -a)", err)
		}
		if err != nil {
			return nil, err
		}
		a := j.Spec.Array
		isArray := a != nil && a.Job == j.ID
		switch {
		case r.Task < 0 && !isArray:
			add(j.ID)
		case r.Task < 0:
			for k := range a.Tasks {
				add(a.Job + job.ID(k))
			}
		case !isArray:
			return nil, fmt.Errorf("%s: job %d is not a job array (give %d for the job itself)", r, r.Job, r.Job)
		default:
			found := false
			for k := range a.Tasks {
				t, err := st.Get(a.Job + job.ID(k))
				if err != nil {
					return nil, err
				}
				if t.Spec.Array != nil && t.Spec.Array.Job == a.Job && t.Spec.Array.Task == r.Task {
					add(t.ID)
					found = true
					break
				}
			}
			if !found {
				return nil, noTask{a.Job, r.Task}
			}
		}
	}
	return out, nil
}

// noTask is an array without the task asked for: not found.
type noTask struct {
	array job.ID
	task  int
}

func (e noTask) Error() string { return fmt.Sprintf("array %d has no task %d", e.array, e.task) }
func (e noTask) Unwrap() error { return state.ErrNotFound }
