package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/eventlog"
	"github.com/gssh/gssh/service"
)

type eventsOptions struct {
	job, user, host, since string
	sinceSet               bool // --since was given (an empty one is an error)
	kinds                  []string
	json                   bool
	tail                   int
	filter                 eventlog.Filter // what the flags select
}

func newEventsCmd(a *app, runF func(*eventsOptions) error) *cobra.Command {
	opts := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show what happened: the event log of every job, host and GPU change",
		Long: `Show the event log, oldest first: every change of a job, host or GPU is one
line of events.log beside the state file (rotated daily and at 10 MiB,
kept keep_events, 30 days; all read). Columns: TIME (local), EVENT, JOB,
USER, HOST, DETAILS. --json prints the lines as written, for jq. The event
kinds and fields: docs/operating.md.`,
		Example: `  gssh events --job 42
  gssh events --user ann --since 7d
  gssh events --since 2026-11-30 --kind job_end --json | jq -r .user | sort | uniq -c
  gssh events --kind host_down,host_up --since 24h`,
		Annotations: exits(usageExit, signalExit, termExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.sinceSet = c.Flags().Changed("since")
			f, err := opts.parse(a)
			if err != nil {
				return err
			}
			opts.filter = f
			if runF != nil {
				return runF(opts)
			}
			return eventsRun(c.Context(), a, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.job, "job", "", "only this job's events (an array's id: every task's; 12_3: that task's)")
	f.StringVar(&opts.user, "user", "", "only the events of this user's jobs")
	f.StringVar(&opts.host, "host", "", "only the events on this host")
	f.StringVar(&opts.since, "since", "", "only events since then: a time ago (90m, 2h, 7d, 2w), a date (2026-11-30), a local time (2026-11-30T14:00) or RFC 3339")
	f.StringSliceVar(&opts.kinds, "kind", nil, "only these kinds of event (comma-separated or repeated), such as job_end")
	f.BoolVar(&opts.json, "json", false, "print the log's JSON lines as they are")
	f.IntVarP(&opts.tail, "tail", "n", 0, "only the last N events (0: all)")
	return cmd
}

// parse is the event filter the flags ask for.
func (opts *eventsOptions) parse(a *app) (eventlog.Filter, error) {
	var f eventlog.Filter
	if opts.job != "" && strings.Contains(opts.job, "_") {
		refs, err := service.ParseRefs([]string{opts.job})
		if err != nil {
			return f, fmt.Errorf("--job: %w", err)
		}
		f.Job, f.Task = refs[0].Job, true // the task's own id: looked up by eventsRun
	} else if opts.job != "" {
		id, err := parseID(opts.job)
		if err != nil {
			return f, fmt.Errorf("--job: %w", err)
		}
		f.Job = id
	}
	if opts.sinceSet || opts.since != "" {
		t, err := eventlog.ParseSince(opts.since, a.now())
		if err != nil {
			return f, fmt.Errorf("--since %w", err)
		}
		f.Since = t
	}
	for _, k := range opts.kinds {
		if !eventlog.Known(eventlog.Kind(k)) {
			return f, fmt.Errorf("--kind %q: no such event; give one of %s", k, strings.Join(kindNames(), ", "))
		}
		f.Kinds = append(f.Kinds, eventlog.Kind(k))
	}
	if opts.tail < 0 {
		return f, fmt.Errorf("--tail %d: give a number of events, or 0 for all", opts.tail)
	}
	f.User, f.Host = opts.user, opts.host
	return f, nil
}

func kindNames() []string {
	out := make([]string, len(eventlog.Kinds))
	for i, k := range eventlog.Kinds {
		out[i] = string(k)
	}
	return out
}

func eventsRun(ctx context.Context, a *app, opts *eventsOptions) error {
	f := opts.filter
	if f.Task { // an array task's name, 12_3: its own id
		ids, err := a.service().Resolve(ctx, []string{opts.job})
		if err != nil {
			return interrupted(ctx, fmt.Errorf("--job: %w", err))
		}
		f.Job = ids[0]
	}
	var recs []eventlog.Record
	res, err := a.service().Events(ctx, service.EventQuery{Filter: f, Warn: a.warnf}, func(r eventlog.Record) error {
		if opts.json && opts.tail == 0 {
			_, err := fmt.Fprintf(a.stdout, "%s\n", r.Line) // as it comes: a month of events is not held
			return err
		}
		if recs = append(recs, r); opts.tail > 0 && len(recs) > 2*opts.tail {
			recs = slices.Delete(recs, 0, len(recs)-opts.tail)
		}
		return ctx.Err()
	})
	if err != nil {
		return interrupted(ctx, err)
	}
	if res.None {
		fmt.Fprintf(a.stderr, "gssh: no events recorded yet at %s\n", res.Path)
		return nil
	}
	if opts.tail > 0 && len(recs) > opts.tail {
		recs = recs[len(recs)-opts.tail:]
	}
	if opts.json {
		for _, r := range recs {
			if _, err := fmt.Fprintf(a.stdout, "%s\n", r.Line); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, len(recs))
	for i, r := range recs {
		rows[i] = []string{r.Time.Local().Format("2006-01-02 15:04:05.000"), string(r.Kind), dash(r.Ref), dash(r.User), dash(r.Host), details(r.Fields)}
	}
	return printTable(a.stdout, a.tty, []string{"TIME", "EVENT", "JOB", "USER", "HOST", "DETAILS"}, rows)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// details are an event's fields beyond the table's columns (an array
// task's array and task are its JOB, 16_2), as key=value: state, gpus,
// exit and attempt first, the reason last, the others by name between.
func details(fields map[string]any) string {
	first := []string{"state", "gpus", "exit", "signal", "attempt"}
	var rest []string
	for k := range fields {
		switch k {
		case "time", "event", "job", "task", "user", "host", "reason":
		case "array": // in the JOB column's 16_2, unless a line of before the task field
			if _, named := fields["task"]; !named {
				rest = append(rest, k)
			}
		default:
			if !slices.Contains(first, k) {
				rest = append(rest, k)
			}
		}
	}
	slices.Sort(rest)
	var out []string
	for _, k := range append(append(first, rest...), "reason") {
		v, ok := fields[k]
		if !ok {
			continue
		}
		out = append(out, k+"="+value(v))
	}
	return strings.Join(out, " ")
}

// value is a field's value for details: numbers and words as they are, a
// list of GPU indexes as 0,3, text with spaces quoted.
func value(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, " \t\"=") {
			return fmt.Sprintf("%q", x)
		}
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = value(e)
		}
		return strings.Join(parts, ",")
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}
