#!/usr/bin/env bash
# Probe latency per host over a pooled connection to a real loopback sshd:
# the nvidia-smi path, the helper warm (already pushed) and cold (pushed on
# every iteration). Both sources answer from fakes here (fake nvidia-smi,
# fake libnvidia-ml.so.1), so this measures gssh's own cost: sessions, push,
# parse. `make gpu-test` times NVML against the real nvidia-smi on a GPU.
#
#   bash bench/probe.sh            # COUNT=20 iterations each
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'Probe' -benchtime "${COUNT:-20}x" ./fleet/ | tee bench/out/probe.txt
