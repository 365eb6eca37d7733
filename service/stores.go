package service

import (
	"github.com/gssh/gssh/control"
	"github.com/gssh/gssh/state"
)

// stores is the state a controller works on, each capability of it named
// as control.Options names it, so that what a pass gets is written where
// the stores are opened, never found out by a type assertion. A nil
// field is a capability the store does not have.
type stores struct {
	queue   control.Store
	cluster func() (string, error) // the state's cluster id; nil: "" (no state file yet)
	ledger  control.HostLedger     // host records: failed contacts, down hosts, strays
	keeper  control.Keeper         // housekeeping: the history, job directories due
	jobs    control.JobLister      // every job, ended ones too (the reaper's)
	drains  control.DrainBook      // the hosts drained with gssh drain
}

// fileStores is a state file: it has every capability.
func fileStores(st *state.Bolt) stores {
	return stores{queue: st, cluster: st.ClusterID, ledger: st, keeper: st, jobs: st, drains: st}
}

// memStores is a store without a file (a dry run before the first
// submit, the reaper's classification without a state): a queue, its
// history and listing; no host records and no drains, nothing having
// been recorded yet.
func memStores(m *state.Mem) stores {
	return stores{queue: m, keeper: m, jobs: m}
}
