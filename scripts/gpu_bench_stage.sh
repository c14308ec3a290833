#!/usr/bin/env bash
# Builds the CGO_ENABLED=0 binary and stages it with the GPU benchmark
# scripts in DIR (a folder that travels to the device machine).
set -euo pipefail
dir=${1:?usage: gpu_bench_stage.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
(cd "$root" && CGO_ENABLED=0 go build -o "$dir/sparseattn" ./cmd/sparseattn)
cp "$root"/scripts/gpu_bench.sh "$root"/scripts/gpu_peers.py "$root"/scripts/gpu_table.py "$dir/"
