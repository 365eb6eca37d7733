#!/usr/bin/env bash
# Submits through gssh serve, on one loopback OpenSSH host (a100x4):
#  1. submit-to-running latency of `gssh submit` (a fresh CLI process)
#     through a running gssh serve, against one fresh `ssh host true`,
#     measured in the same hyperfine run;
#  2. a burst of N concurrent `gssh submit` processes through it: how many
#     succeed, whether their ids are unique, and the median and worst time
#     each took, for jobs that start at once (--mem 100M) and for jobs that
#     queue (--gpus 4: the host's GPUs 0-2 are busy with other processes).
#
#   bash bench/serve-submit.sh        # RUNS=20 N=200
#   GPU_INTERVAL=0 bash bench/serve-submit.sh   # no GPU streams: each pass probes
# Needs sshd (openssh-server) and hyperfine. Results go to bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
N=${N:-200}
. bench/lib.sh
bench_need hyperfine ssh
make -s build
bench_init gssh-bench-serve-submit
bench_host w1 22910 a100x4
printf 'hosts:\n  - name: w1\n' > "$W/hosts.yaml"
sleep 0.3
export HOME=$W/home SSH_AUTH_SOCK= GSSH_INVENTORY=$W/hosts.yaml GSSH_STATE=$W/state.db
G="$PWD/bin/gssh --ssh-config $W/ssh_config"
$G serve --interval 2s --gpu-interval "${GPU_INTERVAL:-2s}" >"${SERVE_LOG:-$W/serve.log}" 2>&1 & BENCH_PIDS+=($!)
for _ in $(seq 100); do [ -S "$W/state.db.sock" ] && break; sleep 0.1; done
export GSSH_SERVER=$W/state.db.sock # every submit through gssh serve, or an error
mkdir -p bench/out

# 1. One submit at a time.
hyperfine -N --warmup 2 --runs "$RUNS" --export-markdown bench/out/serve-submit.md --export-json bench/out/serve-submit.json \
  -n "ssh host true" "ssh -F $W/ssh_config w1 true" \
  -n "gssh submit through gssh serve (returns running)" "$G submit --workdir ~ --mem 100M -- sleep 30"
$G ps | tail -n +2 | cut -f1 | xargs -r $G cancel --grace 1s >/dev/null 2>&1 || true

# 2. N at once.
burst() { # burst NAME ARGS...: N concurrent submits of ARGS
  local name=$1; shift
  local d=$W/burst-${name%% *}-$RANDOM; mkdir -p "$d"
  for i in $(seq "$N"); do
    (s=$(date +%s%N); $G submit --workdir ~ "$@" >"$d/out.$i" 2>&1; rc=$?; echo "$rc $(( ($(date +%s%N) - s) / 1000000 ))" >"$d/t.$i") &
  done
  wait
  local ok ids uniq
  ok=$(cat "$d"/t.* | awk '$1 == 0' | wc -l)
  ids=$(cat "$d"/out.* | sed -n 's/^job \([0-9]*\) .*/\1/p' | wc -l)
  uniq=$(cat "$d"/out.* | sed -n 's/^job \([0-9]*\) .*/\1/p' | sort -u | wc -l)
  cat "$d"/t.* | awk '{print $2}' | sort -n | awk -v name="$name" -v n="$N" -v ok="$ok" -v ids="$ids" -v uniq="$uniq" \
    '{ a[NR] = $1 } END { printf "| %s | %d | %d/%d | %d of %d unique | %d ms | %d ms |\n", name, n, ok, n, uniq, ids, a[int((NR + 1) / 2)], a[NR] }'
  grep -L '^job [0-9]* \(running\|queued\)' "$d"/out.* | head -3 | while read -r f; do cat "$f"; done >&2
}
{
  echo "| burst | submits | exit 0 | job ids | median | slowest |"
  echo "| --- | --- | --- | --- | --- | --- |"
  burst "jobs that queue (--gpus 4)" --gpus 4 -- true
  $G ps | tail -n +2 | cut -f1 | xargs -r $G cancel --grace 1s >/dev/null 2>&1 || true
  burst "jobs that start (--mem 100M)" --mem 100M -- sleep 30
  $G ps | tail -n +2 | cut -f1 | xargs -r $G cancel --grace 1s >/dev/null 2>&1 || true
} | tee bench/out/serve-burst.md
cat bench/out/serve-submit.md
