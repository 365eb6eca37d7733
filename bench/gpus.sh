#!/usr/bin/env bash
# Fan-out benchmark: `gssh gpus` against `pdsh -R ssh` and a sequential ssh
# loop, over N loopback OpenSSH hosts whose nvidia-smi is the fake that
# replays probe/testdata/fleet/a100x4. Every tool runs the same probe script
# (probe.SMIScript: the GPU query, the compute-apps query, -L and ps; pdsh
# and ssh run it from a file, which the loopback hosts share).
#
#   bash bench/gpus.sh            # N = 1 8 32, hyperfine --runs 10
#   NS="8" RUNS=5 bash bench/gpus.sh
#
# Needs: sshd (openssh-server), pdsh, hyperfine; run as root or as a user
# that may start sshd. Results go to bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=${NS:-"1 8 32"}
RUNS=${RUNS:-10}
FIXTURE=${FIXTURE:-a100x4}
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
for tool in "$SSHD" pdsh hyperfine ssh; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install -y openssh-server pdsh hyperfine)"; exit 1; }
done

make -s build
go build -o bench/out/smiscript ./bench/smiscript
W=$(mktemp -d /tmp/gssh-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
mkdir -p "$W/bin" "$W/home/.ssh" /run/sshd
ln -s "$PWD/probe/testdata/fake-nvidia-smi" "$W/bin/nvidia-smi"
ssh-keygen -q -t ed25519 -N '' -f "$W/id"
ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey"
cp "$W/id.pub" "$W/authorized_keys"
bench/out/smiscript > "$W/probe.sh"

maxn=0; for n in $NS; do (( n > maxn )) && maxn=$n; done
: > "$W/known_hosts"; : > "$W/ssh_config"; echo "hosts:" > "$W/hosts.yaml"
for i in $(seq 1 "$maxn"); do
  port=$((22000 + i))
  cat > "$W/sshd_$i.conf" <<CONF
ListenAddress 127.0.0.1:$port
HostKey $W/hostkey
AuthorizedKeysFile $W/authorized_keys
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
SetEnv PATH=$W/bin:/usr/bin:/bin GSSH_FAKE_SMI_DIR=$PWD/probe/testdata/fleet/$FIXTURE HOME=$W/home
LogLevel ERROR
CONF
  "$SSHD" -D -e -f "$W/sshd_$i.conf" 2>>"$W/sshd.log" & pids+=($!)
  echo "[127.0.0.1]:$port $(cat "$W/hostkey.pub" | cut -d' ' -f1,2)" >> "$W/known_hosts"
  cat >> "$W/ssh_config" <<CONF
Host h$i
  HostName 127.0.0.1
  Port $port
  User $(id -un)
  IdentityFile $W/id
  IdentitiesOnly yes
  UserKnownHostsFile $W/known_hosts
  StrictHostKeyChecking yes
  ControlMaster no
  ControlPath none
CONF
done
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
  hyperfine -N --warmup 1 --runs "$RUNS" --export-markdown "bench/out/gpus_$n.md" --export-json "bench/out/gpus_$n.json" \
    -n "gssh gpus (N=$n)" "bin/gssh gpus --inventory $W/hosts_$n.yaml --ssh-config $W/ssh_config" \
    -n "pdsh -R ssh (N=$n)" "pdsh -R ssh -f 64 -w $list sh $W/probe.sh" \
    -n "ssh loop (N=$n)" "sh -c 'for h in $hosts; do ssh -F $W/ssh_config \$h sh $W/probe.sh >/dev/null; done'"
done
cat bench/out/gpus_*.md
