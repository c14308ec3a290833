#!/bin/bash
# usage: bin/s26/r2.sh — sparge 8K plan cost (this build against cuda_old.test) and the planner self-tests
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192
./cuda.test -test.run 'TestSpargePoolVariants$' -test.v 2>&1 | grep "µs" | head -4 | tee $OUT/pool.txt
for b in cuda_old cuda cuda_old cuda; do
  echo "== $b llm"; SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm ./$b.test -test.run 'TestSpargePlanTimes$' -test.v 2>&1 | grep -E "dense run|CDF τ=0.95 \(θ" 
done 2>&1 | tee $OUT/llm8k.txt
for b in cuda_old cuda; do echo "== $b"; SPARSEATTN_PLANNER_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 ./$b.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "ms|%" | head -12; done 2>&1 | tee $OUT/plannertimes.txt
./cuda.test -test.run 'TestAssembleOrder|TestSpargePoolMeans|TestSpargeRowsLayouts' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|rows,|differ" | tee $OUT/cudatests.txt
timeout 300 ./selftest.test -test.run 'TestRunPlanners|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $?"
grep -c "^    --- PASS\|^--- PASS" $OUT/selftest.txt; grep -E "FAIL" $OUT/selftest.txt | head -20; tail -3 $OUT/selftest.txt
