// Package sched is gssh's scheduling core: it parses what users ask for
// (ParseMem, ParseWalltime), checks at submit time whether a request can ever
// fit (Validate) and places jobs on GPUs (Place).
//
// It is pure: no I/O, no clock, no SSH, no database. Given the same inputs
// it returns the same answer, and every host it turns down comes with a
// reason a user can act on.
package sched
