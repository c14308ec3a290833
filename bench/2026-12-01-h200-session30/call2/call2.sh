#!/bin/bash
# usage: bin/b30/call2.sh — psa_assign with register sorts for rows of 1024 and 2048 blocks (e, commit after f54f26a) against f54f26a (p: shared-memory sort past 512): wide psa self-test of e (rows of 1024 and 2048 blocks), psa self-test of e, kernel and plan times alternating at 64K and 128K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
SPARSEATTN_WIDE_PLANNERS=1 timeout 200 ./selftest_e.test -test.run 'TestRunPlannersWide/psa' -test.v > $OUT/selftest_wide.txt 2>&1; rc=$?
echo "wide rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_wide.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_wide.txt) at $(( $(date +%s) - s ))s"
grep -E "rows differ|--- (PASS|FAIL)|panic|Error" $OUT/selftest_wide.txt | head -20
timeout 100 ./selftest_e.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_e.txt 2>&1; rc=$?
echo "selftest_e rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_e.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_e.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_e.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_e.txt | grep -v -- "--- PASS" | head -20
timeout 200 ../../scripts/gpu_planner_ab.sh $OUT/ab psa 65536,131072 ./cuda_p.test ./cuda_e.test > $OUT/ab.txt 2>&1
grep -E "psa_assign|%" $OUT/ab.txt | sed -E 's/psa_outliers.*psa_score/... psa_score/'
echo "total $(( $(date +%s) - s ))s"
