package notify

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Notice is one event as people are told of it.
type Notice struct {
	Event Event
	// User is the job's owner, told of a job's event; "" for a host's or
	// a GPU's (the admins are told).
	User string
	// Subject is one line: "gssh: job 12 (train) failed on gpu02: exit 1".
	Subject string
	Text    string // the subject, then what more the event says
	Line    []byte // the event log's line (JSON, with a newline)
}

// NoticeOf is the notice of event e, and false for an event no one is
// told of (a submit, a start, a host up).
func NoticeOf(e eventlog.Event) (Notice, bool) {
	n := Notice{Line: e.JSON()}
	what := "job " + ref(e)
	if v, ok := e.Attr("name"); ok && v.String() != "" {
		what += " (" + v.String() + ")"
	}
	where := ""
	if e.Host != "" {
		where = " on " + e.Host
	}
	switch e.Kind {
	case eventlog.JobEnd:
		n.User = e.User
		switch e.State {
		case job.Succeeded:
			n.Event, n.Subject = JobSucceeded, what+" succeeded"+where
		case job.Failed:
			n.Event, n.Subject = JobFailed, what+" failed"+where
			if e.Exit != nil {
				n.Subject += ": exit status " + strconv.Itoa(*e.Exit)
			}
		case job.Cancelled:
			n.Event, n.Subject = JobCancelled, what+" was cancelled"
		case job.Timeout:
			n.Event, n.Subject = JobTimeout, what+" reached its walltime"+where+" and was stopped"
		case job.Lost:
			n.Event, n.Subject = JobLost, what+" was lost"+where
		default:
			return Notice{}, false
		}
		if v, ok := e.Attr("runtime_s"); ok && v.Kind() == slog.KindFloat64 && v.Float64() >= 1 {
			n.Subject += " after " + units.FormatDuration(time.Duration(v.Float64()*float64(time.Second)).Round(time.Second))
		}
	case eventlog.JobGPUFailed:
		n.Event, n.User, n.Subject = JobGPUFailed, e.User, "a GPU of "+what+where+" failed"
	case eventlog.HostDown:
		n.Event, n.Subject = HostDown, "host "+e.Host+" is down"
	case eventlog.GPUFailed:
		n.Event, n.Subject = GPUFailed, "GPU "+gpus(e.GPUs)+" of "+e.Host+" failed"
	default:
		return Notice{}, false
	}
	n.Subject = "gssh: " + oneLine(n.Subject)
	n.Text = n.Subject + "\n"
	if e.Reason != "" {
		n.Text += "\n" + e.Reason + "\n"
	}
	if e.User != "" && e.Job != 0 {
		n.Text += fmt.Sprintf("\nuser %s; see gssh show %s, gssh logs %s\n", e.User, ref(e), ref(e))
	}
	n.Text += "\n" + string(n.Line)
	return n, true
}

// ref is the job's name in gssh's commands: 16_2 for an array task.
func ref(e eventlog.Event) string {
	id := strconv.FormatUint(uint64(e.Job), 10)
	a, okA := e.Attr("array")
	t, okT := e.Attr("task")
	if okA && okT {
		return strconv.FormatUint(a.Uint64(), 10) + "_" + strconv.FormatInt(t.Int64(), 10)
	}
	return id
}

func gpus(idx []int) string {
	if len(idx) == 0 {
		return "?"
	}
	return units.Ranges(idx, 3)
}

// oneLine is s with its control characters as spaces: a job's name is
// its user's, and no line break of it may reach a mail's headers or a
// chat's first line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// walltimeNotice is the notice that running job j reaches its walltime
// soon after now.
func walltimeNotice(j job.Job, now time.Time) Notice {
	e := eventlog.OfJob(now, eventlog.JobStart, j) // its line, as the job runs
	what := "job " + ref(e)
	if j.Spec.Name != "" {
		what += " (" + j.Spec.Name + ")"
	}
	end := j.StartedAt.Add(j.Spec.Timeout)
	n := Notice{Event: JobWalltime, User: j.User, Line: e.JSON()}
	n.Subject = "gssh: " + oneLine(fmt.Sprintf("%s on %s reaches its walltime of %s at %s UTC, in %s: it will be stopped then",
		what, j.Placement.Host, units.FormatDuration(j.Spec.Timeout), end.UTC().Format("15:04"), units.FormatDuration(end.Sub(now).Round(time.Minute))))
	n.Text = n.Subject + "\n\nGive a longer --timeout next time (gssh update cannot lengthen a running job's).\n" +
		fmt.Sprintf("\nuser %s; see gssh show %s, gssh logs %s\n", j.User, ref(e), ref(e)) + "\n" + string(n.Line)
	return n
}

// idleNotice is the notice that running job j's GPUs have read 0 %
// utilization since its GPUUse.IdleSince.
func idleNotice(j job.Job, now time.Time) Notice {
	e := eventlog.OfJob(now, eventlog.JobStart, j)
	what := "job " + ref(e)
	if j.Spec.Name != "" {
		what += " (" + j.Spec.Name + ")"
	}
	since := j.GPUUse.IdleSince
	n := Notice{Event: JobIdle, User: j.User, Line: e.JSON()}
	n.Subject = "gssh: " + oneLine(fmt.Sprintf("%s on %s has held its GPUs at 0 %% utilization since %s UTC (%s)",
		what, j.Placement.Host, since.UTC().Format("15:04"), units.FormatDuration(now.Sub(since).Round(time.Minute))))
	n.Text = n.Subject + "\n\nOthers wait for GPUs: cancel it if it is stuck or done (gssh cancel " + ref(e) + ").\n" +
		fmt.Sprintf("\nuser %s; see gssh show %s, gssh logs %s\n", j.User, ref(e), ref(e)) + "\n" + string(n.Line)
	return n
}
