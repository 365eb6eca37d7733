package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The groups of gssh --help, in the order it lists them.
const (
	groupJobs      = "jobs"
	groupGPUs      = "gpus"
	groupQueue     = "queue"
	groupOperating = "operating"
)

// commandGroups is the group of each command of the root, by name; a
// command not named here is listed under "Additional Commands".
func commandGroups() map[string]string {
	return map[string]string{
		"submit": groupJobs, "run": groupJobs, "ps": groupJobs, "show": groupJobs, "logs": groupJobs,
		"wait": groupJobs, "cancel": groupJobs, "hold": groupJobs, "release": groupJobs, "update": groupJobs,
		"requeue": groupJobs,
		"gpus":    groupGPUs, "hosts": groupGPUs, "reap": groupGPUs, "drain": groupGPUs, "resume": groupGPUs,
		"schedule": groupQueue, "usage": groupQueue, "events": groupQueue, "sim": groupQueue,
		"state": groupOperating, "lab": groupOperating, "version": groupOperating,
		"completion": groupOperating, "help": groupOperating,
	}
}

// groupCommands adds gssh --help's groups to root and puts each of its
// commands in its group.
func groupCommands(root *cobra.Command) {
	root.AddGroup(
		&cobra.Group{ID: groupJobs, Title: "Jobs:"},
		&cobra.Group{ID: groupGPUs, Title: "GPUs and hosts:"},
		&cobra.Group{ID: groupQueue, Title: "The queue:"},
		&cobra.Group{ID: groupOperating, Title: "Operating gssh:"},
	)
	groups := commandGroups()
	for _, c := range root.Commands() {
		if g, ok := groups[c.Name()]; ok {
			c.GroupID = g
		}
	}
	root.SetHelpCommandGroupID(groupOperating)
	root.SetCompletionCommandGroupID(groupOperating)
}

// The lines of a command's "Exit status:" section (see exits).
const (
	exitLineUsage   = "1    usage or input error (bad flag, malformed inventory, unknown host or label)"
	exitLineHosts   = "2    some hosts could not be reached or probed (the others are still listed)"
	exitLineJobHost = "2    the job's host could not be reached"
	exitLineState   = "3    the job state is busy (another gssh holds it), missing, damaged or unreadable"
	exitLineSignal  = "130  interrupted (Ctrl-C); 143 terminated (SIGTERM)"
)

// exitsKey is the cobra annotation holding a command's exit statuses,
// which the usage template prints last.
const exitsKey = "exits"

// exits is the annotation listing the exit statuses a command returns:
// 0, the lines given (code, spaces, meaning), then 130 and 143.
func exits(lines ...string) map[string]string {
	all := append([]string{"0    success"}, lines...)
	all = append(all, exitLineSignal)
	return map[string]string{exitsKey: "  " + strings.Join(all, "\n  ")}
}

// exitsOr is exits, then a last entry of its own for a command that,
// with the flag named (when "with --wait"), passes its job's status
// through instead: "with --wait: the job's status instead, as gssh wait
// --help says".
func exitsOr(when string, lines ...string) map[string]string {
	m := exits(lines...)
	m[exitsKey] += "\n  " + when + ": the job's status instead, as gssh wait --help says"
	return m
}

// exitsText is an exit annotation of its own words (gssh wait and run
// pass a job's status through).
func exitsText(text string) map[string]string {
	return map[string]string{exitsKey: text}
}

// usageTemplate is cobra's, with flag help wrapped at 100 columns, the
// global flags named in one line below a command's own (gssh --help
// lists them), and the command's exit statuses last.
func usageTemplate(root *cobra.Command) string {
	t := strings.TrimSuffix(root.UsageTemplate(), "\n")
	var global []string
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { global = append(global, "--"+f.Name) })
	for _, r := range []struct{ old, new string }{
		{"{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}", "{{.LocalFlags.FlagUsagesWrapped 100 | trimTrailingWhitespaces}}"},
		{"\n\nGlobal Flags:\n{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}",
			"\n\nGlobal flags (see gssh --help):\n  " + strings.Join(global, " ")},
	} {
		if !strings.Contains(t, r.old) {
			panic("cobra's usage template changed: " + r.old) // caught by every help test
		}
		t = strings.Replace(t, r.old, r.new, 1)
	}
	return t + "{{with .Annotations.exits}}\n\nExit status:\n{{.}}{{end}}\n"
}
