#!/bin/bash
# usage: bin/c29/call3.sh — psa_score variants: a (40f0b24), b (+ importance loads sixteen at a time), c (+ odd tiles a chunk behind): psa self-test of c (then b), kernel times alternating, plan times, ncu of c
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 130 ./selftest_c.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_c.txt 2>&1; rc=$?
SPARSEATTN_WIDE_PLANNERS=1 timeout 30 ./selftest_c.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/selftest_c.txt 2>&1; rc2=$?
echo "selftest_c rc $rc $rc2 PASS $(grep -c -- '--- PASS' $OUT/selftest_c.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_c.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_c.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_c.txt | grep -v -- "--- PASS" | head -30
for r in 1 2; do for b in a b c; do
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 30 ./cuda_$b.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | grep "N=" | sed "s/.*planner_kernels_test.go:[0-9]*: /$b r$r /" | tee -a $OUT/kernels.txt
done; done
SPARSEATTN_PLANNER_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,65536 timeout 60 ./cuda_c.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "at $(( $(date +%s) - s ))s"
if [ $rc != 0 ]; then timeout 100 ./selftest_b.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_b.txt 2>&1; echo "selftest_b rc $? PASS $(grep -c -- '--- PASS' $OUT/selftest_b.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_b.txt)"; fi
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768 timeout 60 ncu --clock-control none --kernel-name psa_score --launch-skip 1 --launch-count 1 --set full -o $OUT/psa_score ./cuda_c.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log.txt 2>&1; echo "ncu rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/psa_score.ncu-rep --page source --csv --print-source sass > $OUT/ncu_sass.csv 2>&1
ncu --import $OUT/psa_score.ncu-rep --page details > $OUT/ncu_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued" $OUT/ncu_details.txt | head -6
echo "total $(( $(date +%s) - s ))s"
