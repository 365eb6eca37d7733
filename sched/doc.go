// Package sched is gssh's scheduling core. Plan is the queue planner: given
// the whole queue, the running jobs with their bookings, every host's
// facts and snapshot, a Policy and the time, it orders the queue, places
// jobs one after another while booking what each takes, and returns the
// starts plus a reason (prose and a short Code) for every job left queued.
// The controller's pass, `gssh submit --dry-run` and (later) the trace
// simulator all call it.
//
// Placement is a chain in the manner of Nomad's scheduler: feasibility
// checks per host and per GPU (feasible.go) that each turn a host or GPU
// down with a reason, then a choice among the hosts left (rank.go), then
// the reasons joined for people (reasons.go). The package also checks at
// submit time whether a request can ever fit (Validate); what users type
// (--mem, --timeout) is read by package units.
//
// It is pure: no I/O, no clock (the time is an input), no SSH, no database;
// it imports only job, gpuinfo, units and the standard library. Given the same
// inputs it returns the same answer: hosts go by name, GPUs by index, ties
// by job id.
package sched
