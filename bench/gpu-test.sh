#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU (and no Go toolchain): compares
# gssh-helper (NVML) with nvidia-smi on the real card and times both.
# Build first, on a machine with Go: `make gpu-test` builds bin/gssh-helper
# and bin/nvmlsnap-gpu.test and then runs this script; on the GPU machine
# run `bash bench/gpu-test.sh` with bin/ carried over.
set -uo pipefail
cd "$(dirname "$0")/.."
for f in bin/gssh-helper bin/nvmlsnap-gpu.test; do
  [ -x "$f" ] || { echo "gpu-test: $f missing: run make gpu-test on a build machine first"; exit 1; }
done
echo "== host"; uname -m; ldd --version 2>&1 | head -1
echo "== nvidia-smi"; nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,driver_version --format=csv || exit 1
# A small GPU process so the process lists are not empty.
pypid=
if command -v python3 >/dev/null && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 -c 'import torch, time; x = torch.ones(256 << 20, device="cuda"); time.sleep(120)' &
  pypid=$!
  for _ in $(seq 1 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$pypid" && break; sleep 0.5; done
fi
trap '[ -n "$pypid" ] && kill $pypid 2>/dev/null' EXIT
echo "== processes"; nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_gpu_memory --format=csv
echo "== helper"; GSSH_JOB_ID=gpu-test bin/gssh-helper | head -c 4000; echo
echo "== parity test (helper vs nvidia-smi, medians of 20 calls)"
bin/nvmlsnap-gpu.test -test.v -test.run GPU -test.count 1
