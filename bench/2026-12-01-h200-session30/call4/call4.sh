#!/bin/bash
# usage: bin/d30/call4.sh — float32 outlier scores (psa) and distances (unisparse) merged (f) against 16cc7d2 (c): psa, unisparse and auto self-tests of f plus the wide unisparse and psa cases, then kernel and plan times alternating at 8K, 32K and 64K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 150 ./selftest_f.test -test.run 'TestRunPlanners/(psa|unisparse|auto)' -test.v > $OUT/selftest_f.txt 2>&1; rc=$?
echo "selftest_f rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_f.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_f.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_f.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_f.txt | grep -v -- "--- PASS" | head -20
SPARSEATTN_WIDE_PLANNERS=1 timeout 100 ./selftest_f.test -test.run 'TestRunPlannersWide/(psa|unisparse)' -test.v > $OUT/selftest_wide.txt 2>&1; rc=$?
echo "wide rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_wide.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_wide.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_wide.txt) at $(( $(date +%s) - s ))s"
grep -B2 -A10 -- "--- FAIL" $OUT/selftest_wide.txt | grep -v -- "--- PASS" | head -12
timeout 220 ../../scripts/gpu_planner_ab.sh $OUT/ab psa,unisparse 8192,32768,65536 ./cuda_c.test ./cuda_f.test > $OUT/ab.txt 2>&1
grep -E "outlier|%" $OUT/ab.txt | sed -E 's/, psa_tokens.*psa_score/ ... psa_score/; s/, uni_draw.*//'
echo "total $(( $(date +%s) - s ))s"
