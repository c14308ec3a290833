#!/usr/bin/env bash
# SpargeAttn §3.7 / Appendix A.1 on our video workload: for each token order,
# the block self-similarity of Q and K (Sim-q, Sim-k, blocks 128/64 as in
# A.1) and, over a sweep of the TopCdf τ, the sparsity (executor counters)
# and rel-L1 of SpargeAttn and of the exact-TopCdf oracle, against float
# dense in the input order. Then INT8 QK error vs float on llm and video.
#
# Build here:  CGO_ENABLED=0 go build -o bin/sparseattn ./cmd/sparseattn
# Run:         scripts/order_ablation.sh          (writes under $OUT; ~40 evals)
# Summary again from the saved JSON: python3 scripts/order_summary.py $OUT/json.tar.gz
# Grid: GRID="T H W TEXT" (default CogVideoX-2B's latent 13×30×45 + 226 text).
set -euo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out/json"
b=./bin/sparseattn
read -r T H W TEXT <<<"${GRID:-13 30 45 226}"
HEADS=${HEADS:-8}
TAUS=${TAUS:-0.5 0.7 0.8 0.9 0.95 0.97 0.99}
$b info > "$out/info.txt"
common=(--workload video --frames "$T" --height "$H" --width "$W" --text "$TEXT" --heads "$HEADS" --kv-heads "$HEADS"
  --d 128 --block-q 128 --block-k 64 --repeat 1 --warmup 0 --sim --json)
for order in row column time hilbert random; do
  for tau in $TAUS; do
    $b eval "${common[@]}" --order "$order" --methods sparge,oracle --sparge-cdf "$tau" --oracle-cdf "$tau" \
      > "$out/json/order_${order}_tau_${tau}.json"
  done
done
python3 scripts/order_summary.py "$out/json" | tee "$out/order_summary.txt"
# INT8 QK (SageAttention-style) error against float dense.
$b eval --repeat 1 --warmup 0 --methods dense,sparge,oracle --int8-qk | tee "$out/int8_llm.txt"
$b eval --workload video --frames "$T" --height "$H" --width "$W" --text "$TEXT" --heads "$HEADS" --kv-heads "$HEADS" \
  --repeat 1 --warmup 0 --methods dense,sparge,oracle --int8-qk | tee "$out/int8_video.txt"
tar -C "$out" -czf "$out/json.tar.gz" json && rm -r "$out/json"
