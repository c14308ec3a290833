#!/usr/bin/env bash
# Kernel-configuration sweep on the GPU: self-test of the named
# configuration, then gpubench of each configuration on the same shapes,
# one table (ms and dense-equivalent TFLOPs). Stage with
# scripts/gpu_bench_stage.sh DIR and copy this script there; on the device:
# CONFIGS="fa2:--fa2-loop|ws:|..." bash DIR/gpu_kernel_sweep.sh
# A name of the form name@bin runs DIR/bin instead of DIR/sparseattn (to
# compare builds of two commits in one run).
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384}
dens=${DENS:-1,0.5,0.1}
configs=${CONFIGS:-"fa2:--fa2-loop|ws:|wsoff:--ping-pong off|wson:--ping-pong on|ws64s4:--tile-k 64 --stages 4"}
selftest=${SELFTEST:-""}
res=/tmp/res
mkdir -p "$res" "$out"
B=$dir/sparseattn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
timeout 90 "$B" selftest $selftest > "$res/selftest.txt" 2>&1; echo "selftest $selftest rc=$?"; tail -4 "$res/selftest.txt"
IFS='|' read -ra cfgs <<< "$configs"
names=()
for c in "${cfgs[@]}"; do
	name=${c%%:*}; flags=${c#*:}
	bin=$B
	if [[ $name == *@* ]]; then bin=$dir/${name#*@}; name=${name%%@*}; fi
	names+=("$name")
	timeout ${CFG_TIMEOUT:-150} "$bin" gpubench $flags --n "$ns" --densities "$dens" --repeat 5 --warmup 1 > "$res/$name.jsonl" 2> "$res/$name.err"
	echo "$name ($flags) rc=$?"; tail -2 "$res/$name.err"
done
python3 - "$res" "${names[@]}" <<'PY'
import json, sys, os
res, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    for line in open(os.path.join(res, n + ".jsonl")):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        rows.setdefault((r["n"], r["causal"], r["density"]), {})[n] = r
print("| N | causal | density | " + " | ".join(names) + " |")
print("|---|---|---|" + "---|" * len(names))
for k in sorted(rows, key=lambda k: (k[0], k[1], -k[2])):
    cells = []
    for n in names:
        r = rows[k].get(n)
        cells.append(f"{r['ms']:.3f} ({r['tflops']:.0f})" if r else "-")
    print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
PY
tar czf "$out/res.tgz" -C /tmp res
