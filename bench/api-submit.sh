#!/usr/bin/env bash
# Submits through gssh serve's HTTP API, on one loopback OpenSSH host
# (a100x4): bench/apiload runs SUBMITTERS goroutines submitting jobs back
# to back for DURATION, while CLIENTS clients each list the first page of
# jobs (100) once a second and follow one job's log. The jobs queue
# (--gpus 4: the host's GPUs 0-2 are busy with other processes), as a
# burst of sbatch does; the followed job prints a line a second.
#
#   bash bench/api-submit.sh     # SUBMITTERS=100 CLIENTS=100 DURATION=60s ASYNC=1
# Needs sshd (openssh-server). Results go to bench/out/api-submit.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SUBMITTERS=${SUBMITTERS:-100}
# ASYNC=1: each submit answers once its job is stored (as sbatch does),
# the pass after it; ASYNC=0: once the pass that places it has run.
ASYNC=${ASYNC:-1}
CLIENTS=${CLIENTS:-100}
DURATION=${DURATION:-60s}
PORT=${PORT:-22931}
. bench/lib.sh
bench_need curl
[ -n "${NOBUILD:-}" ] || make -s build
go build -o bin/apiload ./bench/apiload
bench_init gssh-bench-api
bench_host w1 22920 a100x4
printf 'hosts:\n  - name: w1\n' > "$W/hosts.yaml"
sleep 0.3
export HOME=$W/home SSH_AUTH_SOCK= GSSH_INVENTORY=$W/hosts.yaml GSSH_STATE=$W/state.db
G="$PWD/bin/gssh --ssh-config $W/ssh_config"
$G token create --name bench > "$W/token" 2>/dev/null
$G serve --listen "$PORT" >"${SERVE_LOG:-$W/serve.log}" 2>&1 & BENCH_PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
auth="Authorization: Bearer $(cat "$W/token")"
follow=$(curl -sf -H "$auth" -d '{"command": "for i in $(seq 600); do echo line $i; sleep 1; done", "mem": "100M"}' \
  "http://127.0.0.1:$PORT/v1/jobs" | sed -n 's/.*"id": \([0-9]*\).*/\1/p')
mkdir -p bench/out
{
  echo "| submitters | submits | rate | submit errors | p50 | p99 | slowest | ids unique | not listed | lists (errors) | log streams |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  bin/apiload -url "http://127.0.0.1:$PORT" -token-file "$W/token" -submitters "$SUBMITTERS" -clients "$CLIENTS" \
    -duration "$DURATION" -follow "$follow" -async="$ASYNC" || echo "(apiload: failures, see above)"
} | tee bench/out/api-submit.md
