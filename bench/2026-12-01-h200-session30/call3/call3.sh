#!/bin/bash
# usage: bin/c30/call3.sh — psa_assign with sums by chunks of 32 and register sorts to 2048 (c, 839bf37) against f54f26a (p): wide psa self-test (rows of 1024 and 2048 blocks) and psa self-test of c, kernel and plan times alternating at 32K, 64K and 128K; host CPU profiles of psa and sparge plans at 8K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
SPARSEATTN_WIDE_PLANNERS=1 timeout 150 ./selftest_c.test -test.run 'TestRunPlannersWide/psa' -test.v > $OUT/selftest_wide.txt 2>&1; rc=$?
echo "wide rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_wide.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_wide.txt) at $(( $(date +%s) - s ))s"
grep -E "rows differ|--- (PASS|FAIL)|panic|rror" $OUT/selftest_wide.txt | head -12
timeout 100 ./selftest_c.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/selftest_c.txt 2>&1; rc=$?
echo "selftest_c rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_c.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_c.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_c.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_c.txt | grep -v -- "--- PASS" | head -20
timeout 200 ../../scripts/gpu_planner_ab.sh $OUT/ab psa 32768,65536,131072 ./cuda_p.test ./cuda_c.test > $OUT/ab.txt 2>&1
grep -E "psa_assign|%" $OUT/ab.txt | sed -E 's/psa_outliers.*psa_score/... psa_score/'
echo "ab at $(( $(date +%s) - s ))s"
SPARSEATTN_PLAN_HOST=1 SPARSEATTN_PLANNER_BENCH_N=8192 timeout 90 ./cuda_c.test -test.run 'TestPlanHostCost$' -test.v -test.cpuprofile $OUT/host_8k.prof 2>&1 | grep -E "N=|FAIL|ok" | sed 's/.*go:[0-9]*: //'
echo "total $(( $(date +%s) - s ))s"
