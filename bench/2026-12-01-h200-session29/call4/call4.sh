#!/bin/bash
# usage: bin/d29/call4.sh — psa_score with 128-dim stages (d) against 64 (b): psa self-test of d, kernel times alternating, plan times; sparge_pool_ws (s, branch h-sparge29) against sparge_pool_vec (b): device tests, sparge self-test, pool variants, kernel and plan times alternating
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
for r in 1 2; do for b in b d; do
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 30 ./cuda_$b.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | grep "N=" | sed "s/.*planner_kernels_test.go:[0-9]*: /$b r$r /" | tee -a $OUT/psa_kernels.txt
done; done
timeout 100 ./selftest_d.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_d.txt 2>&1; rc=$?
echo "selftest_d rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_d.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_d.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_d.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_d.txt | grep -v -- "--- PASS" | head -20
SPARSEATTN_PLANNER_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,65536 timeout 60 ./cuda_d.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/psa_plannertimes.txt
echo "== sparge at $(( $(date +%s) - s ))s"
timeout 60 ./cuda_s.test -test.run 'TestSpargePoolMeans|TestSpargeRowsLayouts|TestAssembleOrder' -test.v > $OUT/sparge_cudatests.txt 2>&1; echo "sparge cuda tests rc $?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/sparge_cudatests.txt | head -20
timeout 90 ./selftest_s.test -test.run 'TestRunPlanners/sparge|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $OUT/sparge_selftest.txt 2>&1; echo "sparge selftest rc $? PASS $(grep -c -- '--- PASS' $OUT/sparge_selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/sparge_selftest.txt)"
grep -B2 -A8 -- "--- FAIL" $OUT/sparge_selftest.txt | head -20
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192 timeout 60 ./cuda_s.test -test.run 'TestSpargePoolVariants$' -test.v 2>&1 | grep -E "µs|FAIL|ok" | tee $OUT/sparge_pool.txt
for r in 1 2; do for b in b s; do
SPARSEATTN_KERNEL_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 30 ./cuda_$b.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | grep "N=" | sed "s/.*planner_kernels_test.go:[0-9]*: /$b r$r /" | tee -a $OUT/sparge_kernels.txt
SPARSEATTN_PLANNER_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192 timeout 30 ./cuda_$b.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed "s/.*go:[0-9]*: /$b r$r /" | tee -a $OUT/sparge_plannertimes.txt
done; done
echo "total $(( $(date +%s) - s ))s"
