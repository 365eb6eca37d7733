package main

import (
	"fmt"
	"slices"
	"strconv"
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
		"requeue": groupJobs, "history": groupJobs, "template": groupJobs, "cron": groupJobs,
		"gpus": groupGPUs, "hosts": groupGPUs, "reap": groupGPUs, "drain": groupGPUs, "resume": groupGPUs, "doctor": groupGPUs,
		"slurm-conf": groupGPUs, "schedule": groupQueue, "serve": groupQueue, "usage": groupQueue, "events": groupQueue, "sim": groupQueue,
		"demo": groupOperating, "state": groupOperating, "lab": groupOperating, "token": groupOperating, "version": groupOperating,
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

// exitLine is one entry of a command's "Exit status:" help: an exit
// status the command returns and what it means there (more lines after
// "\n"). Each command lists its own (see exits), and a test checks that
// they are the ones it returns.
type exitLine struct {
	code int // an exit status; exitJob: a job's, passed through
	text string
}

// exitJob is the code of the exit line of a job's status, passed through
// (gssh wait, run, submit --wait, logs -f): its entry is its text alone.
const exitJob = -1

// exitJobWord is exitJob in the exitCodesKey annotation and the exit log
// (see exitLogEnv).
const exitJobWord = "job"

// The exit lines most commands share.
var (
	usageExit   = exitLine{exitUsage, "usage or input error (bad flag, malformed inventory, unknown host or label)"}
	hostsExit   = exitLine{exitPartial, "some hosts could not be reached or probed (the others are still listed)"}
	jobHostExit = exitLine{exitPartial, "the job's host could not be reached"}
	stateExit   = exitLine{exitState, "the job state is busy (another gssh holds it), missing, damaged or unreadable"}
	signalExit  = exitLine{exitSignal, "interrupted (Ctrl-C)"}
	termExit    = exitLine{exitTerm, "terminated (SIGTERM)"}
)

// passedJobExit and passedGsshExit are the exit lines of a command that,
// with the flag named (when: "with --wait"), passes its job's status
// through instead, as gssh wait does.
func passedJobExit(when string) exitLine {
	return exitLine{exitJob, when + ": the job's status instead, as gssh wait --help says"}
}

func passedGsshExit(when string) exitLine {
	return exitLine{exitGssh, when + ": gssh itself failed (the state unreadable, a bad flag)"}
}

// The annotations of a command's exit statuses: exitsKey its "Exit
// status:" section, which the usage template prints last; exitCodesKey
// the codes it lists, space-separated ("0 1 3 130 143", exitJobWord for
// a job's status).
const (
	exitsKey     = "exits"
	exitCodesKey = "exitCodes"
)

// exits is the annotations listing the exit statuses a command returns:
// 0 (success) unless a line gives its own, then the lines given, in
// their order.
func exits(lines ...exitLine) map[string]string {
	if !slices.ContainsFunc(lines, func(l exitLine) bool { return l.code == exitOK }) {
		lines = append([]exitLine{{exitOK, "success"}}, lines...)
	}
	var text, codes []string
	for _, l := range lines {
		if l.code == exitJob {
			codes = append(codes, exitJobWord)
			text = append(text, strings.ReplaceAll(l.text, "\n", "\n  "))
			continue
		}
		codes = append(codes, strconv.Itoa(l.code))
		text = append(text, fmt.Sprintf("%-4d %s", l.code, strings.ReplaceAll(l.text, "\n", "\n       ")))
	}
	return map[string]string{exitsKey: "  " + strings.Join(text, "\n  "), exitCodesKey: strings.Join(codes, " ")}
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
			"\n\nGlobal flags (see gssh --help):\n" + wrapWords(global, 100, "  ")},
	} {
		if !strings.Contains(t, r.old) {
			panic("cobra's usage template changed: " + r.old) // caught by every help test
		}
		t = strings.Replace(t, r.old, r.new, 1)
	}
	return t + "{{with .Annotations.exits}}\n\nExit status:\n{{.}}{{end}}\n"
}

// wrapWords joins words with spaces in lines of at most width columns,
// each line begun with indent.
func wrapWords(words []string, width int, indent string) string {
	var lines []string
	line := indent
	for _, w := range words {
		if line != indent && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
