package sched

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
)

// reasonWords are, for each reason code, the words its text says it
// with (any one of them) in the clause it leads with; and, for the codes
// that are about something other than gssh jobs, words that clause must
// not say (a code foreign whose text begins with a gssh job holding the
// GPU contradicts itself).
var reasonWords = map[Code]struct{ any, not []string }{
	CodeHost:            {any: []string{"not the requested host"}},
	CodeLabel:           {any: []string{"label"}, not: []string{"gssh job"}},
	CodeUnknownHost:     {any: []string{"no host named"}},
	CodeNoHosts:         {any: []string{"no hosts"}},
	CodeDrained:         {any: []string{"drained", "draining"}, not: []string{"gssh job", "free"}},
	CodeHostDown:        {any: []string{"unreachable", "driver", "timeout", "error"}, not: []string{"gssh job", "free"}},
	CodeNotProbed:       {any: []string{"not probed"}, not: []string{"gssh job"}},
	CodeNoGPUs:          {any: []string{"no GPUs", "no devices"}, not: []string{"gssh job"}},
	CodeTooFewGPUs:      {any: []string{"needed"}, not: []string{"gssh job"}},
	CodeUnhealthy:       {any: []string{"lost", "requires reset", "error state", "health unknown"}, not: []string{"gssh job"}},
	CodeMIG:             {any: []string{"MIG"}, not: []string{"gssh job"}},
	CodeNoFreeGPU:       {any: []string{"gssh job"}, not: []string{"other processes", "reserved"}},
	CodeOtherQueue:      {any: []string{"another gssh queue"}},
	CodeForeign:         {any: []string{"other processes", "invisible process", "unreadable"}, not: []string{"gssh job"}},
	CodeMem:             {any: []string{"usable", "free now", "memory unknown", "booked by gssh jobs"}, not: []string{"other processes"}},
	CodeCPUs:            {any: []string{"CPU"}},
	CodeHostMem:         {any: []string{"host memory"}},
	CodeBlocked:         {any: []string{"waiting behind job"}},
	CodeReserved:        {any: []string{"reserved for job"}, not: []string{"in use by"}},
	CodeHeld:            {any: []string{"held by"}},
	CodeDependency:      {any: []string{"waits for"}},
	CodeDependencyNever: {any: []string{"needs"}},
	CodeBegin:           {any: []string{"begins at"}},
	CodeArrayLimit:      {any: []string{"runs at most"}},
	CodeUserCap:         {any: []string{"cap"}},
	CodePreempted:       {any: []string{"preempted for job"}},
}

// nextClause is where a reason's text goes on to another host's or GPU
// group's reason: "; gpu02: drained", "; GPU 3: lost".
var nextClause = regexp.MustCompile(`; ([\w.-]+: |GPU )`)

// lead is the clause a reason's text leads with: its first host's or
// GPU group's reason.
func lead(text string) string {
	if loc := nextClause.FindStringIndex(text); loc != nil {
		return text[:loc[0]]
	}
	return text
}

// Every kind of reason, made by a plan as it happens, has a code and a
// text that say the same thing: the text leads with what its code names
// (the dominant code's hosts and GPUs first, when several reasons mix).
func TestReasonCodesAgreeWithText(t *testing.T) {
	now := t0
	pending := func(in Input, id job.ID) Reason {
		t.Helper()
		if in.Now.IsZero() {
			in.Now = now
		}
		d := Plan(in)
		for _, p := range d.Pending {
			if p.Job == id {
				return p.Reason
			}
		}
		for _, c := range d.Cancels {
			if c.Job == id {
				return c.Reason
			}
		}
		t.Fatalf("job %d neither pending nor cancelled: %+v", id, d)
		return Reason{}
	}
	rejection := func(hosts []Host, req Request, host string) Reason {
		t.Helper()
		dec := place(nodes(hosts, nil, ""), &want{Request: req, explain: true}, FitFirst)
		for _, r := range dec.rejected {
			if r.Host == host {
				return r.Reason
			}
		}
		t.Fatalf("%s not turned down: %+v", host, dec.rejected)
		return Reason{}
	}
	one := func(hosts []Host, run []job.Job, req Request) Reason {
		t.Helper()
		return pending(Input{Hosts: hosts, Running: run, Queue: []job.Job{queued(100, req)}}, 100)
	}
	idle := func(name string, n int) Host { return host(name, gpus(n, 80*GiB)...) }
	drained := idle("gpu02", 1)
	drained.Drain = true
	down := host("gpu03")
	down.Snapshot.State = gpuinfo.HostUnreachable
	unprobed := host("gpu04")
	unprobed.Snapshot.State = ""
	busy := running(1, "gpu01", 0, "GPU-00")
	other := idle("gpu01", 1)
	theirs := running(7, "gpu01", 0, "GPU-00")
	theirs.User = "bob"
	other.Others = []OtherJob{{Queue: "3f2a9c", Job: theirs}}
	lost := host("gpu01", with(gpu(0, 80*GiB), func(g *gpuinfo.GPU) { g.Health = gpuinfo.HealthLost }))
	// A reservation (EASY): job 10 waits for all 3 GPUs of gpu01 from
	// busy's end; job 11, without a walltime, may not take GPU 1 or 2.
	timed := busy
	timed.StartedAt, timed.Spec.Timeout = now, time.Hour
	held := queued(100, excl(1))
	held.Hold = &job.Hold{By: "alice", At: now}
	late := queued(100, excl(1))
	late.Spec.Begin = now.Add(time.Hour)
	array := func(task int) job.Job {
		j := queued(job.ID(100+task), excl(1))
		j.Spec.Array = &job.ArrayTask{Job: 100, Task: task, Tasks: 2, Limit: 1}
		return j
	}
	runningTask := running(100, "gpu01", 0, "GPU-00")
	runningTask.Spec.Array = &job.ArrayTask{Job: 100, Task: 0, Tasks: 2, Limit: 1}
	failed := endedJob(3, job.Failed, "exit status 3")

	cases := []struct {
		name string
		code Code
		got  Reason
	}{
		{"another host asked for", CodeHost, rejection([]Host{idle("gpu01", 1), idle("gpu02", 1)}, Request{Host: "gpu02", GPUs: 1}, "gpu01")},
		{"a label no host has", CodeLabel, one([]Host{idle("gpu01", 1)}, nil, Request{Host: "auto", Labels: []string{"h100"}, GPUs: 1})},
		{"no such host", CodeUnknownHost, one([]Host{idle("gpu01", 1)}, nil, Request{Host: "gpu09", GPUs: 1})},
		{"no hosts", CodeNoHosts, one(nil, nil, excl(1))},
		{"drained", CodeDrained, one([]Host{drained}, nil, excl(1))},
		{"down", CodeHostDown, one([]Host{down}, nil, excl(1))},
		{"not probed", CodeNotProbed, one([]Host{unprobed}, nil, excl(1))},
		{"no GPUs", CodeNoGPUs, one([]Host{host("gpu01")}, nil, excl(1))},
		{"too few GPUs", CodeTooFewGPUs, one([]Host{idle("gpu01", 1)}, nil, excl(2))},
		{"unhealthy", CodeUnhealthy, one([]Host{lost}, nil, excl(1))},
		{"MIG", CodeMIG, one([]Host{host("gpu01", migGPU(0))}, nil, excl(2))},
		{"in use by a gssh job", CodeNoFreeGPU, one([]Host{idle("gpu01", 1)}, []job.Job{busy}, excl(1))},
		{"another queue's job", CodeOtherQueue, one([]Host{other}, nil, excl(1))},
		{"another process", CodeForeign, one([]Host{host("gpu01", with(gpu(0, 80*GiB), foreign))}, nil, excl(1))},
		{"other processes on most GPUs, a gssh job on one", CodeForeign, one([]Host{host("gpu01",
			gpu(0, 80*GiB), with(gpu(1, 80*GiB), foreign), with(gpu(2, 80*GiB), foreign))}, []job.Job{busy}, excl(1))},
		{"memory", CodeMem, one([]Host{idle("gpu01", 1)}, nil, shared(1, 79*GiB))},
		{"CPUs", CodeCPUs, one([]Host{withHost(idle("gpu01", 1), []int{0, 1}, 64*GiB, 64*GiB)}, nil, booking(1, 4, 0))},
		{"host memory", CodeHostMem, one([]Host{withHost(idle("gpu01", 1), []int{0, 1}, 64*GiB, 64*GiB)}, nil, booking(1, 0, 128*GiB))},
		{"behind the head (backfill none)", CodeBlocked, pending(Input{Policy: Policy{Order: OrderFIFO, Backfill: BackfillNone}, Hosts: []Host{idle("gpu01", 2)},
			Running: []job.Job{busy}, Queue: []job.Job{queued(100, excl(2)), queued(101, excl(1))}}, 101)},
		{"reserved (EASY)", CodeReserved, pending(Input{Policy: Policy{Order: OrderFIFO, Backfill: BackfillEasy}, Hosts: []Host{idle("gpu01", 3)},
			Running: []job.Job{timed}, Queue: []job.Job{queued(10, excl(3)), queued(11, excl(1))}}, 11)},
		{"held", CodeHeld, pending(Input{Hosts: []Host{idle("gpu01", 1)}, Queue: []job.Job{held}}, 100)},
		{"a dependency", CodeDependency, pending(Input{Hosts: []Host{idle("gpu01", 2)}, Running: []job.Job{busy}, Queue: []job.Job{after(queued(100, excl(1)), job.AfterOK, 1)}}, 100)},
		{"a dependency never met", CodeDependencyNever, pending(Input{Hosts: []Host{idle("gpu01", 1)}, Deps: map[job.ID]job.Job{3: failed},
			Queue: []job.Job{after(queued(100, excl(1)), job.AfterOK, 3)}}, 100)},
		{"begin", CodeBegin, pending(Input{Hosts: []Host{idle("gpu01", 1)}, Queue: []job.Job{late}}, 100)},
		{"array limit", CodeArrayLimit, pending(Input{Hosts: []Host{idle("gpu01", 2)}, Running: []job.Job{runningTask}, Queue: []job.Job{array(1)}}, 101)},
		{"user cap", CodeUserCap, pending(Input{Policy: Policy{DefaultUser: Caps{MaxJobs: 1}}, Hosts: []Host{idle("gpu01", 2)},
			Running: []job.Job{busy}, Queue: []job.Job{queued(100, excl(1))}}, 100)},
	}
	// Preemption reasons are the victims'.
	pre := Plan(rebalanceIn([]Host{host("gpu01", gpu(0, 80*GiB))}, []job.Job{victim(1, "bob", 6, time.Hour, "gpu01", "GPU-00")}, waiter(2, "alice", 4, 1)))
	if len(pre.Preempts) != 1 {
		t.Fatalf("no preemption: %+v", pre)
	}
	cases = append(cases, struct {
		name string
		code Code
		got  Reason
	}{"preempted", CodePreempted, pre.Preempts[0].Reason})

	// A drained majority leads the text of a job turned down by a busy
	// host too.
	twoDrained := []Host{idle("gpu01", 1), drained, func() Host { h := idle("gpu05", 1); h.Drain = true; return h }()}
	cases = append(cases, struct {
		name string
		code Code
		got  Reason
	}{"drained hosts, and a busy one", CodeDrained, one(twoDrained, []job.Job{busy}, excl(1))})

	covered := map[Code]bool{}
	for _, c := range cases {
		covered[c.code] = true
		words, ok := reasonWords[c.code]
		if !ok {
			t.Errorf("%s: code %s has no words in reasonWords", c.name, c.code)
			continue
		}
		first := lead(c.got.Text)
		switch {
		case c.got.Code != c.code:
			t.Errorf("%s: code %q, want %q (text %q)", c.name, c.got.Code, c.code, c.got.Text)
		case !slices.ContainsFunc(words.any, func(w string) bool { return strings.Contains(first, w) }):
			t.Errorf("%s: code %s, but its text leads with %q, which says none of %q (text %q)", c.name, c.code, first, words.any, c.got.Text)
		}
		for _, w := range words.not {
			if strings.Contains(first, w) {
				t.Errorf("%s: code %s, but its text leads with %q, which says %q (text %q)", c.name, c.code, first, w, c.got.Text)
			}
		}
	}
	for code := range reasonWords {
		if !covered[code] {
			t.Errorf("code %s: no case makes it", code)
		}
	}
	for _, code := range codeRank {
		if _, ok := reasonWords[code]; !ok {
			t.Errorf("code %s (in codeRank) has no words in reasonWords", code)
		}
	}
}

// Every code reads back as its constant, the very string a plan gives
// (a controller keeps the reasons it reads so, and compares them with
// the plan's at once), and a name that is no code as none.
func TestKnownCodes(t *testing.T) {
	for _, c := range append(slices.Clone(codeRank), jobCodes...) {
		got, ok := Known(strings.Clone(string(c)))
		if !ok || got != c || unsafe.StringData(string(got)) != unsafe.StringData(string(c)) {
			t.Errorf("Known(%q) = %q, %v: want the constant", c, got, ok)
		}
	}
	for _, s := range []string{"", "Reserved", "reserved ", "queued"} {
		if c, ok := Known(s); ok {
			t.Errorf("Known(%q) = %q: no such code", s, c)
		}
	}
}
