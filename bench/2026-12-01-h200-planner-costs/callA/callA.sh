#!/bin/bash
# usage: bin/a28/callA.sh — first device run of csr_rows, the staged psa_outliers and the float64-tile s2o_kscore: their self-test cases, per-kernel and whole-plan times
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 120 ./cuda.test -test.run 'TestAssembleOrder|TestPsaOutlierSmem' -test.v > $OUT/assemble.txt 2>&1; echo "assemble rc $?"; grep -E "^(---|    ---|ok|FAIL)|rows," $OUT/assemble.txt | head -20
timeout 200 ./selftest.test -test.run 'TestRunPlanners/(psa|s2o|sparge|auto|window)' -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $? at $(( $(date +%s) - s ))s"
echo "PASS: $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"; grep -E -- "--- FAIL|differ [1-9]|panic" $OUT/selftest.txt | head -30
SPARSEATTN_KERNEL_BENCH=psa,s2o,sparge,window SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 60 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | sed 's/.*planner_kernels_test.go:[0-9]*: //' | tee $OUT/kernels.txt
SPARSEATTN_PLANNER_BENCH=psa,s2o,sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768,65536 timeout 90 ./cuda.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "total $(( $(date +%s) - s ))s"
