// Package faults holds no code: its tests put the real gssh binary
// through faults a controller meets in a lab and check that nothing is
// lost and nothing runs twice.
//
//   - TestControllerCrash kills `gssh submit`, `gssh schedule` and
//     `gssh cancel` with SIGKILL at random points of many submit + pass
//     cycles over a fleet of real OpenSSH hosts on loopback (with the fake
//     nvidia-smi) and the local host, then checks on the workers that each
//     job's command ran at most once, that every job a submit reported is
//     in the state, and that a few clean passes end every job. Its cycle
//     count is GSSH_CRASH_CYCLES (CI runs fewer; bench/crash.sh runs 200)
//     and its random choices come from GSSH_CRASH_SEED (printed on failure).
//   - TestInterruptedController sends SIGINT and SIGTERM to `gssh submit`
//     and `gssh schedule` at points across their run (fractions of what
//     each took when left alone), then checks that every process of the
//     queue's jobs on the worker is a running job's current attempt and
//     that cancelling every job leaves none.
//   - TestStateDiskFull puts the state file on a small tmpfs, fills it, and
//     checks that commands fail saying so, that nothing stored is lost or
//     damaged, and that gssh works again once there is room.
//
// The tests build the gssh binary once (go build) and run it as
// subprocesses, as cron and users do. They live in their own package so
// that `go test ./...` runs them beside cmd/gssh's long scripts, not after.
package faults
