#!/bin/bash
# usage: bin/s28/call1.sh — first device run of the outlier-led twins: full device self-test, planner times, S2O stage times
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 300 ./selftest.test -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $? at $(( $(date +%s) - s ))s"
echo "PASS lines: $(grep -c -- '--- PASS' $OUT/selftest.txt)  FAIL lines: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
grep -E -- "--- FAIL" $OUT/selftest.txt | head -30; grep -E '^--- (PASS|FAIL)' $OUT/selftest.txt | head -30; tail -2 $OUT/selftest.txt
SPARSEATTN_PLANNER_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 110 ./cuda.test -test.run 'TestPlannerTimes$|TestS2OPlanStages$' -test.v > $OUT/plannertimes.txt 2>&1; echo "plannertimes rc $? at $(( $(date +%s) - s ))s"; grep -E "%" $OUT/plannertimes.txt | head -60
