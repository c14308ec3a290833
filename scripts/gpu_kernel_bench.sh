#!/usr/bin/env bash
# Confirmation run of the default GPU engine: self-test, gpubench and
# PyTorch's peers on the same masks, one table. Stage with
# scripts/gpu_bench_stage.sh DIR (plus this script), then on the device:
# bash DIR/gpu_kernel_bench.sh
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384,32768,65536}
dens=${DENS:-1,0.5,0.25,0.1}
masks=/tmp/sparseattn-masks
res=/tmp/res
mkdir -p "$res" "$masks" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
B=$dir/sparseattn
"$B" selftest > "$res/selftest.txt" 2>&1; echo "selftest (default) rc=$?"; cat "$res/selftest.txt"
"$B" gpubench --n "$ns" --densities "$dens" --mask-dir "$masks" --repeat 5 --warmup 1 > "$res/ours.jsonl" 2> "$res/ours.err"
PYTHONUNBUFFERED=1 timeout 330 python3 "$dir/gpu_peers.py" --n "$ns" --densities "$dens" --mask-dir "$masks" > "$res/peers.jsonl" 2> "$res/peers.err"
python3 "$dir/gpu_table.py" "$res/ours.jsonl" "$res/peers.jsonl" | tee "$res/table.md"
tar czf "$out/res.tgz" -C /tmp res
