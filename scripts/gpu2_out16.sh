#!/usr/bin/env bash
# Device run for the 16-bit output (Config.Output16): the Go GPU tests
# (a CGO_ENABLED=0 test binary cuda.test beside this script), the
# self-test with the default and 16-bit output, gpubench for both, and
# PyTorch's peers on the same masks, one table each.
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384}
dens=${DENS:-1,0.5,0.25,0.1}
masks=/tmp/sparseattn-masks
res=/tmp/res
mkdir -p "$res" "$masks" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
(cd /tmp && "$dir/cuda.test" -test.run 'Output16|AgainstReference|SelfTest|CompileFor|Concurrent' -test.v > "$res/gotests.txt" 2>&1; echo "go tests rc=$?"; grep -E "^(--- |ok|PASS|FAIL)" "$res/gotests.txt")
B=$dir/sparseattn
"$B" selftest > "$res/selftest.txt" 2>&1; echo "selftest (default) rc=$?"; cat "$res/selftest.txt"
"$B" selftest --out16 > "$res/selftest-out16.txt" 2>&1; echo "selftest --out16 rc=$?"; cat "$res/selftest-out16.txt"
for f in "" "--out16"; do
	name=ours$(echo "$f" | tr -d ' -')
	"$B" gpubench $f --n "$ns" --densities "$dens" --mask-dir "$masks" --repeat 5 --warmup 1 > "$res/$name.jsonl" 2> "$res/$name.err"
done
PYTHONUNBUFFERED=1 timeout 300 python3 "$dir/gpu_peers.py" --n "$ns" --densities "$dens" --mask-dir "$masks" > "$res/peers.jsonl" 2> "$res/peers.err"
for j in "$res"/ours*.jsonl; do
	echo "== table $(basename "$j")"
	python3 "$dir/gpu_table.py" "$j" "$res/peers.jsonl" | tee "${j%.jsonl}-table.md"
done
tar czf "$out/res.tgz" -C /tmp res
