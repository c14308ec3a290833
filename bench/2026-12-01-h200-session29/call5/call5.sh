#!/bin/bash
# usage: bin/e29/call5.sh — unisparse helper branch h-uni29 merged (u: float32 screen + staged uni_outlier + BM_QRES main pass; u2: without BM_QRES; m: main before the merge): unisparse and xattn self-test of u, kernel times alternating, plan times
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
for r in 1 2; do for b in m u2 u; do
SPARSEATTN_KERNEL_BENCH=unisparse,xattn SPARSEATTN_PLANNER_BENCH_N=32768 timeout 30 ./cuda_$b.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | grep "N=" | sed "s/.*planner_kernels_test.go:[0-9]*: /$b r$r /" | tee -a $OUT/kernels.txt
done; done
timeout 170 ./selftest_u.test -test.run 'TestRunPlanners/(unisparse|xattn)' -test.v > $OUT/selftest_u.txt 2>&1; rc=$?
SPARSEATTN_WIDE_PLANNERS=1 timeout 40 ./selftest_u.test -test.run 'TestRunPlannersWide/(unisparse|xattn)' -test.v >> $OUT/selftest_u.txt 2>&1; rc2=$?
echo "selftest_u rc $rc $rc2 PASS $(grep -c -- '--- PASS' $OUT/selftest_u.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_u.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_u.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_u.txt | grep -v -- "--- PASS" | head -30
SPARSEATTN_PLANNER_BENCH=unisparse,xattn,psa SPARSEATTN_PLANNER_BENCH_N=32768,65536 timeout 100 ./cuda_u.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "total $(( $(date +%s) - s ))s"
