#!/usr/bin/env bash
# Nsight Compute profile of one 8K non-causal launch of each Hopper kernel
# (warp-specialized, FA2-style) at each density in DENS (default 1):
# speed of light, warp stalls, memory. CFGS picks the kernels ("ws fa2";
# name@bin profiles DIR/bin's default kernel).
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
B=$dir/sparseattn
for cfg in ${CFGS:-ws fa2}; do
for dn in ${DENS:-1}; do
	extra="" bin=$B
	[ "$cfg" = fa2 ] && extra="--fa2-loop"
	[[ $cfg == *@* ]] && bin=$dir/${cfg#*@}
	timeout 250 ncu --kernel-name attn_fwd --launch-skip 1 --launch-count 1 \
		--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
		--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__average_warp_latency_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard \
		"$bin" gpubench $extra --n 8192 --densities "$dn" --causal false --repeat 1 --warmup 1 > "$out/ncu_${cfg%%@*}_d$dn.txt" 2>&1
	echo "$cfg d=$dn rc=$?"
done
done
