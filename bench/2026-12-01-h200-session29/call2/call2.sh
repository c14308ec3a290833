#!/bin/bash
# usage: bin/b29/call2.sh — psa_score with per-pair accumulators, no m-tile branch in the MMA loop, online row sums and an importance pass read from memory: psa self-test, kernel and plan times, ncu of psa_score at 32K causal
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 150 ./selftest.test -test.run 'TestRunPlanners/(psa|auto)' -test.v > $OUT/selftest.txt 2>&1; rc=$?
SPARSEATTN_WIDE_PLANNERS=1 timeout 40 ./selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/selftest.txt 2>&1; rc2=$?
echo "selftest rc $rc $rc2 PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) at $(( $(date +%s) - s ))s"
grep -E "tie|differ" $OUT/selftest.txt | head -5
grep -B2 -A10 -- "--- FAIL" $OUT/selftest.txt | grep -v -- "--- PASS" | head -40
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 40 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | sed 's/.*planner_kernels_test.go:[0-9]*: //' | grep "N=" | tee $OUT/kernels.txt
SPARSEATTN_PLANNER_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,65536 timeout 60 ./cuda.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "at $(( $(date +%s) - s ))s"
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768 timeout 100 ncu --clock-control none --kernel-name psa_score --launch-skip 1 --launch-count 1 --set full -o $OUT/psa_score ./cuda.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log.txt 2>&1; echo "ncu rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/psa_score.ncu-rep --page source --csv --print-source sass > $OUT/ncu_sass.csv 2>&1
ncu --import $OUT/psa_score.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Achieved Occupancy" $OUT/ncu_details.txt | head -12
echo "total $(( $(date +%s) - s ))s"
