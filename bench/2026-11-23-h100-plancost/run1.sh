#!/bin/bash
# Diagnostic run: baseline planner times, per-kernel durations, bm_mass details.
B=bin/plancost
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
export SPARSEATTN_PLANNER_BENCH=sparge,unisparse,xattn,flexprefill
SPARSEATTN_PLANNER_BENCH_N=8192,32768,65536 SPARSEATTN_PLANNER_BENCH_NONCAUSAL=1 timeout 100 $B/base.test -test.run '^TestPlannerTimes$' -test.v > $OUT/base_times.txt 2>&1
echo "times done $SECONDS" >> $OUT/device.txt
SPARSEATTN_PLANNER_BENCH_N=8192,32768 SPARSEATTN_PLANNER_BENCH_NONCAUSAL=0 timeout 60 ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active -k 'regex:^(bm_|uni_|fp_|probe|sparge)' --launch-count 400 $B/base.test -test.run '^TestPlannerTimes$' > $OUT/ncu_kernels.txt 2>&1
echo "ncu kernels done $SECONDS" >> $OUT/device.txt
for p in unisparse xattn; do
SPARSEATTN_PLANNER_BENCH=$p SPARSEATTN_PLANNER_BENCH_N=32768 timeout 35 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats --section MemoryWorkloadAnalysis -k bm_mass --launch-count 1 $B/base.test -test.run '^TestPlannerTimes$' > $OUT/ncu_bm_$p.txt 2>&1
echo "ncu $p done $SECONDS" >> $OUT/device.txt
done
