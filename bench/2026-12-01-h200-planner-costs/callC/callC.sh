#!/bin/bash
# usage: bin/c28/callC.sh — first device run of the reworked psa_score/psa_assign, s2o key sort (sort + merge), probe, sparge launch cache: their self-test cases, wide rows, kernel and plan times; cuDNN peers for the e2e table; unisparse split bm_mass at 32x2 (cuda_bk32) against 16x4
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 200 ./selftest.test -test.run 'TestRunPlanners/(psa|s2o|flexprefill|minference|sparge|auto)' -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $? at $(( $(date +%s) - s ))s"
echo "PASS: $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"; grep -E -- "--- FAIL|panic" $OUT/selftest.txt | head -20
grep -B2 -A10 -- "--- FAIL" $OUT/selftest.txt | grep -v -- "--- PASS" | head -50
SPARSEATTN_WIDE_PLANNERS=1 timeout 60 ./selftest.test -test.run 'TestRunPlannersWide' -test.v > $OUT/wide.txt 2>&1; echo "wide rc $?"; grep -E -- "--- (FAIL)" $OUT/wide.txt | head; grep -c -- "--- PASS" $OUT/wide.txt
timeout 60 ./cuda.test -test.run 'TestSpargeRowsLayouts|TestSpargePoolMeans|TestAssembleOrder' -test.v > $OUT/cudatests.txt 2>&1; echo "cuda tests rc $?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/cudatests.txt
SPARSEATTN_KERNEL_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 60 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | sed 's/.*planner_kernels_test.go:[0-9]*: //' | tee $OUT/kernels.txt
for b in cuda_bk32 cuda; do echo "== $b"; SPARSEATTN_KERNEL_BENCH=unisparse SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 30 ./$b.test -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 | grep "N="; done | tee $OUT/bk32.txt
SPARSEATTN_PLANNER_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768,65536 timeout 120 ./cuda.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's/.*go:[0-9]*: //' | tee $OUT/plannertimes.txt
echo "at $(( $(date +%s) - s ))s"
timeout 70 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 150 > $OUT/peers.jsonl; echo "peers rc $? at $(( $(date +%s) - s ))s"
