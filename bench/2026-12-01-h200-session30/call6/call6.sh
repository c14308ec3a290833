#!/bin/bash
# usage: bin/f30/call6.sh — psa outlier sums by chunks of 32 (k: branch h-psachunk ee50a60, __launch_bounds__(256, 6); l: the same with (256)) against main 25c9bb1 (f): psa self-test of k, kernel and plan times alternating at 8K and 32K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 70 ./selftest_k.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_k.txt 2>&1; rc=$?
echo "selftest_k rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_k.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_k.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_k.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A8 -- "--- FAIL" $OUT/selftest_k.txt | grep -v -- "--- PASS" | head -12
timeout 110 ../../scripts/gpu_planner_ab.sh $OUT/ab psa 8192,32768 ./cuda_f.test ./cuda_k.test ./cuda_l.test > $OUT/ab.txt 2>&1
grep -E "N=|%" $OUT/ab.txt | sed -E 's/, psa_tokens.*//'
echo "total $(( $(date +%s) - s ))s"
