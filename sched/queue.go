package sched

import (
	"cmp"
	"slices"

	"github.com/gssh/gssh/job"
)

// ranked is a queued job and the score it was ordered by.
type ranked struct {
	*job.Job
	score float64 // fair-share score: decayed GPU-seconds / weight (OrderFair)
}

// ordered returns the queue's jobs in the order they are offered GPUs
// under p, leaving queue as it is: under OrderFIFO submit order; under
// OrderPriority the priority class (0 first), then submit order; under
// OrderFair the priority class, then the user's fair-share score (usage /
// weight, lowest first), then submit order. Ties end in submit order: job
// ids are the store's sequence, so they sort by submit time.
func ordered(queue []job.Job, p Policy, usage map[string]float64) []ranked {
	out := make([]ranked, len(queue))
	for i := range queue {
		out[i] = ranked{Job: &queue[i]}
		if p.Order == OrderFair {
			out[i].score = usage[queue[i].User] / p.Weight(queue[i].User)
		}
	}
	slices.SortStableFunc(out, func(a, b ranked) int {
		if p.Order != OrderFIFO {
			if c := cmp.Compare(a.Spec.Priority, b.Spec.Priority); c != 0 {
				return c // 0 is the highest priority
			}
		}
		if p.Order == OrderFair {
			if c := cmp.Compare(a.score, b.score); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
