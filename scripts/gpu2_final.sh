#!/usr/bin/env bash
# One device run: ptxas's report on the default and skip-future wgmma
# kernels, the self-test of each launch/skip configuration, gpubench for
# each, PyTorch's peers on the same masks, and one table per configuration.
# Stage with scripts/gpu_bench_stage.sh DIR (plus this script and
# cuda/kernels/attention.cu), then on the device: bash DIR/gpu2_final.sh
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384,32768,65536}
dens=${DENS:-1,0.5,0.25,0.1}
masks=/tmp/sparseattn-masks
res=/tmp/res
mkdir -p "$res" "$masks" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
i=0
for cfg in "MINB=2" "MINB=2 SKIP_FUTURE=1"; do
	i=$((i + 1))
	defs=$(for x in $cfg; do printf -- "-D%s " "$x"; done)
	( echo "== ptxas $cfg"
	  timeout 120 nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -o /tmp/k$i.cubin -Xptxas -v \
		-DHEAD_DIM=128 -DBLOCK_Q=128 -DKT=64 -DMT=1 -DIS_BF16=1 -DWGMMA=1 $defs "$dir/attention.cu" 2>&1 | grep -E "C75|registers|spill|error" ) > "$res/ptxas$i.txt" &
done
wait
cat "$res"/ptxas*.txt
B=$dir/sparseattn
"$B" selftest > "$res/selftest.txt" 2>&1; echo "selftest (default) rc=$?"; cat "$res/selftest.txt"
for f in "--skip-future" "--head-order"; do
	n=$(echo $f | tr -d ' -')
	"$B" selftest $f > "$res/selftest-$n.txt" 2>&1
	echo "selftest $f rc=$? $(tail -1 "$res/selftest-$n.txt")"
done
for f in "" "--skip-future" "--head-order"; do
	name=ours$(echo "$f" | tr -d ' -')
	echo "== gpubench $f"
	"$B" gpubench $f --n "$ns" --densities "$dens" --mask-dir "$masks" --repeat 5 --warmup 1 > "$res/$name.jsonl" 2> "$res/$name.err"
done
PYTHONUNBUFFERED=1 timeout 330 python3 "$dir/gpu_peers.py" --n "$ns" --densities "$dens" --mask-dir "$masks" > "$res/peers.jsonl" 2> "$res/peers.err"
for j in "$res"/ours*.jsonl; do
	echo "== table $(basename "$j")"
	python3 "$dir/gpu_table.py" "$j" "$res/peers.jsonl" | tee "${j%.jsonl}-table.md"
done
tar czf "$out/res.tgz" -C /tmp res
