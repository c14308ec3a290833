#!/usr/bin/env bash
# SpargeAttn §3.7 / Appendix A.1 on our video workload: for each token order,
# the block self-similarity of Q and K (Sim-q, Sim-k, blocks 128/64 as in
# A.1) and, over a sweep of the TopCdf τ, the sparsity (executor counters)
# and rel-L1 of SpargeAttn and of the exact-TopCdf oracle, against float
# dense in the input order. Then INT8 QK error vs float on llm and video.
#
# Build here:  CGO_ENABLED=0 go build -o bin/sparseattn ./cmd/sparseattn
# Run:         scripts/order_ablation.sh          (writes under $OUT)
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
python3 - "$out" "$T" "$H" "$W" "$TEXT" <<'PY' | tee "$out/order_summary.txt"
import json, sys, os, glob
out, T, H, W, TEXT = sys.argv[1], *sys.argv[2:]
rows = {}
for p in sorted(glob.glob(os.path.join(out, "json", "order_*_tau_*.json"))):
    name = os.path.basename(p)[len("order_"):-len(".json")]
    order, tau = name.split("_tau_")
    r = json.load(open(p))
    s = r["similarity"]
    simq = s.get("ordered_sim_q", s["input_sim_q"]); simk = s.get("ordered_sim_k", s["input_sim_k"])
    for m in r["methods"]:
        base = m["method"].split("+")[0]
        if base in ("sparge", "oracle"):
            rows.setdefault((order, base), []).append((float(tau), m["sparsity"], m["rel_l1"], simq, simk))
print(f"video {T}x{H}x{W} + {TEXT} text tokens; Sim over blocks of 128 (q) / 64 (k)")
print(f"{'order':8} {'method':7} {'Sim-q':>6} {'Sim-k':>6} | best sparsity with rel L1 <= 0.05: {'tau':>5} {'L1':>7} {'sparsity':>8} | sweep tau: sparsity/L1")
for order in ("row", "column", "time", "hilbert", "random"):
    for meth in ("sparge", "oracle"):
        pts = sorted(rows.get((order, meth), []))
        if not pts: continue
        ok = [p for p in pts if p[2] is not None and p[2] <= 0.05]
        best = max(ok, key=lambda p: p[1]) if ok else None
        sweep = " ".join(f"{p[0]}:{p[1]:.3f}/{p[2]:.4f}" for p in pts)
        b = f"{best[0]:>5} {best[2]:>7.4f} {best[1]:>8.3f}" if best else f"{'-':>5} {'-':>7} {'-':>8}"
        print(f"{order:8} {meth:7} {pts[0][3]:>6.3f} {pts[0][4]:>6.3f} | {'':35}{b} | {sweep}")
PY
# INT8 QK (SageAttention-style) error against float dense.
$b eval --repeat 1 --warmup 0 --methods dense,sparge,oracle --int8-qk | tee "$out/int8_llm.txt"
$b eval --workload video --frames "$T" --height "$H" --width "$W" --text "$TEXT" --heads "$HEADS" --kv-heads "$HEADS" \
  --repeat 1 --warmup 0 --methods dense,sparge,oracle --int8-qk | tee "$out/int8_video.txt"
tar -C "$out" -czf "$out/json.tar.gz" json && rm -r "$out/json"
