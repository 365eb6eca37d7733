package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/gpuinfo"
	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/units"
)

// withHost gives h host facts: CPU ids (their count is the CPU count) and
// memory total and available in bytes.
func withHost(h Host, ids []int, total, avail uint64) Host {
	n := len(ids)
	h.Snapshot.HostInfo = &gpuinfo.HostInfo{CPUs: &n, CPUIDs: ids, MemTotal: &total, MemAvailable: &avail}
	return h
}

// booking is a request for GPUs with host CPUs and memory.
func booking(gpus, cpus int, hostMem uint64) Request {
	return Request{Host: "auto", GPUs: gpus, MemPerGPU: 0, CPUs: cpus, HostMem: hostMem}
}

// runningHost is running with host CPUs pinned to ids and hostMem booked.
func runningHost(id job.ID, host string, ids []int, hostMem uint64, gpus ...string) job.Job {
	j := running(id, host, 0, gpus...)
	j.Spec.CPUs, j.Spec.HostMem, j.Placement.CPUs = len(ids), hostMem, ids
	return j
}

func startOf(d Decisions, id job.ID) (job.Placement, bool) {
	for _, s := range d.Starts {
		if s.Job == id {
			return s.Placement, true
		}
	}
	return job.Placement{}, false
}

func pendingOf(t *testing.T, d Decisions, id job.ID) Pending {
	t.Helper()
	for _, p := range d.Pending {
		if p.Job == id {
			return p
		}
	}
	t.Fatalf("job %d not pending: %+v", id, d)
	return Pending{}
}

// TestHostCPUs: CPUs are booked like GPU memory, the lowest free ids
// first; a job without --cpus is not checked.
func TestHostCPUs(t *testing.T) {
	h := withHost(host("gpu01", gpus(4, 80*GiB)...), []int{0, 2, 5, 7}, 64*GiB, 60*GiB)
	run := []job.Job{runningHost(1, "gpu01", []int{2}, 0, "GPU-00")}
	d := Plan(Input{Hosts: []Host{h}, Running: run, Queue: []job.Job{
		queued(2, booking(1, 2, 0)), // 0 and 5: 2 is job 1's
		queued(3, booking(1, 2, 0)), // 1 left
		queued(4, booking(1, 1, 0)), // 7
		queued(5, booking(1, 0, 0)), // no --cpus: all CPUs booked makes no difference
	}})
	if p, ok := startOf(d, 2); !ok || !slices.Equal(p.CPUs, []int{0, 5}) {
		t.Errorf("job 2: %+v %v, want CPUs 0,5", p, ok)
	}
	if p, ok := startOf(d, 4); !ok || !slices.Equal(p.CPUs, []int{7}) {
		t.Errorf("job 4: %+v %v, want CPU 7", p, ok)
	}
	if p, ok := startOf(d, 5); !ok || p.CPUs != nil {
		t.Errorf("job 5 (no --cpus): %+v %v, want started unpinned", p, ok)
	}
	if p := pendingOf(t, d, 3); p.Reason.Code != CodeCPUs || p.Reason.Text != "gpu01: 1 of 4 CPUs left, booked by gssh jobs" || !p.Exhausted {
		t.Errorf("job 3: %+v", p)
	}

	// The ids a job is pinned to stay its own, even past its count (a
	// record whose pinning is wider than its booking).
	wide := runningHost(1, "gpu01", []int{0, 2}, 0, "GPU-00")
	wide.Spec.CPUs = 1
	if p := plan1([]Host{h}, []job.Job{wide}, booking(1, 3, 0)).Pending[0]; p.Reason.Code != CodeCPUs {
		t.Errorf("wide pinning: %+v", p)
	}

	// More than the host has; facts unknown; count without ids.
	if p := plan1([]Host{h}, nil, booking(1, 5, 0)).Pending[0]; p.Reason != (Reason{CodeCPUs, "gpu01: 5 CPUs requested, the host has 4"}) {
		t.Errorf("too many: %+v", p.Reason)
	}
	bare := host("gpu02", gpus(1, 80*GiB)...)
	if p := plan1([]Host{bare}, nil, booking(1, 1, 0)).Pending[0]; p.Reason.Code != CodeCPUs || !strings.Contains(p.Reason.Text, "gpu02: CPU count unknown") {
		t.Errorf("unknown: %+v", p.Reason)
	}
	if d := plan1([]Host{bare}, nil, booking(1, 0, 0)); len(d.Starts) != 1 {
		t.Errorf("unknown facts block a job without --cpus: %+v", d)
	}
	counted := host("gpu03", gpus(2, 80*GiB)...)
	n := 2
	counted.Snapshot.HostInfo = &gpuinfo.HostInfo{CPUs: &n}
	d = Plan(Input{Hosts: []Host{counted}, Queue: []job.Job{queued(1, booking(1, 2, 0)), queued(2, booking(1, 1, 0))}})
	if p, ok := startOf(d, 1); !ok || p.CPUs != nil {
		t.Errorf("ids unknown: %+v %v, want started unpinned", p, ok)
	}
	if p := pendingOf(t, d, 2); p.Reason.Text != "gpu03: 0 of 2 CPUs left, booked by gssh jobs" {
		t.Errorf("ids unknown, count booked: %+v", p.Reason)
	}
}

// TestHostMem: host memory is booked against MemTotal and never more than
// MemAvailable once the jobs placed in this plan take theirs.
func TestHostMem(t *testing.T) {
	ids := []int{0, 1, 2, 3}
	h := withHost(host("gpu01", gpus(4, 80*GiB)...), ids, 64*GiB, 60*GiB)
	run := []job.Job{runningHost(1, "gpu01", nil, 40*GiB, "GPU-00")}
	for _, c := range []struct {
		host  Host
		mem   uint64
		start bool
		why   string
	}{
		{h, 20 * GiB, true, ""},
		{h, 30 * GiB, false, "gpu01: 30.0 GiB host memory requested, 24.0 GiB of 64.0 GiB left, booked by gssh jobs"},
		{h, 65 * GiB, false, "gpu01: 65.0 GiB host memory requested, the host has 64.0 GiB"},
		{withHost(h, ids, 64*GiB, 10*GiB), 20 * GiB, false, "gpu01: 20.0 GiB host memory requested, only 10.0 GiB available now"},
		{withHost(h, ids, 64*GiB, 10*GiB), 10 * GiB, true, ""},
	} {
		d := plan1([]Host{c.host}, run, booking(1, 0, c.mem))
		if c.start != (len(d.Starts) == 1) || !c.start && d.Pending[0].Reason != (Reason{CodeHostMem, c.why}) {
			t.Errorf("%s of %s available: %+v, want start %v %q", units.FormatMem(c.mem), units.FormatMem(*c.host.Snapshot.HostInfo.MemAvailable), d, c.start, c.why)
		}
	}
	// Jobs placed in one plan have allocated nothing yet: the second does
	// not fit in what is available, though the ledger has room.
	tight := withHost(h, ids, 64*GiB, 30*GiB)
	d := Plan(Input{Hosts: []Host{tight}, Queue: []job.Job{queued(1, booking(1, 0, 20*GiB)), queued(2, booking(1, 0, 20*GiB))}})
	if _, ok := startOf(d, 1); !ok {
		t.Fatalf("job 1 not started: %+v", d)
	}
	if p := pendingOf(t, d, 2); p.Reason.Text != "gpu01: 20.0 GiB host memory requested, only 10.0 GiB available now" {
		t.Errorf("job 2: %+v", p.Reason)
	}
	// MemTotal unknown: turned down; MemAvailable unknown: the ledger alone.
	noTotal := withHost(h, ids, 0, 0)
	noTotal.Snapshot.HostInfo.MemTotal, noTotal.Snapshot.HostInfo.MemAvailable = nil, nil
	if p := plan1([]Host{noTotal}, nil, booking(1, 0, GiB)).Pending[0]; p.Reason.Code != CodeHostMem || !strings.Contains(p.Reason.Text, "host memory unknown") {
		t.Errorf("no MemTotal: %+v", p.Reason)
	}
	noAvail := withHost(h, ids, 64*GiB, 0)
	noAvail.Snapshot.HostInfo.MemAvailable = nil
	if d := plan1([]Host{noAvail}, run, booking(1, 0, 24*GiB)); len(d.Starts) != 1 {
		t.Errorf("no MemAvailable, ledger room: %+v", d)
	}
}

// TestHostBookingReservation: under EASY backfill a job waiting for CPUs
// gets a reservation from the end of the job that holds them.
func TestHostBookingReservation(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)
	// Job 1 uses most of what it booked: only its end makes room.
	h := withHost(host("gpu01", gpus(2, 80*GiB)...), []int{0, 1, 2, 3}, 64*GiB, 12*GiB)
	hog := runningHost(1, "gpu01", []int{0, 1, 2}, 50*GiB, "GPU-00")
	hog.StartedAt, hog.Spec.Timeout = now.Add(-time.Hour), 2*time.Hour
	for _, req := range []Request{booking(1, 2, 0), booking(1, 0, 20*GiB)} {
		d := Plan(Input{Now: now, Hosts: []Host{h}, Running: []job.Job{hog}, Queue: []job.Job{queued(2, req)}, Policy: Policy{Backfill: BackfillEasy}})
		p := pendingOf(t, d, 2)
		if r := p.Reservation; r == nil || r.Host != "gpu01" || !r.From.Equal(now.Add(time.Hour)) || !p.Exhausted {
			t.Errorf("%+v: pending %+v reservation %+v; want gpu01 from job 1's end", req, p, r)
		}
		f := ForecastStart(Input{Now: now, Hosts: []Host{h}, Running: []job.Job{hog}, Queue: []job.Job{queued(2, req)}}, 2, nil)
		if !f.Start.Equal(now.Add(time.Hour)) || req.CPUs > 0 && !slices.Equal(f.Placement.CPUs, []int{0, 1}) {
			t.Errorf("%+v: forecast %+v", req, f)
		}
	}
}

// TestHostBookingProperties: over random hosts and queues the memo changes
// nothing, and what starts never books more CPUs or host memory than a
// host has, nor pins two jobs to one CPU.
func TestHostBookingProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for round := range 150 {
		var hosts []Host
		for i := range 1 + rng.IntN(3) {
			h := host(fmt.Sprintf("gpu%02d", i), gpus(1+rng.IntN(6), 80*GiB)...)
			switch rng.IntN(4) {
			case 0: // no host facts
			case 1:
				n := 1 + rng.IntN(8)
				h.Snapshot.HostInfo = &gpuinfo.HostInfo{CPUs: &n, MemTotal: ptr(uint64(16+rng.IntN(48)) * GiB)}
			default:
				var ids []int
				for id := range 16 {
					if rng.IntN(2) == 0 {
						ids = append(ids, id)
					}
				}
				total := uint64(16+rng.IntN(48)) * GiB
				h = withHost(h, ids, total, total-uint64(rng.IntN(8))*GiB)
			}
			hosts = append(hosts, h)
		}
		var queue []job.Job
		for id := range 1 + rng.IntN(30) {
			r := booking(1+rng.IntN(2), 0, 0)
			if rng.IntN(2) == 0 {
				r.CPUs = 1 + rng.IntN(5)
			}
			if rng.IntN(2) == 0 {
				r.HostMem = uint64(1+rng.IntN(24)) * GiB
			}
			if rng.IntN(3) == 0 {
				r.MemPerGPU = uint64(1+rng.IntN(40)) * GiB
			}
			queue = append(queue, queued(job.ID(id+1), r))
		}
		in := Input{Hosts: hosts, Queue: queue, Policy: []Policy{{}, {Backfill: BackfillEasy}, {Fit: FitFirst}}[round%3]}
		d := Plan(in)
		if slow := plan(in, false, nil); !reflect.DeepEqual(d, slow) {
			t.Fatalf("round %d: the memo changed the plan", round)
		}
		spec := map[job.ID]job.Spec{}
		for _, j := range queue {
			spec[j.ID] = j.Spec
		}
		cpus, mem, pinned := map[string]int{}, map[string]uint64{}, map[string]map[int]bool{}
		for _, s := range d.Starts {
			sp, p := spec[s.Job], s.Placement
			cpus[p.Host] += sp.CPUs
			mem[p.Host] += sp.HostMem
			var hi *gpuinfo.HostInfo
			for _, h := range hosts {
				if h.Name == p.Host {
					hi = h.Snapshot.HostInfo
				}
			}
			if (sp.CPUs > 0 || sp.HostMem > 0) && hi == nil {
				t.Fatalf("round %d: job %d booked host resources on %s, whose facts are unknown", round, s.Job, p.Host)
			}
			switch {
			case sp.CPUs == 0 && p.CPUs != nil:
				t.Fatalf("round %d: job %d pinned without --cpus", round, s.Job)
			case sp.CPUs > 0 && hi.CPUIDs != nil && len(p.CPUs) != sp.CPUs:
				t.Fatalf("round %d: job %d pinned to %v for --cpus %d", round, s.Job, p.CPUs, sp.CPUs)
			}
			if pinned[p.Host] == nil {
				pinned[p.Host] = map[int]bool{}
			}
			for _, id := range p.CPUs {
				if pinned[p.Host][id] || !slices.Contains(hi.CPUIDs, id) {
					t.Fatalf("round %d: job %d pinned to CPU %d of %s (ids %v; taken %v)", round, s.Job, id, p.Host, hi.CPUIDs, pinned[p.Host])
				}
				pinned[p.Host][id] = true
			}
			if hi != nil && (hi.CPUs != nil && cpus[p.Host] > *hi.CPUs || hi.MemTotal != nil && mem[p.Host] > *hi.MemTotal ||
				hi.MemAvailable != nil && mem[p.Host] > *hi.MemAvailable) {
				t.Fatalf("round %d: %s overbooked: %d CPUs, %s", round, p.Host, cpus[p.Host], units.FormatMem(mem[p.Host]))
			}
		}
	}
}

func TestValidateHostResources(t *testing.T) {
	small := withHost(host("gpu01", gpus(2, 24*GiB)...), []int{0, 1, 2, 3}, 16*GiB, 8*GiB)
	big := withHost(host("gpu02", gpus(2, 24*GiB)...), []int{0, 1, 2, 3, 4, 5, 6, 7}, 64*GiB, 8*GiB)
	bare := host("gpu03", gpus(2, 24*GiB)...)
	for _, c := range []struct {
		hosts []Host
		req   Request
		err   string
	}{
		{[]Host{small, big}, booking(1, 8, 64*GiB), ""},
		{[]Host{small, big}, booking(1, 9, 0), "--cpus 9: more CPUs than any host has (the most is 8, on gpu02); give --cpus 8 or less"},
		{[]Host{small, big}, Request{Host: "gpu01", GPUs: 1, CPUs: 5}, "--cpus 5: more CPUs than gpu01 has (the most is 4, on gpu01); give --cpus 4 or less"},
		{[]Host{small, big}, booking(1, 0, 65*GiB), "--host-mem 65.0 GiB: more host memory than any host has (the most is 64.0 GiB, on gpu02); give --host-mem 65536M or less"},
		{[]Host{bare}, booking(1, 1, 0), "--cpus 1: any host reports no CPU count"},
		{[]Host{bare}, booking(1, 0, GiB), "--host-mem 1.0 GiB: any host reports no memory size"},
		{[]Host{bare}, booking(1, 0, 0), ""},
	} {
		err := Validate(c.hosts, c.req)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.req, err, c.err)
		}
	}
}
