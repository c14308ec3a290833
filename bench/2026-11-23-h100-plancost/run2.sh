#!/bin/bash
# Final run: self-test planner cases, planner times, e2e on the llm workload, kernel times.
B=bin/plancost
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
timeout 85 $B/selftest.test -test.run 'TestRunPlanners/^(xattn|unisparse|flexprefill|sparge|minference)$' -test.v > $OUT/selftest.txt 2>&1
echo "selftest rc=$? t=$SECONDS" >> $OUT/device.txt
SPARSEATTN_PLANNER_BENCH=sparge,unisparse,xattn,flexprefill,minference SPARSEATTN_PLANNER_BENCH_N=8192,32768,65536 SPARSEATTN_PLANNER_BENCH_NONCAUSAL=1 timeout 45 $B/cuda.test -test.run '^TestPlannerTimes$' -test.v > $OUT/new_times.txt 2>&1
echo "times rc=$? t=$SECONDS" >> $OUT/device.txt
SPARSEATTN_WIDE_PLANNERS=1 timeout 40 $B/selftest.test -test.run 'TestRunPlannersWide' -test.v > $OUT/selftest_wide.txt 2>&1
echo "wide rc=$? t=$SECONDS" >> $OUT/device.txt
timeout 45 $B/sparseattn e2e --n 8192,32768 --causal both --sweep=false --methods dense,sparge,unisparse,xattn,flexprefill --repeat 5 > $OUT/e2e_new.jsonl 2> $OUT/e2e_new.err
echo "e2e rc=$? t=$SECONDS" >> $OUT/device.txt
SPARSEATTN_PLANNER_BENCH=sparge,unisparse,xattn,flexprefill SPARSEATTN_PLANNER_BENCH_N=32768 timeout 20 ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size -k 'regex:^(bm_|uni_|fp_|probe|sparge)' --launch-count 80 $B/cuda.test -test.run '^TestPlannerTimes$' > $OUT/ncu_kernels.txt 2>&1
echo "ncu rc=$? t=$SECONDS" >> $OUT/device.txt
