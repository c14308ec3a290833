#!/usr/bin/env bash
# One device run for the pipelined wgmma loop (Config.Pipeline): ptxas's
# report on the kernel variants (registers, spills, warning C7513), the
# self-test of the default and pipelined kernels, gpubench for each kernel
# configuration, then PyTorch's peers on the same masks, and one table per
# configuration. Stage with scripts/gpu_bench_stage.sh DIR (plus this script
# and cuda/kernels/attention.cu), then on the device: bash DIR/gpu2_explore.sh
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
ns=${NS:-8192,16384}
dens=${DENS:-1,0.5,0.1}
masks=/tmp/sparseattn-masks
res=/tmp/res
mkdir -p "$res" "$masks"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$res/gpu.txt"
# ptxas reports, in parallel.
i=0
for cfg in "PIPE=1 MINB=1" "PIPE=1 MINB=2" "PIPE=1 MINB=1 PIPE_FENCE=0" "PIPE=0 MINB=2"; do
	i=$((i + 1))
	defs=$(for x in $cfg; do printf -- "-D%s " "$x"; done)
	( echo "== ptxas $cfg"
	  timeout 120 nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -o /tmp/k$i.cubin -Xptxas -v \
		-DHEAD_DIM=128 -DBLOCK_Q=128 -DKT=64 -DMT=1 -DIS_BF16=1 -DWGMMA=1 $defs "$dir/attention.cu" 2>&1 | grep -E "C75|registers|spill|error"
	  cuobjdump -sass /tmp/k$i.cubin > "$res/sass$i.txt" 2>&1 ) > "$res/ptxas$i.txt" &
done
wait
cat "$res"/ptxas*.txt
B=$dir/sparseattn
"$B" selftest > "$res/selftest.txt" 2>&1; echo "selftest (default) rc=$?"; cat "$res/selftest.txt"
for f in "--longest-first" "--pipeline --min-blocks 1" "--pipeline --cta-rows 64 --min-blocks 1"; do
	"$B" selftest $f > "$res/selftest-$(echo $f | tr -d ' -').txt" 2>&1
	echo "selftest $f rc=$? $(tail -1 "$res/selftest-$(echo $f | tr -d ' -').txt")"
done
for f in "" "--longest-first" "--pipeline --min-blocks 1" "--pipeline --cta-rows 64 --min-blocks 1" "--pipeline"; do
	name=ours$(echo "$f" | tr -d ' -')
	echo "== gpubench $f"
	"$B" gpubench $f --n "$ns" --densities "$dens" --mask-dir "$masks" --repeat 5 --warmup 1 > "$res/$name.jsonl" 2> "$res/$name.err"
	cut -c1-200 "$res/$name.jsonl"
done
PYTHONUNBUFFERED=1 timeout 300 python3 "$dir/gpu_peers.py" --n "$ns" --densities "$dens" --mask-dir "$masks" > "$res/peers.jsonl" 2> "$res/peers.err"
for j in "$res"/ours*.jsonl; do
	echo "== table $(basename "$j")"
	python3 "$dir/gpu_table.py" "$j" "$res/peers.jsonl" | tee "${j%.jsonl}-table.md"
done
tar czf "$out/res.tgz" -C /tmp res
