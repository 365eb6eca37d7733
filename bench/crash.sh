#!/usr/bin/env bash
# The controller-crash soak: TestControllerCrash (faults/crash_test.go) at
# its full length. It SIGKILLs `gssh submit`, `gssh schedule` and
# `gssh cancel` at random points of CYCLES submit + pass cycles over three
# loopback sshd hosts and the local host, then checks on the workers that
# no job ran twice, that every job a submit reported is in the state, and
# that clean passes end every job. make test runs a shorter version of
# the same test (20 cycles).
#
#   bash bench/crash.sh               # CYCLES=200, a fresh seed
#   SEED=123 bash bench/crash.sh      # the random choices of a failed run again
# Needs sshd (openssh-server). The summary line lands in bench/out/crash.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
export GSSH_CRASH_CYCLES=${CYCLES:-200}
[ -z "${SEED:-}" ] || export GSSH_CRASH_SEED=$SEED
mkdir -p bench/out
go test -count=1 -timeout 30m -run '^TestControllerCrash$' -v ./faults/ 2>&1 | tee bench/out/crash.txt | grep -E '^(---|ok|FAIL|PASS)|crash_test.go'
