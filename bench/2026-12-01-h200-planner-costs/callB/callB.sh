#!/bin/bash
# usage: bin/b28/callB.sh — first device run of the sliced unisparse outlier argmax (and everything merged before it): full self-test, the wide planner rows, per-kernel and whole-plan times with host issue time
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 300 ./selftest.test -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $? at $(( $(date +%s) - s ))s"
echo "PASS: $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"; grep -E -- "--- FAIL|panic" $OUT/selftest.txt | head -30
grep -B3 -A12 -- "--- FAIL" $OUT/selftest.txt | grep -v "^    --- PASS" | head -60
SPARSEATTN_WIDE_PLANNERS=1 timeout 60 ./selftest.test -test.run 'TestRunPlannersWide/unisparse' -test.v > $OUT/wide.txt 2>&1; echo "wide rc $?"; grep -E -- "--- (PASS|FAIL)" $OUT/wide.txt | head
SPARSEATTN_KERNEL_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 60 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | sed 's/.*planner_kernels_test.go:[0-9]*: //' | tee $OUT/kernels.txt
SPARSEATTN_PLANNER_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 100 ./cuda.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "total $(( $(date +%s) - s ))s"
