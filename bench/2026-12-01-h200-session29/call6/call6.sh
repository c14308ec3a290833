#!/bin/bash
# usage: bin/f29/call6.sh — main at aecfa48: unisparse self-test (uni_outlier as before, BM_QRES main pass), then every planner's whole-plan time against our dense run at 8K, 32K and 64K causal
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 130 ./selftest.test -test.run 'TestRunPlanners/unisparse' -test.v > $OUT/selftest.txt 2>&1; rc=$?
echo "selftest rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest.txt | grep -v -- "--- PASS" | head -20
SPARSEATTN_PLANNER_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768,65536 timeout 170 ./cuda.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "total $(( $(date +%s) - s ))s"
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768 timeout 60 ncu --clock-control none --kernel-name psa_assign --launch-skip 1 --launch-count 1 --set full -o $OUT/psa_assign ./cuda.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log.txt 2>&1; echo "ncu rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/psa_assign.ncu-rep --page source --csv --print-source sass > $OUT/ncu_assign_sass.csv 2>&1
ncu --import $OUT/psa_assign.ncu-rep --page details > $OUT/ncu_assign_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Block Limit" $OUT/ncu_assign_details.txt | head -12
echo "total $(( $(date +%s) - s ))s"
