package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// Code is the short, stable name of a reason, beside its prose: for
// metrics, the API and scripts (`gssh show --json`). Codes are only ever
// added.
type Code string

// Reason codes. Host and GPU codes say why one host or GPU was turned
// down; a pending job's code is the one most of the hosts it could use
// gave (see Pending).
const (
	CodeHost        Code = "host"         // not the host the job asked for (--host)
	CodeLabel       Code = "label"        // lacks a label the job asked for (--label); for a job: no host has them
	CodeUnknownHost Code = "unknown_host" // for a job: no host of the inventory has the name it asked for
	CodeNoHosts     Code = "no_hosts"     // for a job: the inventory lists no host
	CodeDrained     Code = "drained"      // the host takes no new jobs
	CodeHostDown    Code = "host_down"    // the host could not be reached or probed; its state says why
	CodeNotProbed   Code = "not_probed"   // no snapshot of the host yet
	CodeNoGPUs      Code = "no_gpus"      // the host has no GPU
	CodeTooFewGPUs  Code = "too_few_gpus" // the host has fewer GPUs than the job needs
	CodeUnhealthy   Code = "unhealthy"    // lost, requires reset, in error, health unknown
	CodeMIG         Code = "mig"          // a MIG device cannot take this job (multi-GPU, no UUID, none listed)
	CodeNoFreeGPU   Code = "no_free_gpu"  // the GPUs are held by gssh jobs (waiting, or preempting them, frees them)
	CodeOtherQueue  Code = "other_queue"  // the GPUs are held by jobs of another gssh queue (another state file, seen on the worker)
	CodeForeign     Code = "foreign"      // exclusive job: processes gssh did not start use the GPUs (or may: unreadable)
	CodeMem         Code = "mem"          // shared job: not enough GPU memory, or memory unknown
	CodeCPUs        Code = "cpus"         // --cpus: not enough of the host's CPUs left (gssh jobs booked them), or the host's CPUs unknown
	CodeHostMem     Code = "host_mem"     // --host-mem: not enough host memory left (booked by gssh jobs, or not available now), or it is unknown
	CodeBlocked     Code = "blocked"      // for a job: behind a job that must start first (backfill none)
	CodeReserved    Code = "reserved"     // the GPUs are reserved for a job ahead (EASY backfill) and this job would not end before
)

// Known is the code named s, as this package's constant (its string
// compares with a plan's codes at once), and whether there is one: a
// reader that keeps reasons read back from a store makes their codes
// these.
func Known(s string) (Code, bool) {
	for _, c := range codeRank {
		if string(c) == s {
			return c, true
		}
	}
	for _, c := range jobCodes {
		if string(c) == s {
			return c, true
		}
	}
	return "", false
}

// jobCodes are the codes only a job's reason has, never a host's.
var jobCodes = []Code{CodeUnknownHost, CodeNoHosts, CodeBlocked}

// codeRank breaks ties between codes given by as many hosts: the one a
// user can most likely act on (wait, ask for less memory) first.
var codeRank = []Code{CodeNoFreeGPU, CodeOtherQueue, CodeMem, CodeCPUs, CodeHostMem, CodeReserved, CodeForeign, CodeDrained, CodeUnhealthy, CodeHostDown, CodeNotProbed,
	CodeMIG, CodeTooFewGPUs, CodeNoGPUs, CodeLabel, CodeHost}

// Exhausted reports whether a host turned a job down with c because what
// it needs is taken now (GPUs, memory), so the job fits there once
// something ends. Every other code filters: the host cannot take the job
// for a reason no job's end changes (drained, down, a missing label, too
// few GPUs). Only exhausted jobs hold up the queue under backfill none
// (and, later, get reservations).
func (c Code) Exhausted() bool {
	switch c {
	case CodeNoFreeGPU, CodeOtherQueue, CodeForeign, CodeMem, CodeCPUs, CodeHostMem, CodeReserved:
		return true
	}
	return false
}

// Reason says why something was turned down: a stable Code and the prose
// for people ("gpu01: 0/8 GPUs free (GPU 0-7: in use by gssh jobs)").
type Reason struct {
	Code Code   `json:"code"`
	Text string `json:"text"`
}

func (r Reason) String() string { return r.Text }

// ok reports whether r turns nothing down.
func (r Reason) ok() bool { return r.Code == "" }

func because(c Code, text string) Reason { return Reason{Code: c, Text: text} }

// Rejection is one host turned down for a job, and why.
type Rejection struct {
	Host   string `json:"host"`
	Reason Reason `json:"reason"`
}

// dominant is the code given most often in codes, ties broken by codeRank.
func dominant(codes []Code) Code {
	return dominantOf(len(codes), func(i int) Code { return codes[i] })
}

// dominantOf is dominant over the codes of n items, code(i) giving item
// i's; an empty code counts for nothing (a verdict that passed).
func dominantOf(n int, code func(int) Code) Code {
	var count [32]int // by rank; codes are few
	best, first := -1, Code("")
	for i := range n {
		c := code(i)
		if c == "" {
			continue
		}
		if first == "" {
			first = c
		}
		r := min(rank(c), len(count)-1)
		count[r]++
		if best < 0 || count[r] > count[best] || count[r] == count[best] && r < best {
			best = r
		}
	}
	switch {
	case best < 0:
		return ""
	case best < len(codeRank):
		return codeRank[best]
	}
	return first // a code outside codeRank: not expected
}

func rank(c Code) int {
	if i := slices.Index(codeRank, c); i >= 0 {
		return i
	}
	return len(codeRank)
}

// verdict is one unit turned down and why.
type verdict struct {
	u   *unit
	why Reason
}

// summarize groups turned-down units by reason, those of code (the
// host's reason's) first, then in order of first appearance, so that the
// text leads with what its code says; it names the gssh jobs holding the
// units a group was turned down for being taken: "GPU 0-3: in use by
// gssh jobs (alice: jobs 14, 15); GPU 5, GPU 6 MIG 1: lost".
func summarize(n *node, vs []verdict, code Code) string {
	type group struct {
		why   Reason
		units []*unit
	}
	var groups []*group
	byText := map[string]*group{}
	for _, v := range vs {
		g := byText[v.why.Text]
		if g == nil {
			g = &group{why: v.why}
			byText[v.why.Text] = g
			groups = append(groups, g)
		}
		g.units = append(g.units, v.u)
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return cmp.Compare(leads(a.why.Code, code), leads(b.why.Code, code)) })
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = unitNames(g.units) + ": " + g.why.Text
		if g.why.Code == CodeNoFreeGPU || g.why.Code == CodeMem {
			if who := holders(n, g.units); who != "" {
				parts[i] += " (" + who + ")"
			}
		}
	}
	return strings.Join(parts, "; ")
}

// holders names the gssh jobs holding units of n, by user in order of
// first appearance: "alice: jobs 14, 15; bob: job 3". Up to 3 users.
func holders(n *node, us []*unit) string {
	var users []string
	jobs := map[string][]job.ID{}
	refs := map[job.ID]string{}
	for _, u := range us {
		b, _ := n.booking(u)
		for _, h := range b.Holders {
			if h.other() {
				continue // named by its own reason (otherText)
			}
			if _, ok := jobs[h.User]; !ok {
				users = append(users, h.User)
			}
			if !slices.Contains(jobs[h.User], h.Job) {
				jobs[h.User] = append(jobs[h.User], h.Job)
			}
			refs[h.Job] = h.Ref()
		}
	}
	var parts []string
	for i, user := range users {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more users", len(users)-3))
			break
		}
		ids := slices.Sorted(slices.Values(jobs[user]))
		names := make([]string, len(ids))
		for k, id := range ids {
			if names[k] = refs[id]; names[k] == "" {
				names[k] = strconv.FormatUint(uint64(id), 10)
			}
		}
		parts = append(parts, cmp.Or(user, "?")+": "+units.Plural(len(ids), "job", "jobs")+" "+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

// unitNames names units for people: whole GPUs as index ranges ("GPU
// 0-3,5"), MIG devices one by one with their profiles ("GPU 6 MIG 1
// (1g.10gb)"), so a request no MIG device can hold says which exist.
func unitNames(us []*unit) string {
	var idx []int
	var names []string
	for _, u := range us {
		if u.mig < 0 {
			idx = append(idx, u.index)
		}
	}
	if len(idx) > 0 {
		names = append(names, "GPU "+units.Ranges(idx, 3))
	}
	for _, u := range us {
		if u.mig >= 0 {
			name := fmt.Sprintf("GPU %d MIG %d", u.index, u.mig)
			if u.profile != "" {
				name += " (" + u.profile + ")"
			}
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// leads is 0 for a reason of code, which a text leads with, 1 for others.
func leads(c, code Code) int {
	if c == code {
		return 0
	}
	return 1
}

// pendingReason says why no host took req: the reasons of the hosts that
// meet the job's own constraints (--host, --label), joined, with the code
// most of them gave (those hosts' first: the text leads with what its
// code says); or, when none does, which constraint no host meets.
func pendingReason(hosts []*node, req Request, rejected []Rejection) Reason {
	var met []Rejection
	var codes []Code
	for _, r := range rejected {
		if r.Reason.Code != CodeHost && r.Reason.Code != CodeLabel {
			met = append(met, r)
			codes = append(codes, r.Reason.Code)
		}
	}
	switch {
	case len(met) > 0:
		code := dominant(codes)
		slices.SortStableFunc(met, func(a, b Rejection) int { return cmp.Compare(leads(a.Reason.Code, code), leads(b.Reason.Code, code)) })
		texts := make([]string, len(met))
		for i, r := range met {
			texts[i] = r.Host + ": " + r.Reason.Text
		}
		return because(code, strings.Join(texts, "; "))
	case len(hosts) == 0:
		return because(CodeNoHosts, "no hosts")
	case auto(req.Host):
		return because(CodeLabel, "no host has "+units.Plural(len(req.Labels), "label", "labels")+" "+strings.Join(req.Labels, ", "))
	}
	for _, r := range rejected {
		if r.Host == req.Host {
			return because(r.Reason.Code, r.Host+": "+r.Reason.Text)
		}
	}
	return because(CodeUnknownHost, "no host named "+req.Host)
}

// pendingCode is the code of pendingReason(hosts, req, rejected), worked
// out without its words.
func pendingCode(hosts []*node, req Request, rejected []Rejection) Code {
	met := func(r Rejection) bool { return r.Reason.Code != CodeHost && r.Reason.Code != CodeLabel }
	switch {
	case slices.ContainsFunc(rejected, met):
		return dominantOf(len(rejected), func(i int) Code {
			if !met(rejected[i]) {
				return ""
			}
			return rejected[i].Reason.Code
		})
	case len(hosts) == 0:
		return CodeNoHosts
	case auto(req.Host):
		return CodeLabel
	}
	for _, r := range rejected {
		if r.Host == req.Host {
			return r.Reason.Code
		}
	}
	return CodeUnknownHost
}

func auto(host string) bool { return host == "" || host == "auto" }
