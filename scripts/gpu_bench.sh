#!/usr/bin/env bash
# The GPU peer benchmark, in one run on the lent GPU machine: our dense and
# block-sparse kernels (sparseattn gpubench), then PyTorch SDPA (cuDNN and
# flash backends) and flex_attention with the same block masks, on the same
# shapes; prints one table. Build and stage here first:
#   scripts/gpu_bench_stage.sh DIR     (builds DIR/sparseattn, copies scripts)
# then on the device: bash DIR/gpu_bench.sh [N list]
# (GPUBENCH_FLAGS passes extra flags to gpubench, e.g. --mma-sync).
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${1:-8192,16384,32768,65536,131072}
masks=/tmp/sparseattn-masks
mkdir -p "$out" "$masks"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
"$dir/sparseattn" gpubench ${GPUBENCH_FLAGS:-} --n "$ns" --mask-dir "$masks" --repeat 5 --warmup 1 | tee "$out/ours.jsonl"
PYTHONUNBUFFERED=1 python3 "$dir/gpu_peers.py" --n "$ns" --mask-dir "$masks" | tee "$out/peers.jsonl"
python3 "$dir/gpu_table.py" "$out/ours.jsonl" "$out/peers.jsonl" | tee "$out/table.md"
