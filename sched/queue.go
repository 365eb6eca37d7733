package sched

import (
	"cmp"
	"slices"

	"github.com/gssh/gssh/job"
)

// ordered returns the queue's jobs in the order they are offered GPUs
// under o, leaving queue as it is. Ties end in submit order: job ids are
// the store's sequence, so they sort by submit time.
func ordered(queue []job.Job, o Order) []*job.Job {
	out := make([]*job.Job, len(queue))
	for i := range queue {
		out[i] = &queue[i]
	}
	slices.SortStableFunc(out, func(a, b *job.Job) int {
		if o == OrderPriority {
			if c := cmp.Compare(a.Spec.Priority, b.Spec.Priority); c != 0 {
				return c // 0 is the highest priority
			}
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
