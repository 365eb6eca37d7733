package sched

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gssh/gssh/units"
)

// rankText says what puts the job at pos of queue where it is, in words.
func rankText(queue []ranked, pos int, pol Policy) string {
	j := queue[pos]
	head := ordinal(pos+1) + " in the queue"
	multifactor := pol.Multifactor()
	if pos == 0 && multifactor {
		return head + ": " + FactorsText(j.Priority, pol) // what keeps it first
	}
	if pos == 0 {
		return head
	}
	switch pol.Order {
	case OrderFIFO:
		return head + " (submit order)"
	case OrderPriority:
		return fmt.Sprintf("%s: priority %d, behind %s", head, j.Spec.Priority, ahead(queue[:pos], func(r ranked) string {
			return fmt.Sprintf("job %s (priority %d)", r.Ref(), r.Spec.Priority)
		}))
	}
	if multifactor {
		return head + ": " + multifactorText(queue, pos, pol)
	}
	// The users ranked ahead in this priority class, lowest score first
	// (their queue order), up to 3; the user's own jobs ahead; the jobs of
	// higher classes.
	seen := map[string]bool{j.User: true}
	var users []string
	more, own, higher := 0, 0, 0
	for k := 0; k < pos; k++ {
		r := queue[k]
		switch {
		case r.Spec.Priority < j.Spec.Priority:
			higher++ // a higher class, not fair-share, puts those ahead
			continue
		case r.Spec.Priority != j.Spec.Priority:
			continue
		case r.User == j.User:
			own++
			continue
		case seen[r.User]:
			continue
		}
		seen[r.User] = true
		if len(users) == 3 {
			more++
			continue
		}
		users = append(users, r.User+" "+ScoreText(r.Score))
	}
	if more > 0 {
		users = append(users, fmt.Sprintf("%d more %s", more, units.Plural(more, "user", "users")))
	}
	var parts []string
	if len(users) > 0 {
		parts = append(parts, "ranks behind "+joinAnd(users))
	}
	if own > 0 {
		parts = append(parts, fmt.Sprintf("behind %d earlier %s of %s own", own, units.Plural(own, "job", "jobs"), j.User+"'s"))
	}
	if higher > 0 {
		parts = append(parts, fmt.Sprintf("behind %d %s of a higher priority class", higher, units.Plural(higher, "job", "jobs")))
	}
	return head + ": " + j.User + "'s fair-share score " + ScoreText(j.Score) + " " + strings.Join(parts, "; ")
}

// multifactorText says what puts the job at pos of queue where it is
// under a multifactor order: its priority and factors, and the jobs of
// its class ahead of it, the nearest first (up to 3).
func multifactorText(queue []ranked, pos int, pol Policy) string {
	j := queue[pos]
	var ahead []string
	more, higher := 0, 0
	for k := pos - 1; k >= 0; k-- {
		r := queue[k]
		switch {
		case r.Class < j.Class:
			higher++
		case r.Class != j.Class:
		case len(ahead) == 3:
			more++
		default:
			ahead = append(ahead, fmt.Sprintf("job %s of %s (%s)", r.Ref(), r.User, valueText(r.Value)))
		}
	}
	if more > 0 {
		ahead = append(ahead, fmt.Sprintf("%d more", more))
	}
	out := FactorsText(j.Priority, pol)
	if len(ahead) > 0 {
		out += "; ranks behind " + joinAnd(ahead)
	}
	if higher > 0 {
		out += fmt.Sprintf("; behind %d %s of a higher priority class", higher, units.Plural(higher, "job", "jobs"))
	}
	return out
}

// FactorsText says a priority under pol, factor by factor, each as it
// counts (its weight times its value): "priority 0.62 = fair-share 0.40
// + age 0.17 + size 0.05". Factors of weight 0 are left out.
func FactorsText(p Priority, pol Policy) string {
	pol = pol.WithDefaults()
	w := pol.Weights
	var parts []string
	for _, f := range []struct {
		name   string
		weight float64
		value  float64
	}{{"fair-share", w.FairShare, p.FairShare}, {"age", w.Age, p.Age}, {"size", w.Size, p.Size}} {
		if f.weight > 0 {
			parts = append(parts, f.name+" "+valueText(f.weight*f.value))
		}
	}
	return "priority " + valueText(p.Value) + " = " + strings.Join(parts, " + ")
}

// valueText prints a priority or a factor with two decimals.
func valueText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
