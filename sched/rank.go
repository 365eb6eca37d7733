package sched

import "github.com/gssh/gssh/job"

// option is a host that can take a job, with every unit that fits.
type option struct {
	host  *node
	units []*unit // in index order; at least as many as the job needs
}

// choose picks, among the feasible options (in host-name order), the
// host and GPUs a job of want GPUs gets under fit.
//
// FitFirst takes the first host in name order and its first units in
// index order: predictable, and it leaves the hosts late in the order
// free for big jobs. (Best-fit ranking comes with the fair-queue issue.)
func choose(fit Fit, options []option, want int) job.Placement {
	o := options[0]
	return placement(o.host.Name, o.units[:want])
}

func placement(host string, us []*unit) job.Placement {
	p := job.Placement{Host: host, GPUs: make([]string, len(us)), Indexes: make([]int, len(us))}
	for i, u := range us {
		p.GPUs[i], p.Indexes[i] = u.id, u.index
	}
	return p
}

// decision is where one job goes, or why it cannot go anywhere now.
type decision struct {
	placement job.Placement // set when ok
	ok        bool
	reason    Reason      // why not, when !ok
	rejected  []Rejection // every host turned down, in host-name order
	// exhausted: some host that meets the job's constraints turned it
	// down only for what is taken now (Code.Exhausted).
	exhausted bool
}

// place puts w on one of hosts (in name order) under fit, without booking
// it.
func place(hosts []*node, w *want, fit Fit) decision {
	var d decision
	var options []option
	for _, n := range hosts {
		us, why := feasible(n, w)
		if !why.ok() {
			d.rejected = append(d.rejected, Rejection{Host: n.Name, Reason: why})
			d.exhausted = d.exhausted || why.Code.Exhausted()
			continue
		}
		options = append(options, option{n, us})
	}
	if len(options) == 0 {
		d.reason = pendingReason(hosts, w.Request, d.rejected)
		return d
	}
	d.ok, d.placement = true, choose(fit, options, max(w.GPUs, 1))
	return d
}
