#!/bin/bash
# usage: bin/s27/call1.sh — sparge's float32 pool (cuda.test) against the build before (cuda_old.test), the sparge device tests, planner times, the full device self-test
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/device.txt
timeout 90 ./cuda.test -test.run 'TestSpargePoolMeans|TestSpargeRowsLayouts|TestAssembleOrder' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|rows|differ|    --- " | tee $OUT/cudatests.txt
export SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192
for b in cuda_old cuda; do echo "== $b"; timeout 40 ./$b.test -test.run 'TestSpargePoolVariants$' -test.v 2>&1 | grep "µs" | head -4; done 2>&1 | tee $OUT/pool.txt
for b in cuda_old cuda cuda_old cuda; do
  echo "== $b llm"; SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm timeout 40 ./$b.test -test.run 'TestSpargePlanTimes$' -test.v 2>&1 | grep -E "dense run|CDF τ=0.95 \(θ"
done 2>&1 | tee $OUT/llm8k.txt
echo "== cuda offset 1.5"; timeout 60 ./cuda.test -test.run 'TestSpargePlanTimes$' -test.v 2>&1 | grep -E "dense run|CDF τ=0.95 \(θ" | tee $OUT/offset8k.txt
unset SPARSEATTN_SPARGE_BENCH SPARSEATTN_SPARGE_BENCH_N
SPARSEATTN_PLANNER_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 110 ./cuda.test -test.run 'TestPlannerTimes$' -test.v > $OUT/plannertimes.txt 2>&1; echo "plannertimes rc $?"; grep -E "%" $OUT/plannertimes.txt | head -40
timeout 270 ./selftest.test -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $?"
echo "PASS lines: $(grep -c -- '--- PASS' $OUT/selftest.txt)  FAIL lines: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
grep -E -- "--- FAIL|rows differ [1-9]" $OUT/selftest.txt | head -10; grep -E '^--- (PASS|FAIL)' $OUT/selftest.txt | head -30; tail -2 $OUT/selftest.txt
