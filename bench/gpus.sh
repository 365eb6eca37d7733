#!/usr/bin/env bash
# Fan-out benchmark: `gssh gpus` against `pdsh -R ssh` and a sequential ssh
# loop, over N loopback OpenSSH hosts whose nvidia-smi is the fake that
# replays probe/testdata/fleet/a100x4. Every tool runs the same probe script
# (probe.SMIScript: the GPU query, the compute-apps query, -L and ps; pdsh
# and ssh run it from a file, which the loopback hosts share). Then the warm
# case: `gssh gpus` answered by a running `gssh serve` (a fresh gssh process
# each time, the daemon's connections open), against a parallel ssh loop
# over OpenSSH ControlMaster connections opened beforehand.
#
#   bash bench/gpus.sh            # N = 1 8 32, hyperfine --runs 10
#   NS="8" RUNS=5 bash bench/gpus.sh
#   COLD=0 bash bench/gpus.sh     # the warm case alone
#
# Needs: sshd (openssh-server), pdsh, hyperfine; run as root or as a user
# that may start sshd. Results go to bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=${NS:-"1 8 32"}
RUNS=${RUNS:-10}
FIXTURE=${FIXTURE:-a100x4}
. bench/lib.sh
bench_need pdsh hyperfine ssh

make -s build
mkdir -p bench/out
go build -o bench/out/smiscript ./bench/smiscript
bench_init gssh-bench
bench/out/smiscript > "$W/probe.sh"

maxn=0; for n in $NS; do (( n > maxn )) && maxn=$n; done
for i in $(seq 1 "$maxn"); do bench_host "h$i" $((22000 + i)) "$FIXTURE"; done
sleep 0.5
mkdir -p bench/out
for n in $NS; do
  echo "hosts:" > "$W/hosts_$n.yaml"
  for i in $(seq 1 "$n"); do echo "  - name: h$i" >> "$W/hosts_$n.yaml"; done
  list=$(seq -s, -f 'h%g' 1 "$n")
  hosts=$(seq -s' ' -f 'h%g' 1 "$n")
  export HOME=$W/home SSH_AUTH_SOCK=
  # pdsh runs ssh with its own args; point it at the same config.
  export PDSH_SSH_ARGS="-F $W/ssh_config -2 -a -x -l%u %h"
  # sanity: every tool sees every GPU
  got=$(bin/gssh gpus --inventory "$W/hosts_$n.yaml" --ssh-config "$W/ssh_config" | tail -n +2 | wc -l)
  echo "N=$n: gssh lists $got GPU rows"
  [ "${COLD:-1}" = 1 ] && hyperfine -N --warmup 1 --runs "$RUNS" --export-markdown "bench/out/gpus_$n.md" --export-json "bench/out/gpus_$n.json" \
    -n "gssh gpus (N=$n)" "bin/gssh gpus --inventory $W/hosts_$n.yaml --ssh-config $W/ssh_config" \
    -n "pdsh -R ssh (N=$n)" "pdsh -R ssh -f 64 -w $list sh $W/probe.sh" \
    -n "ssh loop (N=$n)" "sh -c 'for h in $hosts; do ssh -F $W/ssh_config \$h sh $W/probe.sh >/dev/null; done'"

  # Warm: gssh serve's connections, and ControlMaster ones.
  gflags="--inventory $W/hosts_$n.yaml --ssh-config $W/ssh_config --state $W/state_$n.db"
  bin/gssh serve --interval 1h $gflags >"$W/serve_$n.log" 2>&1 & serve_pid=$!
  for _ in $(seq 100); do [ -S "$W/state_$n.db.sock" ] && break; sleep 0.1; done
  cm="-o ControlMaster=auto -o ControlPath=$W/cm-%h -o ControlPersist=10m"
  for h in $hosts; do ssh -F "$W/ssh_config" $cm -f -N "$h"; done
  got=$(bin/gssh gpus $gflags | tail -n +2 | wc -l)
  echo "N=$n: gssh gpus through gssh serve lists $got GPU rows"
  hyperfine -N --warmup 2 --runs "$RUNS" --export-markdown "bench/out/gpus_warm_$n.md" --export-json "bench/out/gpus_warm_$n.json" \
    -n "gssh gpus through gssh serve (N=$n)" "bin/gssh gpus $gflags" \
    -n "gssh gpus --fresh through gssh serve (N=$n)" "bin/gssh gpus --fresh $gflags" \
    -n "parallel ssh over ControlMaster (N=$n)" "sh -c 'for h in $hosts; do ssh -F $W/ssh_config $cm \$h sh $W/probe.sh >/dev/null & done; wait'"
  kill "$serve_pid"; wait "$serve_pid" || true
  for h in $hosts; do ssh -F "$W/ssh_config" $cm -O exit "$h" 2>/dev/null || true; done
done
cat bench/out/gpus_*.md
