#!/usr/bin/env bash
# Submit-to-running latency: `gssh submit` returns when the job runs on the
# worker. Compared in the same run with one fresh `ssh host true` and one
# fresh `ssh host 'nohup cmd >log 2>&1 &'` (a new process cannot reuse a
# connection; reused-connection targets come with the daemon).
#
#   bash bench/submit.sh          # RUNS=10
# Needs sshd (openssh-server) and hyperfine. Results go to bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
. bench/lib.sh
bench_need hyperfine ssh
make -s build
bench_init gssh-bench-submit
bench_host w1 22900 a100x4
printf 'hosts:\n  - name: w1\n' > "$W/hosts.yaml"
sleep 0.3
export HOME=$W/home SSH_AUTH_SOCK= GSSH_INVENTORY=$W/hosts.yaml GSSH_STATE=$W/state.db
G="bin/gssh --ssh-config $W/ssh_config"
# Every run submits a shared job (--mem) so they never run out of GPUs.
mkdir -p bench/out
hyperfine -N --warmup 1 --runs "$RUNS" --export-markdown bench/out/submit.md --export-json bench/out/submit.json \
  -n "ssh host true" "ssh -F $W/ssh_config w1 true" \
  -n "ssh host 'nohup cmd &'" "ssh -F $W/ssh_config w1 'nohup sleep 30 >/dev/null 2>&1 </dev/null &'" \
  -n "gssh submit (returns running)" "$G submit --workdir ~ --mem 100M -- sleep 30"
$G ps | tail -n +2 | wc -l | xargs echo "jobs running:"
$G ps | tail -n +2 | cut -f1 | xargs -r $G cancel --grace 1s >/dev/null
cat bench/out/submit.md
