package fleet

import (
	"time"

	"github.com/gssh/gssh/probe"
)

// GPUsSchema names the version of the `gssh gpus --json` document. Fields
// are only ever added within one version.
const GPUsSchema = "gssh.gpus/v1"

// GPUsDoc is the document `gssh gpus --json` prints.
type GPUsDoc struct {
	Schema string    `json:"schema"` // GPUsSchema
	Time   time.Time `json:"time"`   // when the probe finished (RFC 3339)
	Hosts  []HostDoc `json:"hosts"`  // in inventory order
}

// HostDoc is one host of GPUsDoc: its probe.Snapshot (name, state, error,
// source, driver, warnings, gpus with memory in bytes) and where it was
// reached.
type HostDoc struct {
	probe.Snapshot
	Address string   `json:"address"` // "local" or user@host:port [via jumps]
	Labels  []string `json:"labels"`
	Drain   bool     `json:"drain"`
	ProbeMS float64  `json:"probe_ms"` // wall time of this host's probe, connect included
}

// NewGPUsDoc builds the document from reports.
func NewGPUsDoc(now time.Time, reports []Report) GPUsDoc {
	doc := GPUsDoc{Schema: GPUsSchema, Time: now.UTC().Truncate(time.Millisecond), Hosts: []HostDoc{}}
	for _, r := range reports {
		s := r.Snapshot
		if s.Warnings == nil {
			s.Warnings = []string{}
		}
		if s.GPUs == nil {
			s.GPUs = []probe.GPU{}
		}
		for i := range s.GPUs {
			if s.GPUs[i].Procs == nil {
				s.GPUs[i].Procs = []probe.Proc{}
			}
		}
		labels := r.Host.Labels
		if labels == nil {
			labels = []string{}
		}
		doc.Hosts = append(doc.Hosts, HostDoc{Snapshot: s, Address: r.Address, Labels: labels, Drain: r.Host.Drain,
			ProbeMS: float64(r.Took.Microseconds()) / 1000})
	}
	return doc
}
