#!/usr/bin/env bash
# Warp-specialized kernel, first device run: self-test (default
# configuration = warp-specialized kernel for 128-row blocks), then
# gpubench of the warp-specialized kernel against the FlashAttention-2-style
# wgmma kernel (FA2) on the same shapes. Stage with
# scripts/gpu_bench_stage.sh DIR and copy this script there; on the device:
# bash DIR/gpu3_ws.sh
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384}
dens=${DENS:-1,0.5,0.1}
res=/tmp/res
mkdir -p "$res" "$out"
B=$dir/sparseattn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
timeout 180 "$B" selftest --ws > "$res/selftest.txt" 2>&1; echo "selftest --ws rc=$?"; cat "$res/selftest.txt"
for cfg in ws fa2; do
	extra=""
	[ "$cfg" = ws ] && extra="--ws"
	timeout 200 "$B" gpubench $extra --n "$ns" --densities "$dens" --repeat 5 --warmup 1 > "$res/$cfg.jsonl" 2> "$res/$cfg.err"
	echo "$cfg rc=$?"; tail -3 "$res/$cfg.err"
done
python3 - "$res" <<'PY'
import json, sys, os
res = sys.argv[1]
rows = {}
for cfg in ("ws", "fa2"):
    p = os.path.join(res, cfg + ".jsonl")
    if not os.path.exists(p):
        continue
    for line in open(p):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        k = (r.get("n"), r.get("causal"), r.get("density"))
        rows.setdefault(k, {})[cfg] = r
print("| N | causal | density | ws ms | ws TFLOPs | fa2 ms | fa2 TFLOPs | fa2/ws |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted(rows, key=lambda k: (k[0], str(k[1]), -float(k[2] or 0))):
    a, b = rows[k].get("ws", {}), rows[k].get("fa2", {})
    ta, tb = a.get("ms"), b.get("ms")
    ratio = f"{tb/ta:.2f}" if ta and tb else "-"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {ta} | {a.get('tflops')} | {tb} | {b.get('tflops')} | {ratio} | {a.get('kernel')} |")
PY
tar czf "$out/res.tgz" -C /tmp res
