#!/usr/bin/env bash
# End-to-end GPU benchmark: every method planned and run on the device with
# tensors resident (sparseattn e2e), next to cuDNN SDPA in the same run.
#
# usage: scripts/gpu_e2e.sh BIN_DIR OUT_DIR   (on the GPU machine)
#   BIN_DIR holds a CGO_ENABLED=0 build of ./cmd/sparseattn named sparseattn
#   and this directory's gpu_e2e_peers.py; NS, CAUSAL, METHODS, REPEAT and
#   TARGET override the lengths, causality, methods, timed calls and the
#   rel-L1 bound (e2e --target: sweep settings run once; only the default
#   and the sparsest setting within the bound are timed; 0 times all).
set -euo pipefail
bin=${1:?usage: gpu_e2e.sh BIN_DIR OUT_DIR}
out=${2:?usage: gpu_e2e.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
NS=${NS:-8192,16384,32768,65536,131072}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 "$bin/gpu_e2e_peers.py" --n "$NS" | tee "$out/peers.jsonl"
"$bin/sparseattn" e2e --n "$NS" --causal "${CAUSAL:-both}" --repeat "${REPEAT:-5}" --target "${TARGET:-0.05}" \
  ${METHODS:+--methods "$METHODS"} | tee "$out/ours.jsonl"
