package job

import (
	"strconv"
)

// Ref is how gssh names j to a person, everywhere it does (gssh ps,
// show, schedule, wait, events, pending reasons, errors): its id ("18"),
// or for a task of a job array the array's id and the task's index
// ("16_2", as Slurm names it). Every command that takes a job takes it
// back (service.ParseRefs).
func (j Job) Ref() string { return RefOf(j.ID, j.Spec.Array) }

// RefOf is Ref of the job id with array place a (nil: a job of its own).
func RefOf(id ID, a *ArrayTask) string {
	if a == nil {
		return strconv.FormatUint(uint64(id), 10)
	}
	return strconv.FormatUint(uint64(a.Job), 10) + "_" + strconv.Itoa(a.Task)
}
