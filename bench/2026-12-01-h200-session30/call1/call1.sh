#!/bin/bash
# usage: bin/a30/call1.sh — branch h-psa-assign (p, register sort in psa_assign) against main (m): psa self-test of p, kernel and plan times alternating, ncu of p's psa_assign and of main's psa_outliers and uni_outlier
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 110 ./selftest_p.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_p.txt 2>&1; rc=$?
echo "selftest_p rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_p.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_p.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_p.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_p.txt | grep -v -- "--- PASS" | head -20
timeout 30 ./cuda_p.test -test.run 'TestPsaSortNetwork' -test.v 2>&1 | tail -3
timeout 200 ../../scripts/gpu_planner_ab.sh $OUT/ab psa 8192,32768,65536 ./cuda_m.test ./cuda_p.test | grep -E "psa_assign|%" 
echo "ab at $(( $(date +%s) - s ))s"
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768 timeout 50 ncu --clock-control none --kernel-name psa_assign --launch-skip 1 --launch-count 1 --set full -o $OUT/p_assign ./cuda_p.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log1.txt 2>&1; echo "ncu1 rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/p_assign.ncu-rep --page details > $OUT/ncu_p_assign_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Registers Per|Achieved Occupancy" $OUT/ncu_p_assign_details.txt | head -8
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768 timeout 50 ncu --clock-control none --kernel-name psa_outliers --launch-skip 2 --launch-count 2 --set full -o $OUT/m_outliers ./cuda_m.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log2.txt 2>&1; echo "ncu2 rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/m_outliers.ncu-rep --page source --csv --print-source sass > $OUT/ncu_outliers_sass.csv 2>&1
ncu --import $OUT/m_outliers.ncu-rep --page details > $OUT/ncu_outliers_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Registers Per|Achieved Occupancy|Memory Throughput" $OUT/ncu_outliers_details.txt | head -12
SPARSEATTN_KERNEL_BENCH=unisparse SPARSEATTN_PLANNER_BENCH_N=32768 timeout 50 ncu --clock-control none --kernel-name uni_outlier --launch-skip 1 --launch-count 1 --set full -o $OUT/m_uniout ./cuda_m.test -test.run 'TestPlannerKernelTimes$' > $OUT/ncu_log3.txt 2>&1; echo "ncu3 rc $? at $(( $(date +%s) - s ))s"
ncu --import $OUT/m_uniout.ncu-rep --page source --csv --print-source sass > $OUT/ncu_uniout_sass.csv 2>&1
ncu --import $OUT/m_uniout.ncu-rep --page details > $OUT/ncu_uniout_details.txt 2>&1
grep -E "Duration|Executed Instructions |Issue Slots Busy|Registers Per|Achieved Occupancy|Memory Throughput" $OUT/ncu_uniout_details.txt | head -8
echo "total $(( $(date +%s) - s ))s"
