package main

import (
	"fmt"
	"strings"

	"github.com/gssh/gssh/job"
)

// attemptLines are gssh show's lines of j's launch attempts, one each
// ("attempt 1:"), in number order; none for a job never launched.
func attemptLines(j job.Job) [][2]string {
	var out [][2]string
	for _, a := range j.AllAttempts() {
		out = append(out, [2]string{fmt.Sprintf("attempt %d", a.N), attemptText(a, a.N == j.Attempt && j.Placement.Host != "")})
	}
	return out
}

// attemptText is one attempt in words: where, from when to when, how it
// ended and why the job went on from it, its log.
//
//	gpu01:0,1, 2026-12-01T14:00:01Z to 2026-12-01T14:09:30Z: cancelled, preempted (preempted for job 9 ...; requeued); log /home/u/.gssh/jobs/c-7.1/log
func attemptText(a job.Attempt, current bool) string {
	var b strings.Builder
	b.WriteString(where(job.Placement{Host: a.Host, Indexes: a.GPUs}))
	switch {
	case a.StartedAt.IsZero():
		b.WriteString(", never started")
	case a.EndedAt.IsZero():
		fmt.Fprintf(&b, ", from %s", timeCell(a.StartedAt))
	default:
		fmt.Fprintf(&b, ", %s to %s", timeCell(a.StartedAt), timeCell(a.EndedAt))
	}
	if a.State != "" {
		b.WriteString(": " + string(a.State))
	}
	if a.ExitCode != nil {
		fmt.Fprintf(&b, ", exit status %d", *a.ExitCode)
	}
	if a.Signal != "" {
		b.WriteString(", signal " + a.Signal)
	}
	if !current && a.Ended != "" { // the current one's reason is the job's
		b.WriteString(", " + strings.ReplaceAll(a.Ended, "_", " "))
		if a.Reason != "" {
			b.WriteString(" (" + a.Reason + ")")
		}
	}
	if a.Dir != "" {
		b.WriteString("; log " + a.Dir + "/log")
	}
	return b.String()
}
